"""``registry history``, ``diff``, ``delete`` and ``restore``: the revisions every import and
deletion leaves.

Thin over :mod:`registry_db.history`: parse, call, render. ``history`` lists revisions
newest first; ``diff`` prints one line per changed field (``old → new``); ``delete`` removes sets
from the current registry in one transaction, each deletion a revision of its own; ``restore``
writes an earlier revision's content back as a new one (:mod:`registry_db.importing.restore`).
"""

from __future__ import annotations

from typing import Any

import click

from registry_db.cli.output import (
    complete_set_names,
    emit_json,
    emit_lines,
    emit_rows,
    handle_errors,
    json_option,
    message_text,
    output_options,
    table_options,
)
from registry_db.model import INT_LIMIT, visible

#: The columns of ``registry history``, in the contract's order.
HISTORY_COLUMNS = ("set", "revision", "action", "imported_at", "file", "profiles",
                   "content_hash", "message", "git_commit", "git_dirty", "git_path")
#: The table's: git's three in one short cell (the commit, `*` when the file was dirty), before
#: the message, whose first line ends the row.
TABLE_COLUMNS = ("set", "revision", "action", "imported_at", "file", "profiles",
                 "content_hash", "commit", "message")


@click.command("history")
@click.argument("set_name", metavar="[SET]", required=False, shell_complete=complete_set_names)
@output_options
@table_options
@click.pass_obj
@handle_errors
def history(settings: Any, set_name: str | None, as_json: bool, as_csv: bool,
            as_nl: bool) -> None:
    """List the revisions of one set (or of every set), newest first.

    Every import that adds or changes a set, and every deletion, is a revision: its number
    (1, 2, … per set), action (added, updated, deleted), time (UTC), file, profile count,
    content hash, message, and, for a file imported from a git work tree, the commit, whether
    the file differed from it (dirty) and its path in the repository. The table shortens the
    hashes (the commit's `*`: dirty) and shows a message's first line; --json, --nl and --csv
    give them whole.

    \b
    Example:
        registry history
        registry history inferencex-golden-al --json
    """
    from registry_db.cli.fast import read_cursor
    from registry_db.store import dbapi_read

    found = None
    with read_cursor(settings.url) as (cur, dialect, engine):
        if engine is None:
            found = dbapi_read.history(cur, dialect, set_name) or None
    if found is None:  # not opened at the head, or no revision (the engine path words it)
        from registry_db import history as store

        with settings.registry(readonly=True) as engine:
            found = store.history(engine, set_name)
    if as_json:
        emit_json({"revisions": [r.to_json() for r in found]})
        return
    if as_nl:
        emit_lines(r.to_json() for r in found)
        return
    if as_csv:
        emit_rows(HISTORY_COLUMNS, [(
            r.set, r.revision, r.action, r.imported_at.isoformat(), r.file, r.profiles,
            r.content_hash, r.message, *((r.git.commit, r.git.dirty, r.git.path) if r.git
                                         else (None, None, None))) for r in found], as_csv=True)
        return
    emit_rows(TABLE_COLUMNS, [(
        r.set, r.revision, r.action, r.imported_at.isoformat(), r.file, r.profiles,
        _short(r.content_hash), None if r.git is None else
        r.git.commit[:12] + ("*" if r.git.dirty else ""), _first_line(r.message))
        for r in found])


def _short(digest: str | None) -> str | None:
    """A hash as a table shows it: 12 characters."""
    return digest if digest is None else digest[:12]


def _first_line(message: str | None) -> str | None:
    """A message as a table's cell: its first line, `…` where more follows."""
    if message is None or "\n" not in message:
        return message
    return message.split("\n", 1)[0].rstrip() + " …"


@click.command("diff")
@click.argument("set_name", metavar="SET", shell_complete=complete_set_names)
@click.option("--from", "from_", type=click.IntRange(min=0, max=INT_LIMIT), metavar="REV",
              help="The older revision (default: the one before --to; 0: nothing).")
@click.option("--to", type=click.IntRange(min=1, max=INT_LIMIT), metavar="REV",
              help="The newer revision (default: the latest).")
@json_option
@click.pass_obj
@handle_errors
def diff(settings: Any, set_name: str, from_: int | None, to: int | None,
         as_json: bool) -> None:
    """Show what changed in a set between two revisions, profile by profile.

    One line per change: `changed PROFILE FIELD: old → new`, `added PROFILE ...` or
    `removed PROFILE ...`; fields are acceptance_length, per_position_rates, counts.*,
    method, provenance.* (source, hardware, sampling.*, settings.*), rationale and
    copied_from. A change of the set's caveats is shown as `(set)`. A changed AL with counts
    on both sides shows how far it moved, z = (new - old) / sqrt(stderr_old² + stderr_new²)
    (--json: the field's "z").

    \b
    Example:
        registry diff inferencex-golden-al
        registry diff inferencex-golden-al --from 1 --to 3 --json
    """
    from registry_db import history as store

    with settings.registry(readonly=True) as engine:
        found = store.diff(engine, set_name, from_, to)
    if as_json:
        emit_json(found.to_json())
        return
    click.echo(render_changes(found.changes))
    start = "nothing" if found.from_ is None else f"revision {found.from_}"
    click.echo(f"{found.set}: {start} → revision {found.to}: {len(found.changes)} change(s)",
               err=True)


def render_changes(changes: Any) -> str:
    """The text form of changes: one line per changed field ("no changes" when none)."""
    lines = [visible(line) for c in changes for line in c.lines()]
    return "\n".join(lines) if lines else "(no changes)"


@click.command("delete")
@click.argument("names", nargs=-1, required=True, metavar="SET...",
                shell_complete=complete_set_names)
@click.option("-m", "--message", metavar="MESSAGE", callback=message_text,
              help="Why, kept with the revisions (may span lines).")
@json_option
@click.pass_obj
@handle_errors
def delete(settings: Any, names: tuple[str, ...], message: str | None, as_json: bool) -> None:
    """Delete sets from the current registry, all in one transaction.

    Each deletion is a revision (`registry history` shows it) and the earlier revisions
    stay. A later import of the same name is a new revision of the same set. An unknown name
    deletes nothing (exit 1) and names the nearest stored sets.

    \b
    Example:
        registry delete old-golden-curves -m "superseded by inferencex-golden-al"
    """
    from registry_db import history as store

    with settings.registry() as engine:
        gone = store.delete_sets(engine, names, message)
    if as_json:
        emit_json({"sets": [{"name": d.name, "file": d.file, "status": "deleted",
                             "profiles": d.profiles, "revision": d.revision} for d in gone]})
        return
    for d in gone:
        click.echo(f"deleted  {visible(d.name)}  (revision {d.revision}, had {d.profiles} "
                   f"profile{'s' if d.profiles != 1 else ''})")


@click.command("restore")
@click.argument("set_name", metavar="SET", shell_complete=complete_set_names)
@click.option("--revision", type=click.IntRange(min=1, max=INT_LIMIT), metavar="N",
              help="The revision to bring back (default: a deleted set's last content).")
@click.option("-m", "--message", metavar="MESSAGE", callback=message_text,
              help="Why, kept with the new revision (default: 'restore of revision N'; "
                   "may span lines).")
@json_option
@click.pass_obj
@handle_errors
def restore(settings: Any, set_name: str, revision: int | None, message: str | None,
            as_json: bool) -> None:
    """Bring a set back from its history: a new revision with that revision's content.

    Deleted is not gone: without --revision, a deleted set comes back as it last was. With
    --revision N, any set goes back to revision N (a set in the registry needs it). It is
    written as an import of that content would be: one transaction, a new revision `added`
    or `updated` (or `unchanged` when the set already holds it), the import's warnings.

    \b
    Example:
        registry restore old-golden-curves
        registry restore inferencex-golden-al --revision 2 -m "the re-run erred"
    """
    from registry_db.cli.output import report_findings
    from registry_db.importing.restore import restore as restore_set

    with settings.registry() as engine:
        done = restore_set(engine, set_name, revision, message)
    if done.warnings:
        report_findings(list(done.warnings), as_json=False)
    if as_json:
        emit_json({"sets": [done.to_json()]})
        return
    r = done.result
    count = f"({r.profiles} profile{'s' if r.profiles != 1 else ''})"
    what = (f"revision {done.from_revision} is what it holds" if done.revision is None
            else f"revision {done.from_revision} -> revision {done.revision}")
    click.echo(f"{r.status}  {r.name}  {count}  {what}")
