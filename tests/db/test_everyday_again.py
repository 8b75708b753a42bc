"""Everyday use, second pass (issue 28) on both backends: `-d` after the subcommand, listings for
programs (CSV with every digit, `--nl`), empty filters that say so, completion of stored names."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from registry_db.cli.group import COMMANDS, main
from tests.conftest import SEED
from tests.helpers import run_cli, write_set

DSV = "deepseek-v4.1-flash"


@pytest.fixture
def seeded(db_url):
    assert run_cli("-d", db_url, "import", str(SEED)).exit_code == 0
    return db_url


def _leaves(cmd: click.Command, path: tuple[str, ...] = ()):
    """Every command of the tree under ``cmd`` with its words (groups included)."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(None):  # type: ignore[arg-type]
            yield from _leaves(cmd.get_command(None, name), (*path, name))  # type: ignore


# --- 28.5: -d after the subcommand ---------------------------------------------------------------

def test_database_is_accepted_after_the_subcommand(seeded):
    before = run_cli("-d", seeded, "list", "--json")
    after = run_cli("list", "--json", "-d", seeded)
    long = run_cli("list", "--database", seeded, "--json")
    assert before.exit_code == after.exit_code == long.exit_code == 0, after.output
    assert json.loads(after.stdout) == json.loads(before.stdout) == json.loads(long.stdout)
    shown = run_cli("show", "inferencex-golden-al", "-d", seeded, "--json")
    assert json.loads(shown.stdout)["name"] == "inferencex-golden-al"
    assert run_cli("db", "current", "-d", seeded).exit_code == 0
    assert run_cli("db", "-d", seeded, "current").exit_code == 0


def test_database_before_and_after_must_agree(seeded, tmp_path):
    same = run_cli("-d", seeded, "list", "-d", seeded)
    assert same.exit_code == 0, same.output
    other = tmp_path / "other.db"
    both = run_cli("-d", seeded, "list", "-d", str(other))
    assert both.exit_code == 2
    assert "-d/--database is given twice" in both.stderr and str(other) in both.stderr
    assert not other.exists()


def test_every_command_takes_database_after_its_name():
    """Every command, present or future, lists -d/--database among its own options."""
    missing = []
    for path, cmd in _leaves(main):
        if not path:
            continue
        opts = {o for p in cmd.params for o in getattr(p, "opts", ())}
        if not {"-d", "--database"} <= opts:
            missing.append(" ".join(path))
    assert missing == []
    help_text = CliRunner().invoke(main, ["profiles", "--help"]).stdout
    assert "-d, --database URL" in help_text


def test_a_missing_file_named_after_the_subcommand_is_no_registry(tmp_path):
    path = tmp_path / "registy.db"
    result = CliRunner().invoke(main, ["list", "-d", str(path)])
    assert result.exit_code == 3 and f"no registry at {path}" in result.stderr
    assert not path.exists()


def test_completion_reads_the_database_given_after_the_subcommand(db_url, tmp_path):
    write_set(tmp_path, "alpha", 1, model="a")
    run_cli("-d", db_url, "import", str(tmp_path))
    words = f"registry show -d {db_url} al"
    result = CliRunner().invoke(main, [], prog_name="registry", env={
        "_REGISTRY_COMPLETE": "bash_complete", "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1)})
    assert [ln.split(",", 1)[1] for ln in result.output.splitlines()] == ["alpha"]


assert COMMANDS  # the lazy table the tree is walked from
