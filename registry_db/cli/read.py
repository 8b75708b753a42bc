"""``registry list``, ``show``, ``conflicts`` and ``export``: what the imports left behind.

Thin over :mod:`registry_db.store.read` and :mod:`registry_db.importing.export`. Every listing is
ordered (sets by name, conflicts by key), so output can be diffed and tested.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from registry_db.cli.output import (
    annotation,
    as_of_option,
    complete_set_names,
    emit_json,
    emit_rows,
    format_option,
    handle_errors,
    json_option,
    labelled_time,
    output_options,
    progress,
    readable_list,
    shorten,
    table_options,
    terminal_width,
    uncertainty_json,
    with_stderr,
    wrapped,
)
from registry_db.model import INT_LIMIT, visible


class _ListsSets(click.Command):
    """``list`` lists sets; a profile filter given to it (``list --model M``, what a new user
    tries first) is pointed at ``registry profiles``, which takes it."""

    FILTERS = ("--model", "--method", "--k", "--thinking", "--category", "--set")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            if exc.option_name not in self.FILTERS:
                raise
            raise click.UsageError(
                f"No such option: {exc.option_name}; `list` lists the sets, and `registry "
                f"profiles {exc.option_name} ...` lists the profiles that match", ctx) from None


@click.command("list", cls=_ListsSets)
@output_options
@table_options
@click.pass_obj
@handle_errors
def list_(settings: Any, as_json: bool, as_csv: bool, as_nl: bool) -> None:
    """List the profile sets: name, file, profiles, caveats, imported_at.

    \b
    Example:
        registry list
        registry list --csv > sets.csv
    """
    from registry_db.cli.fast import read_cursor
    from registry_db.store import dbapi_read

    with read_cursor(settings.url) as (cur, dialect, engine):
        sets = dbapi_read.list_sets(cur, dialect) if engine is None else _store().list_sets(engine)
    emit_rows(["name", "file", "profiles", "caveats", "imported_at"],
              [(s.name, s.file, s.profiles, s.caveats, s.imported_at.isoformat())
               for s in sets], as_json=as_json, as_csv=as_csv, as_nl=as_nl)


@click.command("show")
@click.argument("set_name", metavar="SET", shell_complete=complete_set_names)
@as_of_option
@json_option
@table_options
@click.pass_obj
@handle_errors
def show(settings: Any, set_name: str, as_of: Any, as_json: bool) -> None:
    """Show one set: its file, caveats and profiles.

    Each profile's row gives its AL (with its standard error, `± S`, when counts are
    stored), per-position rates, method, hardware and source; a profile's rationale and
    copied_from follow the table. --json prints the set in the spec's form (as `export` writes
    it) plus `file`, `imported_at` and `revision`, and each profile's `counts` and
    `uncertainty` (null without counts). --as-of TIME shows the set as the registry held it
    then.

    \b
    Example:
        registry show inferencex-golden-al
        registry show inferencex-golden-al --json
        registry show old-golden-curves --as-of 2026-11-30T12:00:00Z
    """
    from registry_db.model import NO_GIT_ORIGIN

    shown = None if as_of is not None else _shown_fast(settings.url, set_name)
    if shown is None:  # as of a time or label, not opened at the head, or no such set
        with settings.registry(readonly=True) as engine, engine.connect() as conn:
            shown = _shown(conn, set_name, labelled_time(conn, as_of))
    ps, imported_at, revision, git = shown
    if as_json:
        from registry_db.yaml.render import set_document

        doc = set_document(ps)
        for p, shown in zip(ps.profiles, doc["profiles"]):
            shown.setdefault("counts", None)
            shown["uncertainty"] = uncertainty_json(
                None if p.counts is None else p.counts.uncertainty(p.num_spec_tokens))
        emit_json({"name": ps.name, "file": ps.file, "imported_at": imported_at.isoformat(),
                   "revision": revision,
                   **(NO_GIT_ORIGIN if git is None else git.to_json()),
                   "caveats": list(ps.caveats), "profiles": doc["profiles"]})
        return
    width = terminal_width()
    # Control characters escaped throughout. Prose (caveats, rationale) wraps on its own; the
    # name and path are shortened like a table's cells.
    name, file = visible(ps.name), visible(ps.file or "")
    click.echo(f"set:      {name if width is None else shorten(name, width - 10, middle=True)}")
    click.echo(f"file:     {file if width is None else shorten(file, width - 10)}")
    click.echo(f"imported: {imported_at.isoformat()}")
    click.echo(f"revision: {revision}")
    if git is not None:
        where = visible(git.path)
        where = where if width is None else shorten(where, max(width - 60, 12))
        click.echo(f"git:      {git.commit}{' (dirty)' if git.dirty else ''}  {where}")
    if ps.caveats:
        click.echo("caveats:")
        for c in ps.caveats:
            click.echo(_prose("  - ", c, width))
    click.echo("")
    emit_rows(["profile", "acceptance_length", "per_position_rates", "method", "hardware",
               "source"],
              [(p.label, with_stderr(p.acceptance_length, None if p.counts is None
                                     else p.counts.uncertainty(p.num_spec_tokens)),
                readable_list(p.per_position_rates), p.method,
                p.provenance.hardware if p.provenance else None,
                p.provenance.source if p.provenance else None) for p in ps.profiles])
    notes = [p for p in ps.profiles if p.rationale or p.copied_from]
    if notes:
        click.echo("")
        for p in notes:
            click.echo(f"{visible(p.label)}:")
            if p.copied_from:
                click.echo(f"  copied_from: {visible(p.copied_from)}")
            if p.rationale:
                click.echo(_prose("  rationale:   ", p.rationale, width))


def _store() -> Any:
    """The SQLAlchemy readers, for a registry the DB-API readers did not open."""
    from registry_db.store import read

    return read


def _prose(lead: str, text: str, width: int | None) -> str:
    """A caveat or rationale after ``lead``, each of its lines wrapped to the terminal's width
    (control characters escaped); whole in a pipe."""
    if width is None:
        return lead + _lines(text)
    pad = " " * len(lead)
    out = []
    for n, line in enumerate(visible(line) for line in text.split("\n")):
        out += wrapped((lead if n == 0 else pad) + line, width, pad)
    return "\n".join(out)


def _lines(text: str) -> str:
    return "\n".join(visible(line) for line in text.split("\n"))


def _shown_fast(url: str, name: str) -> tuple[Any, Any, int, Any] | None:
    """:func:`_shown` of a current set through the DB-API reader; None when it does not open
    the registry or holds no such set."""
    from registry_db.cli.fast import read_cursor
    from registry_db.store import dbapi_read

    with read_cursor(url) as (cur, dialect, engine):
        if engine is not None:
            return None
        ps = dbapi_read.load_set(cur, dialect, name)
        summary = dbapi_read.set_summary(cur, dialect, name)
        revisions = dbapi_read.history(cur, dialect, name)
        if ps is None or summary is None or not revisions:
            return None
        return ps, summary.imported_at, revisions[0].revision, revisions[0].git


def _shown(conn: Any, name: str, as_of: Any) -> tuple[Any, Any, int, Any]:
    """The set ``show`` shows, its time, revision and git origin: now, or as of a time (the
    history)."""
    from registry_db import history
    from registry_db.errors import NotFound
    from registry_db.store import read as store

    if as_of is not None:
        [then] = history.held(conn, [name], as_of=as_of)
        return (then.set, then.imported_at, then.revision,
                history.origin_of(conn, then.set.name, then.revision))
    try:
        ps = store.load_set(conn, name)
    except NotFound:
        gone = history.deleted_message(conn, name)
        if gone is None:
            raise
        raise NotFound(gone) from None
    summary = store.set_summary(conn, name)
    latest = history.history(conn, name)[0]
    return ps, summary.imported_at, latest.revision, latest.git


@click.command("conflicts")
@click.option("--check", is_flag=True,
              help="Exit 1 when any conflict exists (for CI); the listing is printed as usual.")
@output_options
@table_options
@format_option
@click.pass_obj
@handle_errors
def conflicts(settings: Any, check: bool, as_json: bool, as_csv: bool,
              as_nl: bool, output_format: str) -> None:
    """List profile keys that two or more sets hold (the resolver refuses them).

    --format github prints one GitHub annotation per key and set instead, on the file the
    set was imported from.

    \b
    Example:
        registry conflicts
        registry conflicts --json
        registry conflicts --check   # in CI: fails when any key is held twice
        registry conflicts --check --format github
    """
    from registry_db.cli.fast import read_cursor
    from registry_db.store import dbapi_read

    if output_format == "github" and (as_json or as_csv or as_nl):
        raise click.UsageError("--format github prints annotations; drop --json, --csv, --nl")
    with read_cursor(settings.url) as (cur, dialect, engine):
        # The DB-API reader when the registry opened at the head; else the engine's.
        reader: Any = _store() if engine is not None else dbapi_read
        bind = (engine,) if engine is not None else (cur, dialect)
        found = reader.conflicts(*bind)
        files = {s.name: s.file for s in reader.list_sets(*bind)} if output_format == \
            "github" else {}
    if output_format == "github":
        for c in found:
            for name in c.sets:
                click.echo(annotation("error" if check else "warning",
                                      f"profile {c.label} is held by sets {', '.join(c.sets)}; "
                                      "the resolver refuses it, so keep it in one set",
                                      file=files.get(name), title="conflict"))
        if check and found:
            click.echo(f"{len(found)} conflicting profile key(s)", err=True)
            sys.exit(1)
        return
    columns = ["profile", "model", "speculative_method", "num_spec_tokens", "thinking",
               "category", "set_count", "sets"]
    emit_rows(columns, [(c.label, *c.key, c.set_count,
                         list(c.sets) if as_json or as_nl else " ".join(c.sets)) for c in found],
              as_json=as_json, as_csv=as_csv, as_nl=as_nl)
    if check and found:
        click.echo(f"{len(found)} conflicting profile key(s)", err=True)
        sys.exit(1)


@click.command("export")
@click.argument("names", nargs=-1, metavar="[SET...]", shell_complete=complete_set_names)
@click.option("-o", "--output", "out_dir", default=".", show_default=True, metavar="DIR",
              help="Folder for the <set>.yaml files (created if missing); '-' prints one "
                   "set to stdout (several are refused: import reads one set per file).")
@click.option("--revision", type=click.IntRange(min=1, max=INT_LIMIT), metavar="N",
              help="Export revision N of the one SET named (`registry history SET`).")
@as_of_option
@click.option("--force", is_flag=True,
              help="Replace existing files whose content differs from the export.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.pass_obj
@handle_errors
def export(settings: Any, names: tuple[str, ...], out_dir: str, revision: int | None,
           as_of: Any, force: bool, quiet: bool) -> None:
    """Write sets as YAML (every set when none is named), one <set>.yaml per set.

    The files import back to the same rows; a provenance shared by several profiles is
    written once as an anchor and referred to by aliases. An existing file of the same name
    whose content differs (a hand-written file, its comments) is not replaced unless --force
    is given: the export then writes nothing and exits 1, naming the files. Prints the paths
    written. --revision N writes one set's revision N, --as-of TIME the sets as the registry
    held them then; a deleted set is exported from its history this way (exporting it by name
    alone says when it was deleted and which revision holds it).

    \b
    Example:
        registry export -o acceptance/
        registry export inferencex-golden-al -o -
        registry export old-golden-curves --revision 2 -o acceptance/
    """
    from registry_db import history
    from registry_db.importing import export as exporter

    if revision is not None and as_of is not None:
        raise click.UsageError("--revision and --as-of cannot be used together")
    if revision is not None and len(set(names)) != 1:
        raise click.UsageError(f"--revision N names a revision of one SET; "
                               f"{len(set(names))} were given")
    if out_dir == "-":
        exporter.one_set_only(names)
    with settings.registry(readonly=True) as engine:
        as_of = labelled_time(engine, as_of)
        if revision is not None or as_of is not None:
            sets = [h.set for h in history.held(engine, list(names) or None, as_of=as_of,
                                                revision=revision)]
        else:
            sets = exporter.current_sets(engine, names)
        if out_dir == "-":
            click.echo(exporter.render_one(sets), nl=False)
            return
        with progress(quiet) as bar:
            paths = exporter.write_sets(sets, out_dir, force=force, progress=bar)
    for path in paths:
        click.echo(str(path))
