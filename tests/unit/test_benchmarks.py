"""The benchmarks' own checks: the generator is deterministic and writes valid sets, and the
runner works end to end in its smoke size. Speed is measured by ``benchmarks/run.py``, never
asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from registry_db.sources.profile_set import check_paths

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import generate  # noqa: E402


def test_generator_is_deterministic(tmp_path):
    """One layout and seed give byte-identical files and requests; another seed differs."""
    layout = generate.default_layout(1_200, 4, seed=3)
    first = [p.read_bytes() for p in generate.write_registry(layout, tmp_path / "a")]
    second = [p.read_bytes() for p in generate.write_registry(layout, tmp_path / "b")]
    assert first == second
    other = generate.default_layout(1_200, 4, seed=4)
    assert generate.set_text(other, 1) != generate.set_text(layout, 1)
    assert list(generate.requests(layout, 300)) == list(generate.requests(layout, 300))


def test_generated_sets_are_valid_and_realistic(tmp_path):
    """Every file passes the validator; the mix has anchors, rates, all methods and overlaps."""
    layout = generate.default_layout(2_000, 4)
    paths = generate.write_registry(layout, tmp_path)
    sets, findings = check_paths(paths)
    assert [f.render() for f in findings if f.is_error] == []
    assert len(sets) == 4 and sum(len(s.profiles) for s in sets) == layout.profiles
    profiles = [p for s in sets for p in s.profiles]
    assert {p.method for p in profiles} == {"measured", "copied", "literature", "vendor_spec",
                                            "assumed"}
    assert any(p.per_position_rates for p in profiles)
    assert "*p" in paths[0].read_text() and "*p" not in paths[1].read_text()
    keys = [p.key for p in profiles]
    assert len(set(keys)) == len(keys) - (layout.sets - 1) * layout.overlap
    # The layout's bookkeeping agrees with the files: who holds each key.
    by_key: dict = {}
    for i, s in enumerate(sets):
        for p in s.profiles:
            by_key.setdefault(p.key, []).append(i)
    for j in range(layout.profiles):
        assert sorted(by_key.get(generate.key_of(j), [])) == layout.holders(j)


def test_requests_mix_hits_misses_and_fallbacks():
    """Requests mostly name keys one set holds, and include misses and fallback pins."""
    layout = generate.default_layout(5_000, 10)
    reqs = list(generate.requests(layout, 1_000))
    misses = [r for r in reqs if r["category"] == "unseen-category" and "pin" not in r]
    fallbacks = [r for r in reqs if "pin" in r]
    assert 50 < len(misses) < 150 and 50 < len(fallbacks) < 150
    assert all(r["category"] in generate.CATEGORIES for r in reqs if r not in misses + fallbacks)
    hits = list(generate.hit_requests(layout, 50))
    assert len(hits) == 50 and all("sets" not in r for r in hits)


@pytest.mark.slow
def test_runner_smoke(tmp_path):
    """``run.py --sizes tiny`` runs every SQLite measurement and writes the JSON record."""
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--sizes", "tiny", "--backends", "sqlite",
         "--work-dir", str(tmp_path / "work"), "--json-out", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "| import, whole process | sqlite |" in proc.stdout
    assert "| batch, whole process | sqlite |" in proc.stdout
    record = json.loads(out.read_text())
    kinds = {r["benchmark"] for r in record["results"]}
    assert {"import", "batch", "scaling", "growth"} <= kinds
    batch = next(r for r in record["results"] if r["benchmark"] == "batch")
    assert batch["disagreements"] == 0
    assert record["machine"]["cores"] >= 1 and record["machine"]["sqlite"]


def test_round_table_reads_each_figure_and_judges_every_backend():
    """``round.summary_rows`` quotes each step's ratio where the step wrote it, says "-" and
    "not measured" where a step did not run, and a row is met only if every backend is."""
    import round as round_

    record = {"sizes": {"grow": 50}, "steps": {
        "sqlite": {"import": {"ratio": 1.5, "inproc": {"ratio_cpu": 2.0},
                              "reimport_ratio": 0.07},
                   "peak": {"peak_rss_mib": 120.4},
                   "grow": {"growth_per_revision_vs_first": 0.03,
                            "depths": {"50": {"single": {"ratio": {
                                "engine/as_of_first": 1.1, "sqlite3/as_of_first": 1.4}},
                                "batch_ratio": {"hits": 1.2, "misses": 1.6}}}}},
        "postgresql": {"import": {"ratio": 1.9, "inproc": {"ratio_cpu": 1.7}},
                       "peak": {"peak_rss_mib": 250.0}},
        "pg_vs_sqlite": {"ratio_wall": 1.8}}}
    rows = {r[0]: r[1:] for r in round_.summary_rows(record)}
    assert rows["`registry import`, whole process ÷ the floor (wall)"] == [
        "1.50", "1.90", "≤ 1.8", "no"]
    assert rows["`import_paths` in process ÷ the floor in process (CPU)"][-1] == "no"
    assert rows["`registry import` again, unchanged ÷ the fresh import (wall)"] == [
        "0.07", "-", "≤ 0.1", "yes"]
    assert rows["`resolve --batch` of the peak lines, peak RSS (MiB)"][:2] == [
        "120 MiB", "250 MiB"]
    assert rows["one `resolve --json`, PostgreSQL ÷ SQLite (wall)"] == ["-", "1.80", "≤ 2", "yes"]
    assert rows["`resolve --batch` ÷ the set-based join (wall)"][-1] == "not measured"
    assert rows["one as-of resolution ÷ a current one (50 revisions)"][:2] == ["1.10", "-"]
    assert rows["as-of batch ÷ current batch, misses (50 revisions)"][-1] == "no"
    assert round_.markdown(record).count("\n") == len(rows) + 1
