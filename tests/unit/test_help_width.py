"""Every command's help, examples included, within 80 columns: an example a reader copies from
a terminal is one they can read whole (a ``\\b`` block is never rewrapped by click)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from registry_db.cli.group import main


def commands(cmd: click.Command, path: list[str]):
    yield path
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None
            yield from commands(sub, [*path, name])


PATHS = list(commands(main, []))


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "registry")
def test_help_fits_80_columns(path):
    result = CliRunner().invoke(main, [*path, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    wide = [line for line in result.output.splitlines() if len(line) > 80]
    assert wide == []


def test_every_command_is_walked():
    assert ["ingest", "vllm-metrics"] in PATHS and ["db", "upgrade"] in PATHS
    assert len(PATHS) > 25
