"""Counts on both backends: stored with every revision, the view's standard error equal to the
library's (a case computed by hand), exported and re-imported unchanged, shown by ``show``,
``profiles`` and ``coverage``, and drift between revisions (``diff``'s z, ``import``'s warning)."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from sqlalchemy import text

from registry_db import history
from registry_db.importing import export
from registry_db.importing import write as importer
from registry_db.model import Counts
from registry_db.store import read as reader
from tests.helpers import broken_foreign_keys, run_cli

#: tests/unit/test_counts.py's case: X = 0, 1, 3, 2 over four steps at K = 3; by hand
#: Var X = 3.5 - 1.5^2 = 1.25 (exact) and 1.5 (3 - 1.5) = 2.25 (the bound).
EXACT, BOUND = math.sqrt(1.25 / 4), math.sqrt(2.25 / 4)

SET = """kind: AcceptanceProfileSet
name: {name}
profiles:
  - model: m
    speculative_method: mtp
    num_spec_tokens: 3
    thinking: "on"
    category: coding
    acceptance_length: {al}
    counts:
      drafts: {d}
      draft_tokens: {dt}
      accepted_tokens: {a}
      accepted_per_position: [{per}]
    method: measured
    provenance: &p
      source: https://example.org/run
      hardware: b300
      engine_image: vllm:1
      sampling: {{temperature: 0.0}}
  - model: m
    speculative_method: mtp
    num_spec_tokens: 3
    thinking: "off"
    category: coding
    acceptance_length: {al}
    counts: {{drafts: {d}, draft_tokens: {dt}, accepted_tokens: {a}}}
    method: measured
    provenance: *p
  - model: m
    speculative_method: mtp
    num_spec_tokens: 3
    thinking: "off"
    category: chat
    acceptance_length: 2.25
    method: measured
    provenance: *p
"""


def write(folder, name="counted", al=2.5, d=4, dt=12, a=6, per="3, 2, 1"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(SET.format(name=name, al=al, d=d, dt=dt, a=a, per=per), encoding="utf-8")
    return path


def cli(url, *args):
    return run_cli("-d", url, *args)


def test_the_view_gives_the_librarys_stderr_computed_by_hand(engine, tmp_path):
    importer.import_paths(engine, [write(tmp_path)])
    with engine.connect() as conn:
        rows = {r.thinking + "/" + r.category: r for r in conn.execute(text(
            "SELECT thinking, category, drafts, draft_tokens, accepted_tokens, al_stderr, "
            "al_stderr_exact FROM acceptance_profiles"))}
    exact, bound, none = rows["on/coding"], rows["off/coding"], rows["off/chat"]
    assert (exact.drafts, exact.draft_tokens, exact.accepted_tokens, exact.al_stderr_exact) == (
        4, 12, 6, 1)
    assert abs(exact.al_stderr - EXACT) < 1e-12
    assert bound.al_stderr_exact == 0 and abs(bound.al_stderr - BOUND) < 1e-12
    assert (none.drafts, none.draft_tokens, none.accepted_tokens, none.al_stderr,
            none.al_stderr_exact) == (None,) * 5
    library = Counts(4, 12, 6, (3, 2, 1)).uncertainty(3).stderr
    assert abs(exact.al_stderr - library) < 1e-12


def test_every_view_says_exact_at_k1_without_per_position_counts(engine, tmp_path):
    # At K = 1 a step accepts 0 or 1: mu (K - mu) is the variance, as resolve says (0014).
    one = SET.replace("num_spec_tokens: 3", "num_spec_tokens: 1").format(
        name="k1", al=1.5, d=4, dt=4, a=2, per="2").replace("length: 2.25", "length: 1.25")
    (tmp_path / "k1.yaml").write_text(one, encoding="utf-8")
    importer.import_paths(engine, [tmp_path / "k1.yaml", write(tmp_path / "k3")])
    with engine.connect() as conn:
        for view in ("acceptance_profiles", "profile_history", "profile_coverage"):
            got = {(r.k, r.thinking, r.category): r.exact for r in conn.execute(text(
                f"SELECT num_spec_tokens AS k, thinking, category, al_stderr_exact AS exact "
                f"FROM {view} WHERE drafts IS NOT NULL"))}
            assert got[(1, "off", "coding")] == 1, view  # no per-position counts, K = 1
            assert got[(3, "off", "coding")] == 0, view  # the bound
            assert got[(1, "on", "coding")] == got[(3, "on", "coding")] == 1, view


def test_the_stored_stderr_is_what_the_formula_gives_in_sql(engine, tmp_path):
    """``al_stderr`` is written by the library; SQL computes the same variance (without a
    square root, which SQLite lacks) from the stored counts: μ (K − μ) for the bound, and
    Σ (2i − 1) a_i / D − μ² for the exact figure (a_i read from the JSON array in Python)."""
    importer.import_paths(engine, [write(tmp_path, d=84142, dt=252426, a=126838,
                                         al=2.51, per="70000, 40000, 16838")])
    with engine.connect() as conn:
        for r in conn.execute(text(
                "SELECT p.num_spec_tokens AS k, c.drafts, c.accepted_tokens, c.al_stderr, "
                "c.accepted_per_position, "
                "(CAST(c.accepted_tokens AS DOUBLE PRECISION) / c.drafts) * (p.num_spec_tokens "
                "- CAST(c.accepted_tokens AS DOUBLE PRECISION) / c.drafts) AS bound_var "
                "FROM profile_counts c JOIN profiles p ON p.id = c.profile_id")):
            var = r.al_stderr ** 2 * r.drafts
            if r.accepted_per_position is None:
                assert abs(var - r.bound_var) < 1e-9
            else:
                per = json.loads(r.accepted_per_position)
                mu = r.accepted_tokens / r.drafts
                second = sum((2 * i - 1) * a for i, a in enumerate(per, 1)) / r.drafts
                assert abs(var - (second - mu * mu)) < 1e-9


def test_export_then_import_is_unchanged_with_counts(engine, tmp_path):
    importer.import_paths(engine, [write(tmp_path / "in")])
    before = reader.load_set(engine, "counted")
    [path] = export.export_sets(engine, ["counted"], tmp_path / "out")
    text_ = path.read_text(encoding="utf-8")
    assert "  counts:\n    drafts: 4\n    draft_tokens: 12\n    accepted_tokens: 6\n" in text_
    report = importer.import_paths(engine, [path])
    assert [s.status for s in report.sets] == ["unchanged"]
    after = reader.load_set(engine, "counted")
    assert after.profiles == before.profiles
    assert after.content_hash() == before.content_hash()
    assert after.profiles[0].counts == Counts(4, 12, 6, (3, 2, 1))
    assert after.profiles[1].counts == Counts(4, 12, 6, None)
    assert after.profiles[2].counts is None


def test_every_revision_keeps_its_counts_through_delete_and_reimport(engine, db_url, tmp_path):
    importer.import_paths(engine, [write(tmp_path / "a")])
    importer.import_paths(engine, [write(tmp_path / "b", al=2.25, a=5, per="3, 1, 1")])
    assert cli(db_url, "delete", "counted").exit_code == 0
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM profile_counts")).scalar() == 0
        assert conn.execute(text("SELECT COUNT(*) FROM version_counts")).scalar() == 4
    first, second = (history.load_revision(engine, "counted", n) for n in (1, 2))
    assert first.profiles[0].counts == Counts(4, 12, 6, (3, 2, 1))
    assert second.profiles[0].counts == Counts(4, 12, 5, (3, 1, 1))
    assert second.profiles[1].counts == Counts(4, 12, 5, None)
    # The history's view carries them per revision.
    with engine.connect() as conn:
        got = conn.execute(text(
            "SELECT revision, accepted_tokens, al_stderr_exact FROM profile_history "
            "WHERE thinking = 'on' ORDER BY revision")).all()
    assert [tuple(r) for r in got] == [(1, 6, 1), (2, 5, 1)]
    # Imported again (revision 3 was the deletion), revision 4 holds them as the current
    # registry does.
    importer.import_paths(engine, [write(tmp_path / "a")])
    assert reader.load_set(engine, "counted") == history.load_revision(engine, "counted", 4)
    assert not broken_foreign_keys(engine)


def test_many_profiles_with_counts_take_the_bulk_path(engine, tmp_path):
    """Past ``COPY_MIN_ROWS`` rows, PostgreSQL COPYs and SQLite uses the driver's executemany."""
    lines = ["kind: AcceptanceProfileSet", "name: bulk", "profiles:"]
    for i in range(120):
        lines.append(f"  - {{model: m, speculative_method: mtp, num_spec_tokens: 3, thinking: "
                     f"'on', category: c{i}, acceptance_length: {1 + 6 / (4 + i)!r}, method: "
                     f"assumed, rationale: r, counts: {{drafts: {4 + i}, draft_tokens: "
                     f"{6 + i}, accepted_tokens: 6}}}}")
    path = tmp_path / "bulk.yaml"
    path.write_text("\n".join(lines) + "\n")
    importer.import_paths(engine, [path])
    stored = reader.load_set(engine, "bulk")
    assert [p.counts for p in stored.profiles] == [Counts(4 + i, 6 + i, 6) for i in range(120)]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM version_counts")).scalar() == 120


def test_show_and_profiles_carry_counts_and_uncertainty(db_url, tmp_path):
    assert cli(db_url, "import", str(write(tmp_path))).exit_code == 0
    shown = json.loads(cli(db_url, "show", "counted", "--json").stdout)["profiles"]
    assert shown[0]["counts"] == {"drafts": 4, "draft_tokens": 12, "accepted_tokens": 6,
                                  "accepted_per_position": [3, 2, 1]}
    assert shown[0]["uncertainty"] == {"drafts": 4, "stderr": EXACT, "exact": True}
    assert shown[1]["uncertainty"] == {"drafts": 4, "stderr": BOUND, "exact": False}
    assert (shown[2]["counts"], shown[2]["uncertainty"]) == (None, None)
    rows = {r["profile"]: r for r in json.loads(cli(db_url, "profiles", "--json").stdout)}
    on = rows["m/mtp/k3/thinking-on/coding"]
    assert on["counts"]["accepted_per_position"] == [3, 2, 1]
    assert on["uncertainty"] == {"drafts": 4, "stderr": EXACT, "exact": True}
    assert rows["m/mtp/k3/thinking-off/chat"]["uncertainty"] is None
    table = cli(db_url, "profiles").stdout
    assert "2.5 ± 0.56 " in table and "2.5 ± ≤0.75 " in table
    assert "2.5 ± 0.56 " in cli(db_url, "show", "counted").stdout
    chat, bound, exact = csv.DictReader(io.StringIO(cli(db_url, "profiles", "--csv").stdout))
    assert list(exact)[-5:] == ["drafts", "draft_tokens", "accepted_tokens", "al_stderr",
                                "al_stderr_exact"]
    assert [exact[k] for k in ("drafts", "draft_tokens", "accepted_tokens",
                               "al_stderr_exact")] == ["4", "12", "6", "1"]
    assert abs(float(exact["al_stderr"]) - EXACT) < 1e-4 and bound["al_stderr_exact"] == "0"
    assert chat["drafts"] == chat["al_stderr"] == chat["al_stderr_exact"] == ""


def test_coverage_json_carries_each_cells_uncertainty(db_url, tmp_path):
    assert cli(db_url, "import", str(write(tmp_path))).exit_code == 0
    rows = json.loads(cli(db_url, "coverage", "--json").stdout)["rows"]
    cells = {(r["thinking"], r["category"], c["k"]): c["uncertainty"]
             for r in rows for c in r["cells"]}
    assert cells[("on", "coding", 3)] == {"drafts": 4, "stderr": EXACT, "exact": True}
    assert cells[("off", "coding", 3)] == {"drafts": 4, "stderr": BOUND, "exact": False}
    assert cells[("off", "chat", 3)] is None and cells[("on", "coding", 1)] is None


def test_diff_gives_z_and_import_warns_when_a_value_drifts(db_url, tmp_path):
    assert cli(db_url, "import", str(write(tmp_path / "a", d=84142, dt=252426, a=126838,
                                             al=2.51, per="70000, 40000, 16838"))).exit_code == 0
    # Same counts scaled by a tenth: AL 2.5074 -> 2.5077, well within the noise. No warning.
    small = cli(db_url, "import", str(write(tmp_path / "b", d=8414, dt=25242, a=12686,
                                            al=2.5077, per="7000, 4000, 1686")))
    assert small.exit_code == 0 and "value_drift" not in small.stderr
    assert "drift" not in small.stderr
    # InferenceX's agentic traces: AL 1.42 over 12,000 steps against the registry's 2.51.
    drifted = cli(db_url, "import", str(write(tmp_path / "c", d=12000, dt=36000, a=5040,
                                              al=1.42, per="4000, 1000, 40")))
    assert drifted.exit_code == 0
    warned = [line for line in drifted.stderr.splitlines() if "z = " in line]
    assert len(warned) == 2, drifted.stderr  # the exact and the bounded profile; chat has none
    assert "m/mtp/k3/thinking-on/coding moves from 2.5077" in warned[0]
    assert "profiles[0].acceptance_length: warning:" in warned[0]
    old = Counts(8414, 25242, 12686, (7000, 4000, 1686)).uncertainty(3).stderr
    new = Counts(12000, 36000, 5040, (4000, 1000, 40)).uncertainty(3).stderr
    found = json.loads(cli(db_url, "diff", "counted", "--json").stdout)
    by_profile = {c["profile"]: c["fields"] for c in found["changes"]}
    on = by_profile["m/mtp/k3/thinking-on/coding"]["acceptance_length"]
    # z is between the counts' own means (1 + 12686 / 8414 and 1 + 5040 / 12000).
    z = ((1 + 5040 / 12000) - (1 + 12686 / 8414)) / math.hypot(old, new)
    assert on == {"from": 2.5077, "to": 1.42, "z": pytest.approx(z, rel=1e-12)}
    assert by_profile["m/mtp/k3/thinking-on/coding"]["counts.drafts"] == {"from": 8414,
                                                                         "to": 12000}
    assert "(z = -" in cli(db_url, "diff", "counted").stdout
    # A changed AL without counts on both sides has no z.
    path = tmp_path / "d" / "counted.yaml"
    path.parent.mkdir()
    path.write_text(SET.format(name="counted", al=1.42, d=12000, dt=36000, a=5040,
                               per="4000, 1000, 40").replace("acceptance_length: 2.25",
                                                             "acceptance_length: 2.0"))
    assert cli(db_url, "import", str(path)).exit_code == 0
    [change] = json.loads(cli(db_url, "diff", "counted", "--json").stdout)["changes"]
    assert change["fields"]["acceptance_length"] == {"from": 2.25, "to": 2.0}


def test_a_quiet_import_prints_no_drift_warning(db_url, tmp_path):
    cli(db_url, "import", str(write(tmp_path / "a", d=84142, dt=252426, a=126838, al=2.51,
                                    per="70000, 40000, 16838")))
    quiet = cli(db_url, "import", "-q", str(write(tmp_path / "b", d=12000, dt=36000, a=5040,
                                                  al=1.42, per="4000, 1000, 40")))
    assert quiet.exit_code == 0 and "z = " not in quiet.stderr
