"""Everyday use, second pass (issue 28) on both backends: `-d` after the subcommand, listings for
programs (CSV with every digit, `--nl`), empty filters that say so, completion of stored names."""

from __future__ import annotations

import csv
import io
import json

import click
import pytest
from click.testing import CliRunner

from registry_db.cli.group import COMMANDS, main
from tests.helpers import reader_role, run_cli, run_in_terminal, write_set

DSV = "deepseek-v4.1-flash"






@pytest.fixture
def querying(db_url, backend, monkeypatch):
    """``db_url``, with ``registry query`` running as a reader role on PostgreSQL."""
    if backend != "postgresql":
        yield db_url
        return
    with reader_role(db_url) as url:
        monkeypatch.setenv("REGISTRY_QUERY_URL", url)
        yield db_url


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


# --- 28.10: CSV writes every digit; --nl on every listing -----------------------------------------

def _floats_equal_their_json(csv_text: str, json_rows: list[dict]) -> int:
    """Every CSV cell of a float column is the JSON value's repr; returns how many floats."""
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert len(rows) == len(json_rows)
    n = 0
    for row, obj in zip(rows, json_rows):
        for name, value in obj.items():
            if isinstance(value, float):
                assert row[name] == repr(value), (name, row[name], value)
                n += 1
    return n


def test_csv_writes_every_digit_json_writes(own_seeded, querying, tmp_path):
    write_set(tmp_path, "digits", 2, model="m", al=2.5165480322371905)
    run_cli("-d", own_seeded, "import", str(tmp_path))
    as_json = json.loads(run_cli("-d", own_seeded, "profiles", "--json").stdout)
    as_csv = run_cli("-d", own_seeded, "profiles", "--csv").stdout
    assert _floats_equal_their_json(as_csv, as_json) >= 10
    assert "2.5165480322371905" in as_csv and "0.6140000000000001" in as_csv
    # Only the table rounds.
    table = run_cli("-d", own_seeded, "profiles", "--model", "m").stdout
    assert "2.5165 " in table and "2.5165480322371905" not in table
    cells = json.loads(run_cli("-d", own_seeded, "coverage", "--model", "m", "--json").stdout)
    long = run_cli("-d", own_seeded, "coverage", "--model", "m", "--csv").stdout
    assert "2.5165480322371905" in long and "2.5165," not in long
    assert 2.5165480322371905 in [c["acceptance_length"] for r in cells["rows"]
                                  for c in r["cells"]]
    query = run_cli("-d", own_seeded, "query", "--csv",
                    "SELECT acceptance_rate FROM acceptance_profiles WHERE model = 'm'")
    assert query.stdout.splitlines()[1] == repr((2.5165480322371905 - 1) / 3)


LISTINGS = [("list",), ("profiles",), ("history",), ("coverage",), ("conflicts",)]


def _json_items(url: str, args: tuple[str, ...]) -> list:
    doc = json.loads(run_cli("-d", url, *args, "--json").stdout)
    return doc["revisions"] if args[0] == "history" else doc["rows"] \
        if args[0] == "coverage" else doc


@pytest.mark.parametrize("args", LISTINGS, ids=" ".join)
def test_nl_prints_one_json_object_per_line(own_seeded, tmp_path, args):
    write_set(tmp_path, "one", 1, model="m")
    write_set(tmp_path, "two", 1, model="m")  # a conflict for `conflicts`
    run_cli("-d", own_seeded, "import", str(tmp_path))
    result = run_cli("-d", own_seeded, *args, "--nl")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) >= 1 and all(line.startswith("{") for line in lines)
    assert [json.loads(line) for line in lines] == _json_items(own_seeded, args)
    both = run_cli("-d", own_seeded, *args, "--nl", "--json")
    assert both.exit_code == 2 and "--json and --nl cannot be used together" in both.stderr


def test_nl_of_an_empty_listing_prints_nothing(db_url, querying):
    result = run_cli("-d", db_url, "list", "--nl")
    assert result.exit_code == 0 and result.stdout == ""
    rows = run_cli("-d", db_url, "query", "--nl", "SELECT 1 AS a, 2.5 AS b UNION ALL "
                   "SELECT 3, 0.1 ORDER BY a")
    assert rows.stdout == '{"a": 1, "b": 2.5}\n{"a": 3, "b": 0.1}\n'


# --- 28.8: tables fit the terminal; a pipe is never cut -----------------------------------------

LONG_SOURCE = ("https://github.com/SemiAnalysisAI/InferenceX/blob/main/inferencex-e2e/infx/"
               "golden_al_distribution/a_rather_long_file_name_for_a_curve.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("args", [("list",), ("history",), ("profiles",), ("coverage",),
                                  ("show", "a-set-with-a-long-name-for-the-terminal")],
                         ids=" ".join)
def test_tables_fit_the_terminal_and_a_pipe_is_never_cut(db_url, tmp_path, args):
    folder = tmp_path / "a-folder-whose-name-is-long-enough-to-overflow-any-terminal-table"
    write_set(folder, "a-set-with-a-long-name-for-the-terminal", 2, source=LONG_SOURCE,
              model="a-model-with-a-long-name-too")
    run_cli("-d", db_url, "import", "-m", "a message that says at length why this set came "
            "in, long enough to matter", str(folder))
    code, out, err = run_in_terminal("-d", db_url, *args, columns=80)
    assert code == 0, err
    lines = out.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, out
    assert "…" in out
    code, piped, _ = run_in_terminal("-d", db_url, *args, columns=80, stdout_tty=False)
    assert code == 0 and "…" not in piped
    assert max(len(line) for line in piped.splitlines()) > 80


# --- 28.4: a filter that matches nothing says so; completion of stored names --------------------

def test_profiles_matching_nothing_says_so_and_suggests(seeded):
    result = run_cli("-d", seeded, "profiles", "--model", "glm-5.2")
    assert result.exit_code == 0 and "(no rows)" in result.stdout
    assert ("no stored profile matches model 'glm-5.2'. The registry holds model: "
            "deepseek-v4.1-flash, glm-5.3 (did you mean 'glm-5.3'?).") in result.stderr
    method = run_cli("-d", seeded, "profiles", "--method", "dsprak", "--json")
    assert method.exit_code == 0 and json.loads(method.stdout) == []
    assert "did you mean 'dspark'?" in method.stderr
    k = run_cli("-d", seeded, "profiles", "--model", "glm-5.3", "--k", "5")
    assert ("no stored profile matches model 'glm-5.3', K 5. With K 5, the registry holds "
            "model: deepseek-v4.1-flash. With model 'glm-5.3', it holds K: 3.") in k.stderr
    # A listing that matches says nothing on stderr.
    assert run_cli("-d", seeded, "profiles", "--model", "glm-5.3").stderr == ""


def _complete(words: str) -> list[str]:
    result = CliRunner().invoke(main, [], prog_name="registry", env={
        "_REGISTRY_COMPLETE": "bash_complete", "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1)})
    assert result.exit_code == 0, result.output
    return [line.split(",", 1)[1] for line in result.output.splitlines() if "," in line]


def test_completion_offers_stored_models_and_methods(seeded):
    for command in ("profiles", "coverage", "plot"):
        assert _complete(f"registry -d {seeded} {command} --model gl") == ["glm-5.3"], command
        assert _complete(f"registry -d {seeded} {command} --method ") == ["dspark", "mtp"]
    assert _complete(f"registry {'profiles'} -d {seeded} --model d") == [DSV]


def test_every_model_and_method_option_of_a_reading_command_completes():
    """--model and --method of the commands that read the registry complete stored names
    (`ingest`, which names a new model, and `resolve`, whose options the resolver table
    makes, are not held to it here)."""
    from registry_db.cli.output import complete_methods, complete_models

    for name in ("profiles", "coverage", "plot"):
        cmd = main.get_command(None, name)  # type: ignore[arg-type]
        opts = {o: p for p in cmd.params for o in getattr(p, "opts", ())}
        assert opts["--model"]._custom_shell_complete is complete_models, name
        assert opts["--method"]._custom_shell_complete is complete_methods, name


# --- 28.12: no position 0 in messages -------------------------------------------------------------

def test_a_missing_file_has_no_position(tmp_path):
    result = run_cli("validate", "no/such/file.yaml")
    assert result.exit_code == 1
    assert result.stderr.startswith("no/such/file.yaml: (document): no such file")
    assert ":0:" not in result.stderr
    problem = json.loads(run_cli("validate", "--json", "no/such/file.yaml").stdout)[
        "problems"][0]
    assert (problem["line"], problem["column"]) == (None, None)


def test_an_overlap_warning_has_no_position_zero(db_url, tmp_path):
    write_set(tmp_path, "one", 1, model="m")
    write_set(tmp_path, "two", 1, model="m")
    result = run_cli("-d", db_url, "import", str(tmp_path))
    [line] = [ln for ln in result.stderr.splitlines() if "profile key(s)" in ln]
    assert line.startswith(f"{tmp_path / 'one.yaml'}: profiles: warning: sets 'one' and 'two'")
    assert ":0:" not in result.stderr


def test_inconsistent_metrics_have_no_position_zero(tmp_path):
    pre = "vllm:spec_decode_num_"
    after = tmp_path / "after.prom"
    after.write_text(f"{pre}drafts_total 10\n{pre}draft_tokens_total 30\n"
                     f"{pre}accepted_tokens_total 15\n"
                     + "".join(f'{pre}accepted_tokens_per_pos_total{{position="{i}"}} {n}\n'
                               for i, n in enumerate((3, 5, 7))))
    result = run_cli("ingest", "vllm-metrics", str(after), "--model", "m", "--method", "mtp",
                     "--k", "3", "--thinking", "off", "--category", "coding", "--hardware",
                     "b300", "--engine-image", "img:1", "--temperature", "0")
    assert result.exit_code == 1
    assert f"{after}: vllm:spec_decode_num_accepted_tokens" in result.stderr
    assert ":0:" not in result.stderr
