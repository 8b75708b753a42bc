"""The benchmarks' own checks: the generator is deterministic and writes valid sets, and the
runner works end to end in its smoke size and publishes one file per scenario. Speed is measured
by ``benchmarks/run.py``, never asserted here.
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


def test_scenarios_are_named_and_unknown_ones_refused():
    """The harness runs the named scenarios in its own order; the default is the registry's four;
    an unknown name is a usage error naming the choices."""
    import run

    assert run.parse_args([]).scenarios == list(run.DEFAULT_SCENARIOS)
    assert run.parse_args(["history", "import"]).scenarios == ["import", "history"]
    with pytest.raises(SystemExit):
        run.parse_args(["imports"])
    assert set(run.SCENARIO_OF.values()) == set(run.SCENARIOS)


def test_publish_writes_one_current_file_per_scenario(tmp_path, monkeypatch):
    """``--publish`` writes each scenario's rows to ``published/SCENARIO.json``, replacing the
    file a run before wrote: one current result a scenario, the history in git."""
    import run

    monkeypatch.setattr(run, "HERE", tmp_path)
    record = {"command": "python benchmarks/run.py --quick --work-dir /home/me/w --publish "
                         "--json-out=/home/me/o.json --json-out /home/me/o.json",
              "git": "abc", "results": [
        {"benchmark": "import", "backend": "sqlite"}, {"benchmark": "cli", "backend": "sqlite"},
        {"benchmark": "growth", "backend": "sqlite"}, {"benchmark": "scaling"}]}
    run.publish(record, ["import", "commands", "scaling"])
    run.publish(record, ["import"])
    files = sorted(p.name for p in (tmp_path / "published").iterdir())
    assert files == ["commands.json", "import.json", "scaling.json"]
    scaling = json.loads((tmp_path / "published" / "scaling.json").read_text())
    assert scaling["scenario"] == "scaling" and scaling["git"] == "abc"
    # The machine's own folders are not part of what was measured, and stay out of the file.
    assert scaling["command"] == "python benchmarks/run.py --quick --publish"
    assert [r["benchmark"] for r in scaling["results"]] == ["growth", "scaling"]
