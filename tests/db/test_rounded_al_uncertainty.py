"""A stored AL rounded from its counts is held to the counts' own mean, on both backends; at K = 1
the totals give the variance exactly.

The curve is the real qwen3.827b_fp8_mtp.yaml of SemiAnalysisAI/InferenceX 67ba7fb5ee54
(tests/data/sources/inferencex/real/, its README names the file): its thinking-on K = 1 cell is
``1: 1.73  # AR=0.726705818716; accepted=94043; proposed=129410; drafts=129410``, AL rounded to
two decimals (its header says so) from 1 + 94043 / 129410 = 1.726706...
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from registry_db.model import Counts
from registry_db.resolve.check import check_run
from registry_db.resolve.plan import Request, resolve
from tests.helpers import run_cli as run

CURVE = (Path(__file__).resolve().parents[1] / "data" / "sources" / "inferencex" / "real"
         / "SemiAnalysisAI-InferenceX-67ba7fb5ee54" / "qwen3.827b_fp8_mtp.yaml")
DRAFTS, ACCEPTED = 129410, 94043
MEAN = float(1 + Fraction(ACCEPTED, DRAFTS))
#: At K = 1 a step accepts 0 or 1 draft: Var X = mu (1 - mu), computed here by hand.
MU = ACCEPTED / DRAFTS
SE = math.sqrt(MU * (1 - MU) / DRAFTS)
ON_K1 = Request("qwen3.8-27b-fp8", "mtp", 1, "on", "coding")


@pytest.fixture
def qwen(db_url, tmp_path) -> str:
    out = tmp_path / "acceptance"
    ingested = run("ingest", "inferencex", str(CURVE), "-o", str(out))
    assert ingested.exit_code == 0, ingested.stderr
    assert run("-d", db_url, "import", str(out)).exit_code == 0
    return db_url


def test_the_figures_of_the_issue():
    assert round(MEAN, 6) == 1.726706 and f"{SE:.2g}" == "0.0012"
    # The stored 1.73 lies 2.7 standard errors from the counts it was rounded from.
    assert round((1.73 - MEAN) / SE, 1) == 2.7


def test_a_run_reproducing_the_measurement_exactly_scores_zero(qwen, engine):
    """Before: z = -1.9 for the very counts the registry holds (the stored 1.73 as centre)."""
    result = check_run(engine, ON_K1, Counts(DRAFTS, DRAFTS, ACCEPTED))
    assert result.z == 0.0 and result.verdict == "consistent"
    assert result.difference == pytest.approx(MEAN - 1.73, abs=1e-12)
    # Five times the steps at the same mean: still the same measurement, still z = 0.
    five = check_run(engine, ON_K1, Counts(5 * DRAFTS, 5 * DRAFTS, 5 * ACCEPTED))
    assert five.z == 0.0


def test_k1_is_exact_and_show_gives_the_counts_mean_it_is_about(qwen, engine):
    answer = resolve(engine, ON_K1)
    assert answer.acceptance_length == 1.73
    assert answer.uncertainty.exact is True
    assert answer.uncertainty.stderr == pytest.approx(SE, rel=1e-12)
    shown = run("-d", qwen, "show", "qwen3.827b_fp8_mtp")
    assert shown.exit_code == 0, shown.stderr
    line = next(t for t in shown.stdout.splitlines() if "mtp/k1/thinking-on" in t)
    assert f"1.73 (counts {MEAN:.4f} ± {SE:.2g})" in line and "≤" not in line
    # K = 2 (same file): the totals only bound the variance, and say so.
    k2 = next(t for t in shown.stdout.splitlines() if "mtp/k2/thinking-on" in t)
    assert "± ≤" in k2


def test_resolve_json_keeps_its_shape(qwen):
    result = run("-d", qwen, "resolve", "--model", "qwen3.8-27b-fp8", "--method", "mtp", "--k",
                 "1", "--thinking", "on", "--category", "coding", "--json")
    got = json.loads(result.stdout)
    assert got["uncertainty"] == {"drafts": DRAFTS, "stderr": pytest.approx(SE, rel=1e-12),
                                  "exact": True}


def test_a_revision_that_only_rounds_the_same_counts_otherwise_moves_nothing(qwen, tmp_path):
    """The counts unchanged and the AL written to four decimals instead of two: z = 0, where
    the stored ALs gave -1.9 (each side's error is about its counts' mean)."""
    out = tmp_path / "again"
    assert run("ingest", "inferencex", str(CURVE), "-o", str(out)).exit_code == 0
    path = out / "qwen3.827b_fp8_mtp.yaml"
    path.write_text(path.read_text().replace("acceptance_length: 1.73\n",
                                             f"acceptance_length: {round(MEAN, 4)}\n", 1))
    imported = run("-d", qwen, "import", str(path))
    assert imported.exit_code == 0 and "value_drift" not in imported.stderr
    found = json.loads(run("-d", qwen, "diff", "qwen3.827b_fp8_mtp", "--json").stdout)
    (change,) = found["changes"]
    assert change["fields"]["acceptance_length"] == {"from": 1.73, "to": round(MEAN, 4),
                                                     "z": 0.0}
