"""``registry import``: profile-set files into the database, all or nothing.

Thin over :mod:`registry_db.importing.write`: validate every file first (nothing is opened or
written when one is invalid), then open the database and write every set in one transaction. A
progress bar goes to stderr for large imports, and only when stderr is a terminal
(:func:`registry_db.cli.output.progress`).
"""

from __future__ import annotations

from typing import Any

import click

from registry_db.cli.output import emit_json, handle_errors, json_option, message_text, progress
from registry_db.model import ImportStatus, visible


@click.command("import")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--dry-run", is_flag=True,
              help="Validate and report what would be added, updated, unchanged or deleted, "
                   "with each updated set's per-profile changes; write nothing.")
@click.option("--prune", is_flag=True,
              help="Also delete every stored set that the given files do not declare.")
@click.option("-m", "--message", metavar="MESSAGE", callback=message_text,
              help="Why, kept with every revision this import writes (may span lines).")
@click.option("-r", "--recursive", is_flag=True,
              help="Read folders' subfolders too (hidden ones skipped).")
@click.option("-q", "--quiet", is_flag=True,
              help="Print no warnings (overlapping keys, values that drift, names that differ "
                   "from file names, skipped subfolders) and no progress bar; errors are still "
                   "printed.")
@json_option
@click.pass_obj
@handle_errors
def import_(settings: Any, paths: tuple[str, ...], dry_run: bool, prune: bool,
            message: str | None, recursive: bool, quiet: bool, as_json: bool) -> None:
    """Validate profile-set files, then write them all in one transaction.

    PATH is a file or a folder (its *.yaml and *.yml files, sorted, hidden ones skipped; -r also
    its subfolders'). If any file is invalid, every problem is printed and nothing is written
    (exit 1). A set already in the database is replaced by its file's content; a file whose
    content has not changed is reported `unchanged` and not rewritten. A set that now comes from
    another file than at its last import is reported `(moved from OLD)`. Sets that share profile
    keys get one warning per pair of sets; a value with counts that moves by |z| > 3 against the
    stored revision (both with counts) gets a warning of its own. Every set added or updated
    becomes a new revision (`registry history`); --prune deletes the stored sets the files do
    not declare, each deletion a revision too. Waits for other writers up to
    REGISTRY_LOCK_TIMEOUT seconds (exit 3 after that).

    \b
    Example:
        registry import seed/acceptance/
        registry import --prune -m "re-ran K=6..8 on the new image" acceptance/
        registry import --dry-run acceptance/new-set.yaml
        registry import --quiet acceptance/
        registry -d postgresql://localhost/registry import --json acceptance/
    """
    from registry_db.cli.output import report_findings
    from registry_db.gcpause import gc_paused
    from registry_db.importing import write as importer

    # The command's bulk work builds many small objects and no cycles (registry_db.gcpause);
    # the pause is the command's, so a library caller's collector is left as it is.
    with progress(quiet) as bar, gc_paused():
        loaded = importer.load_skipping(paths, lambda hashes: _known(settings, hashes), bar,
                                        recursive=recursive)
        if dry_run:
            report = _dry_run(settings, loaded, prune)
        else:
            with settings.registry(create=True) as engine:
                report = importer.import_loaded(engine, loaded, progress=bar, prune=prune,
                                                message=message)
    warnings = [] if quiet else list(loaded.warnings) + list(report.warnings)
    if warnings:
        report_findings(warnings, as_json=False)
    if as_json:
        emit_json(report.to_json())
        return
    _print_report(report)


def _known(settings: Any, hashes: Any) -> Any:
    """The files unchanged since their last import, read through a read-only connection; none
    when the registry cannot be read now (opening it to write says why, after validation)."""
    from registry_db.errors import RegistryError
    from registry_db.importing import unchanged

    try:
        with settings.registry(readonly=True) as engine, engine.connect() as conn:
            return unchanged.lookup(conn, hashes)
    except RegistryError:
        return {}


def _dry_run(settings: Any, loaded: Any, prune: bool) -> Any:
    """What the import would do, read through a read-only connection; against no registry (a
    missing file, an empty database) every set would be added, and nothing is created."""
    from registry_db.errors import NoRegistry
    from registry_db.importing import write as importer

    try:
        with settings.registry(readonly=True) as engine:
            return importer.import_loaded(engine, loaded, dry_run=True, prune=prune)
    except NoRegistry:
        return importer.preview_loaded(loaded)


def _print_report(report: Any) -> None:
    width_status = max((len(s.status) for s in report.sets), default=0)
    width_name = max((len(s.name) for s in report.sets), default=0)
    for s in report.sets:
        count = f"({s.profiles} profile{'s' if s.profiles != 1 else ''})"
        moved = f"  (moved from {s.moved_from})" if s.moved_from else ""
        click.echo(visible(f"{s.status:<{width_status}}  {s.name:<{width_name}}  {count}  "
                           f"{s.file or ''}{moved}".rstrip()))  # a file's name: one line
    if report.changes:
        from registry_db.cli.history import render_changes

        for name, changes in report.changes:
            click.echo(f"\n{name}:")
            click.echo(render_changes(changes))
    # "deleted" only when --prune deleted something: the summary stays as it was otherwise.
    statuses = [st for st in ImportStatus
                if st != ImportStatus.DELETED or report.count(ImportStatus.DELETED)]
    summary = ", ".join(f"{report.count(st)} {st}" for st in statuses)
    tail = " (dry run: nothing written)" if report.dry_run else ""
    click.echo(f"{len(report.sets)} set(s): {summary}{tail}", err=True)


