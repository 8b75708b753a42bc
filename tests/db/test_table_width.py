"""Tables that fit: on a registry of 121 profiles made from the project's InferenceX fixtures
(the curves of SemiAnalysisAI/InferenceX f0711382f121 and wufann/InferenceX 0ab0bb892cca in
tests/data/sources/inferencex/real/, ingested as `registry ingest inferencex` writes them, and
the seed), no line of a listing is wider than an 80-column terminal; a cut says so on stderr;
``--columns`` picks columns, ``--vertical`` prints records whole, and ``--json``, ``--csv`` and
``--nl`` keep every cell whole. A pipe is never cut (tests/db/test_everyday_again.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.helpers import SEED, run_cli, run_in_terminal, run_on

REAL = Path(__file__).resolve().parents[1] / "data" / "sources" / "inferencex" / "real"
CURVES = ("SemiAnalysisAI-InferenceX-f0711382f121", "wufann-InferenceX-0ab0bb892cca")
SHOWN = "kimik3_dspark_probabilistic_sample_method_block_rejection_sample_method"
COMMANDS = [("list",), ("profiles",), ("history",), ("show", SHOWN), ("conflicts",),
            ("coverage",)]


@pytest.fixture(scope="module")
def acceptance(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("acceptance")
    for folder in CURVES:
        result = run_cli("ingest", "inferencex", REAL / folder, "--engine-image",
                         "vllm/vllm-openai:v0.22.0", "--keep-going", "-o", out)
        assert result.exit_code == 0, result.stderr
    return out


@pytest.fixture
def registry(shared_url, acceptance) -> str:
    """The real curves and the seed, imported once a session: the tests only read them."""
    def build(engine) -> None:
        url = engine.url.render_as_string(hide_password=False)
        result = run_on(url, "import", "-q", str(acceptance), str(SEED))
        assert result.exit_code == 0, result.stderr

    url = shared_url("table-width", build)
    assert len(json.loads(run_on(url, "profiles", "--json").stdout)) == 121
    return url


@pytest.mark.slow
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_no_line_is_wider_than_the_terminal(registry, args):
    code, out, err = run_in_terminal("-d", registry, *args, columns=80)
    assert code == 0, err
    lines = out.splitlines() + err.splitlines()  # the note and a set's prose wrap too
    assert lines and max(len(line) for line in lines) <= 80, \
        [line for line in lines if len(line) > 80]
    if "…" in out:
        assert "cell(s) shortened with … to fit 80 columns; --vertical or --json shows every " \
               "cell whole" in " ".join(err.split())


@pytest.mark.slow
def test_columns_picks_and_orders_the_table(registry):
    code, out, err = run_in_terminal("-d", registry, "profiles", "--set", SHOWN, "--columns",
                                     "set,profile", columns=200)
    assert code == 0, err
    head, rule, first, *_ = out.splitlines()
    assert head.split() == ["set", "profile"]
    assert first.split() == [SHOWN, "kimi-k3/dspark/k1/thinking-on/coding"]
    assert "note:" not in err  # nothing was cut


def test_an_unknown_column_is_a_usage_error_naming_the_columns(registry):
    result = run_on(registry, "list", "--columns", "name,colour")
    assert result.exit_code == 2
    assert "--columns: no column 'colour' in this table; its columns are name,file,profiles," \
           "caveats,imported_at" in result.stderr


def test_vertical_prints_each_row_whole(registry):
    result = run_on(registry, "show", SHOWN, "--vertical", "--columns", "profile,source")
    assert result.exit_code == 0, result.stderr
    records = result.stdout.split("-[ ")[1:]
    assert len(records) == 8
    first = records[0].splitlines()
    assert first[0].startswith("1 ]")
    assert first[1] == "profile | kimi-k3/dspark/k1/thinking-on/coding"
    assert first[2] == f"source  | {REAL / CURVES[0] / (SHOWN + '.yaml')}"


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--json", "--csv", "--nl"])
def test_machine_formats_keep_every_cell_whole(registry, flag):
    code, out, err = run_in_terminal("-d", registry, "profiles", flag, "--columns", "profile",
                                     columns=80)
    assert code == 0, err
    assert "…" not in out
    if flag == "--json":
        rows = json.loads(out)
    elif flag == "--nl":
        rows = [json.loads(line) for line in out.splitlines()]
    else:
        rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 121 and "source" in rows[0]  # --columns shapes the table only
    assert max(len(r["source"]) for r in rows) > 80


@pytest.mark.slow
def test_a_table_no_cut_can_fit_is_printed_as_records(registry):
    """Eight K columns whose cells hold two sets' values (``1.84/1.85*``) are wider than 80
    columns however the keys are cut: the rows become records, as psql's ``\\x auto``."""
    code, out, err = run_in_terminal("-d", registry, "coverage", columns=80)
    assert code == 0, err
    assert out.startswith("-[ 1 ]")
    assert "note: the table is wider than 80 columns, so each row is a record" in \
        " ".join(err.split())
    code, out, err = run_in_terminal("-d", registry, "coverage", "--columns",
                                     "model,thinking,k1,k2,k3", columns=80)
    assert code == 0 and out.startswith("model "), err
