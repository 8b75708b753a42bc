"""``registry list``, ``show``, ``conflicts`` and ``export``: what the imports left behind.

Thin over :mod:`registry_db.store.read` and :mod:`registry_db.store.export`. Every listing is ordered
(sets by name, conflicts by key), so output can be diffed and tested.
"""

from __future__ import annotations

from typing import Any

import click

from registry_db.cli.output import emit_json, emit_rows, handle_errors, json_option, output_options




@click.command("list")
@output_options
@click.pass_obj
@handle_errors
def list_(settings: Any, as_json: bool, as_csv: bool) -> None:
    """List the profile sets: name, file, profiles, caveats, imported_at.

    \b
    Example:
        registry list
        registry list --csv > sets.csv
    """
    from registry_db.store import read as store

    with settings.registry(readonly=True) as engine:
        sets = store.list_sets(engine)
    emit_rows(["name", "file", "profiles", "caveats", "imported_at"],
              [(s.name, s.file, s.profiles, s.caveats, s.imported_at.isoformat())
               for s in sets], as_json=as_json, as_csv=as_csv)


@click.command("show")
@click.argument("set_name", metavar="SET")
@json_option
@click.pass_obj
@handle_errors
def show(settings: Any, set_name: str, as_json: bool) -> None:
    """Show one set: its file, caveats and profiles.

    --json prints the set in the spec's form (as `export` writes it) plus `file` and
    `imported_at`.

    \b
    Example:
        registry show inferencex-golden-al
        registry show inferencex-golden-al --json
    """
    from registry_db.store import read as store
    from registry_db.store.export import set_document

    with settings.registry(readonly=True) as engine, engine.connect() as conn:
        ps = store.load_set(conn, set_name)
        summary = store.set_summary(conn, set_name)
    if as_json:
        doc = set_document(ps)
        emit_json({"name": ps.name, "file": ps.file,
                   "imported_at": summary.imported_at.isoformat(),
                   "caveats": list(ps.caveats), "profiles": doc["profiles"]})
        return
    click.echo(f"set:      {ps.name}")
    click.echo(f"file:     {ps.file or ''}")
    click.echo(f"imported: {summary.imported_at.isoformat()}")
    if ps.caveats:
        click.echo("caveats:")
        for c in ps.caveats:
            click.echo(f"  - {c}")
    click.echo("")
    emit_rows(["profile", "acceptance_length", "method", "hardware", "source"],
              [(p.label, p.acceptance_length, p.method,
                p.provenance.hardware if p.provenance else None,
                p.provenance.source if p.provenance else None) for p in ps.profiles])


@click.command("conflicts")
@output_options
@click.pass_obj
@handle_errors
def conflicts(settings: Any, as_json: bool, as_csv: bool) -> None:
    """List profile keys that two or more sets hold (the resolver refuses them).

    \b
    Example:
        registry conflicts
        registry conflicts --json
    """
    from registry_db.store import read as store

    with settings.registry(readonly=True) as engine:
        found = store.conflicts(engine)
    columns = ["profile", "model", "speculative_method", "num_spec_tokens", "thinking",
               "category", "set_count", "sets"]
    emit_rows(columns, [(c.label, *c.key, c.set_count,
                         list(c.sets) if as_json else " ".join(c.sets)) for c in found],
              as_json=as_json, as_csv=as_csv)


@click.command("export")
@click.argument("names", nargs=-1, metavar="[SET...]")
@click.option("-o", "--output", "out_dir", default=".", show_default=True, metavar="DIR",
              help="Folder for the <set>.yaml files (created if missing); '-' prints the "
                   "sets to stdout as one YAML stream.")
@click.pass_obj
@handle_errors
def export(settings: Any, names: tuple[str, ...], out_dir: str) -> None:
    """Write sets as YAML (every set when none is named), one <set>.yaml per set.

    The files import back to the same rows; a provenance shared by several profiles is
    written once as an anchor and referred to by aliases. Existing files of the same name
    are replaced. Prints the paths written.

    \b
    Example:
        registry export -o acceptance/
        registry export inferencex-golden-al -o -
    """
    from registry_db.store import export as exporter

    with settings.registry(readonly=True) as engine:
        if out_dir == "-":
            click.echo(exporter.render_sets(engine, names), nl=False)
            return
        paths = exporter.export_sets(engine, names, out_dir)
    for path in paths:
        click.echo(str(path))
