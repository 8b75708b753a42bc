"""The ``registry`` command line: parse, call the library, render, map errors to exit codes.

Commands live in one module each beside this one and are imported only when called, so that
``registry validate`` does not pay for SQLAlchemy and ``registry resolve`` does not pay for
Alembic. Here: the group, its ``--database`` option and the settings every command reads;
:mod:`registry_db.cli.output` holds the output options and the error-to-exit-code mapping.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import click

from registry_db import interrupts
from registry_db.errors import OUTPUT_ERRNOS

# name -> "module:attribute"; the module is imported only when the command runs or shows help.
COMMANDS: dict[str, str] = {
    "db": "registry_db.cli.db:db",
    "validate": "registry_db.cli.validate:validate",
    "import": "registry_db.cli.importing:import_",
    "list": "registry_db.cli.read:list_",
    "show": "registry_db.cli.read:show",
    "profiles": "registry_db.cli.profiles:profiles",
    "conflicts": "registry_db.cli.read:conflicts",
    "export": "registry_db.cli.read:export",
    "query": "registry_db.cli.query:query",
    "resolve": "registry_db.cli.resolve:resolve",
    "exec": "registry_db.cli.exec:exec_",
    "check": "registry_db.cli.check:check",
    "ingest": "registry_db.cli.ingest:ingest",
    "coverage": "registry_db.cli.coverage:coverage",
    "plot": "registry_db.cli.plot:plot",
    "history": "registry_db.cli.history:history",
    "diff": "registry_db.cli.history:diff",
    "delete": "registry_db.cli.history:delete",
    "restore": "registry_db.cli.history:restore",
    "label": "registry_db.cli.labels:label",
    "labels": "registry_db.cli.labels:labels",
    "serve": "registry_db.cli.serve:serve",
    "schema": "registry_db.cli.schema:schema",
}


class WholeHelpGroup(click.Group):
    """A click group whose command listing shows each command's whole first sentence.

    click cuts short help to fit one line ("Resolve the acceptance a run uses:..."); here
    the formatter wraps it instead, so the listing reads as the commands' help begins.
    """

    #: Longer than any first sentence: click's cut never applies.
    SHORT_HELP_LIMIT = 10_000

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(self.SHORT_HELP_LIMIT)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class LazyGroup(WholeHelpGroup):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Every argument of every command, once: bytes that are not UTF-8 arrive as lone
        # surrogates, which no database, file name check or output stream can carry.
        for n, arg in enumerate(args, 1):
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:
                shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                raise click.UsageError(f"argument {n} ({shown!r}) is not UTF-8 text; "
                                       "registry reads its arguments as UTF-8", ctx) from None
            if "\0" in arg:
                raise click.UsageError(f"argument {n} holds a NUL character", ctx)
        return super().parse_args(ctx, args)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # The CLI's edge: output that cannot be written (a full disk, `> /dev/full`) is one
        # line on stderr, exit 1, not a traceback; click itself handles only a closed pipe.
        if not args and kwargs.get("args") is None:  # sys.argv: this process's command line
            interrupts.until_exit()
        try:
            try:
                return super().main(*args, **kwargs)
            finally:
                sys.stdout.flush()
        except OSError as exc:
            if exc.errno not in OUTPUT_ERRNOS:
                raise
            with contextlib.suppress(OSError):  # nothing more reaches stdout, nor its flush
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            click.echo(f"Error: cannot write the output: {exc.strerror or exc}", err=True)
            sys.exit(1)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        return accept_database(getattr(importlib.import_module(module), attr))


#: Where the database a command was given (``registry CMD -d URL``) is kept for shell
#: completion, which parses the words without running the group's callback.
DATABASE_META = "registry_db.database"


def _database_after(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """``-d URL`` given after a command's name: the same as before it (as sqlite-utils takes the
    database after its commands); given both ways, the two must agree."""
    if value is None:
        return
    settings = ctx.find_object(Settings)
    given = ctx.meta.get(DATABASE_META) or (settings.database if settings else None)
    if given is not None and given != value:
        raise click.UsageError(f"-d/--database is given twice, as {given!r} and {value!r}; "
                               "give it once (before or after the command)", ctx)
    ctx.meta[DATABASE_META] = value
    if settings is not None:
        settings.database = value


_DATABASE_AFTER = click.Option(
    ["-d", "--database"], metavar="URL", expose_value=False, is_eager=True,
    callback=_database_after,
    help="The database, as the group's -d (either place; both must agree).")


def accept_database(cmd: click.Command) -> click.Command:
    """A copy of ``cmd`` (and of every command under it, for a group) that also takes
    ``-d/--database``; the module's own command is left as it is."""
    if any(p.name == "database" for p in cmd.params):
        return cmd
    out = copy.copy(cmd)
    out.params = [*cmd.params, _DATABASE_AFTER]
    if isinstance(cmd, click.Group) and isinstance(out, click.Group):
        out.commands = {name: accept_database(sub) for name, sub in cmd.commands.items()}
    return out


class Settings:
    """What the group's options decided, handed to every command through ``ctx.obj``."""

    def __init__(self, database: str | None):
        self.database = database

    @property
    def url(self) -> str:
        """The database URL: ``--database``, else ``REGISTRY_DATABASE_URL``, else ./registry.db."""
        from registry_db.store.urls import resolve_url

        return resolve_url(self.database)

    @contextlib.contextmanager
    def registry(self, *, readonly: bool = False, create: bool = False) -> Iterator[Any]:
        """An engine on the registry (refused when its schema is old), with driver errors
        translated; disposed afterwards.

        Every command opens the registry here. A missing SQLite file is an error (exit 3, "no
        registry at PATH") unless the command writes and passes ``create=True``: a command
        that only reads must not turn a typo in ``-d`` into a new, empty database.
        ``readonly`` for commands that only read: an existing SQLite file is opened read-only
        (so a read-only file or folder works).
        """
        from registry_db.store.migrate import registry

        with registry(self.url, readonly=readonly, create=create) as engine:
            yield engine


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-d", "--database", metavar="URL",
              help="Database URL or SQLite file path. Default: $REGISTRY_DATABASE_URL, "
                   "else sqlite:///registry.db.")
@click.version_option(package_name="registry_db", prog_name="registry")
@click.pass_context
def main(ctx: click.Context, database: str | None) -> None:
    """The registry of speculative-decoding acceptance profiles.

    \b
    Example:
        registry import seed/acceptance/
        registry resolve --model deepseek-v4.1-flash --method dspark --k 5 \\
            --thinking off --category coding
    """
    if database is not None:
        ctx.meta[DATABASE_META] = database
    ctx.obj = Settings(database)
