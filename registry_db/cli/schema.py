"""``registry schema``: the JSON Schema of an input, as shipped in the package."""

from __future__ import annotations

from importlib import resources

import click

#: The inputs, as ``registry_db.inputs.json_schema.NAMES`` (kept here so that printing a file
#: does not import the tables; a test holds the two equal).
NAMES = ("profile-set", "workload", "scenario", "deployment", "batch-line")


@click.command()
@click.argument("name", type=click.Choice(NAMES), default="profile-set", required=False)
def schema(name: str) -> None:
    """Print the JSON Schema (draft 2020-12) of an input, for editors and CI.

    NAME is profile-set (the default), workload, scenario, deployment or batch-line. The
    schema is generated from the same tables `registry validate` checks by; it states every
    rule JSON Schema can (docs/json-schema.md lists the few it cannot, such as AL <= K + 1),
    so `registry validate` stays the judge. Save it beside your files and name it on the
    first line of each, for completion and underlined mistakes as you type:

    \b
        # yaml-language-server: $schema=../.schemas/profile-set.schema.json

    \b
    Example:
        registry schema > .schemas/profile-set.schema.json
        registry schema deployment
    """
    text = resources.files("registry_db.inputs").joinpath(
        "schemas", f"{name}.schema.json").read_text(encoding="utf-8")
    click.echo(text, nl=False)
