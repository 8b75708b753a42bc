"""``registry list``, ``show``, ``conflicts`` and ``export``: what the imports left behind.

Thin over :mod:`registry_db.store.read` and :mod:`registry_db.store.export`. Every listing is
ordered (sets by name, conflicts by key), so output can be diffed and tested.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from registry_db.cli.output import (
    complete_set_names,
    emit_json,
    emit_rows,
    handle_errors,
    json_option,
    output_options,
    readable_list,
    uncertainty_json,
    with_stderr,
)


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
@click.argument("set_name", metavar="SET", shell_complete=complete_set_names)
@json_option
@click.pass_obj
@handle_errors
def show(settings: Any, set_name: str, as_json: bool) -> None:
    """Show one set: its file, caveats and profiles.

    Each profile's row gives its AL (with its standard error, `± S`, when counts are
    stored), per-position rates, method, hardware and source; a profile's rationale and
    copied_from follow the table. --json prints the set in the spec's form (as `export` writes
    it) plus `file` and `imported_at`, and each profile's `counts` and `uncertainty` (null
    without counts).

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
        for p, shown in zip(ps.profiles, doc["profiles"]):
            shown.setdefault("counts", None)
            shown["uncertainty"] = uncertainty_json(
                None if p.counts is None else p.counts.uncertainty(p.num_spec_tokens))
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
            click.echo(f"{p.label}:")
            if p.copied_from:
                click.echo(f"  copied_from: {p.copied_from}")
            if p.rationale:
                click.echo(f"  rationale:   {p.rationale}")


@click.command("conflicts")
@click.option("--check", is_flag=True,
              help="Exit 1 when any conflict exists (for CI); the listing is printed as usual.")
@output_options
@click.pass_obj
@handle_errors
def conflicts(settings: Any, check: bool, as_json: bool, as_csv: bool) -> None:
    """List profile keys that two or more sets hold (the resolver refuses them).

    \b
    Example:
        registry conflicts
        registry conflicts --json
        registry conflicts --check   # in CI: fails when any key is held twice
    """
    from registry_db.store import read as store

    with settings.registry(readonly=True) as engine:
        found = store.conflicts(engine)
    columns = ["profile", "model", "speculative_method", "num_spec_tokens", "thinking",
               "category", "set_count", "sets"]
    emit_rows(columns, [(c.label, *c.key, c.set_count,
                         list(c.sets) if as_json else " ".join(c.sets)) for c in found],
              as_json=as_json, as_csv=as_csv)
    if check and found:
        click.echo(f"{len(found)} conflicting profile key(s)", err=True)
        sys.exit(1)


@click.command("export")
@click.argument("names", nargs=-1, metavar="[SET...]", shell_complete=complete_set_names)
@click.option("-o", "--output", "out_dir", default=".", show_default=True, metavar="DIR",
              help="Folder for the <set>.yaml files (created if missing); '-' prints one "
                   "set to stdout (several are refused: import reads one set per file).")
@click.option("--force", is_flag=True,
              help="Replace existing files whose content differs from the export.")
@click.pass_obj
@handle_errors
def export(settings: Any, names: tuple[str, ...], out_dir: str, force: bool) -> None:
    """Write sets as YAML (every set when none is named), one <set>.yaml per set.

    The files import back to the same rows; a provenance shared by several profiles is
    written once as an anchor and referred to by aliases. An existing file of the same name
    whose content differs (a hand-written file, its comments) is not replaced unless --force
    is given: the export then writes nothing and exits 1, naming the files. Prints the paths
    written.

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
        paths = exporter.export_sets(engine, names, out_dir, force=force)
    for path in paths:
        click.echo(str(path))
