"""``registry validate``: check profile-set files against the spec, touching no database.

Only the YAML loader and the pure checks are imported here, so validating never pays for (or
needs) SQLAlchemy or a database.
"""

from __future__ import annotations

import sys

import click

from registry_db.cli.output import format_option, handle_errors, json_option, report_findings
from registry_db.sources.profile_set import validate_paths


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--strict", is_flag=True,
              help="Also refuse a profile key two sets hold, and read the other files of "
                   "each given file's folder to check the rules across files.")
@click.option("-r", "--recursive", is_flag=True,
              help="Read folders' subfolders too (hidden ones skipped).")
@json_option
@format_option
@handle_errors
def validate(paths: tuple[str, ...], strict: bool, recursive: bool, as_json: bool,
             output_format: str) -> None:
    """Check profile-set files, or folders of *.yaml / *.yml files, against the spec.

    Folders are read one level deep (-r: every level), hidden files skipped; a folder without
    YAML files is an error, and a *.yaml link that leads nowhere a warning. Every problem of
    every file is reported, one per line on stderr as FILE:LINE:COL: PATH: MESSAGE. Exits 1
    if any problem is an error; warnings alone (a set named differently from its file) exit
    0. --strict adds the rule that no two sets hold one profile key (which import only warns
    of and the resolver refuses) and, for
    each file given, reads the rest of its folder too, so that a pre-commit hook given only
    the changed files still sees a set name or key they share with the others (only the
    given files' problems are reported). --format github prints GitHub annotations. Touches
    no database.

    \b
    Example:
        registry validate seed/acceptance/
        registry validate my-set.yaml --json
        registry validate --strict --format github acceptance/new.yaml
    """
    if as_json and output_format != "text":
        raise click.UsageError("--json and --format github cannot be used together")
    sets, findings = validate_paths(paths, recursive=recursive, strict=strict)
    report_findings(findings, as_json=as_json, github=output_format == "github")
    if any(f.is_error for f in findings):
        sys.exit(1)
    if not as_json:
        profiles = sum(len(s.profiles) for s in sets)
        click.echo(f"{len(sets)} file(s), {len(sets)} set(s), {profiles} profile(s): valid",
                   err=True)
