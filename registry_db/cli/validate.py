"""``registry validate``: check profile-set files against the spec, touching no database.

Only the YAML loader and the pure checks are imported here, so validating never pays for (or
needs) SQLAlchemy or a database.
"""

from __future__ import annotations

import sys

import click

from registry_db.cli.output import handle_errors, json_option, report_findings
from registry_db.sources.profile_set import check_paths


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@json_option
@handle_errors
def validate(paths: tuple[str, ...], as_json: bool) -> None:
    """Check profile-set files, or folders of *.yaml / *.yml files, against the spec.

    Folders are read one level deep, hidden files skipped; a folder without YAML files is an
    error, and a *.yaml link that leads nowhere a warning. Every problem of every file is
    reported, one per line on stderr as FILE:LINE:COL: PATH: MESSAGE. Exits 1 if any problem
    is an error; warnings alone (such as a set named differently from its file) exit 0.
    Touches no database.

    \b
    Example:
        registry validate seed/acceptance/
        registry validate my-set.yaml --json
    """
    sets, findings = check_paths(paths)
    report_findings(findings, as_json=as_json)
    if any(f.is_error for f in findings):
        sys.exit(1)
    if not as_json:
        profiles = sum(len(s.profiles) for s in sets)
        click.echo(f"{len(sets)} file(s), {len(sets)} set(s), {profiles} profile(s): valid",
                   err=True)
