"""Migration 0005 as users meet it, on both backends: a registry filled at 0004 (rows written
with that revision's SQL, never today's importer: two sets, history, a deletion) upgrades with
nothing changed; counts then import, show and keep in history; ``would_lose`` names them; and
the downgrade drops the counts and nothing else."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from registry_db import store
from tests.helpers import broken_foreign_keys, migrated_to, run_cli

PREVIOUS = "0004"
T1, T2 = datetime(2026, 6, 1, 9, 30, tzinfo=UTC), datetime(2026, 7, 1, 9, 30, tzinfo=UTC)

#: A registry as 0004's importer wrote it: 'golden' at revision 2 (rates on one profile, a
#: caveat), 'gone' added then deleted, one shared provenance with a setting.
_ROWS = [
    ("INSERT INTO profile_sets (id, name, source_file, content_hash, imported_at, revision) "
     "VALUES (1, 'golden', 'acceptance/golden.yaml', :h2, :t2, 2)"),
    "INSERT INTO set_caveats (set_id, position, text) VALUES (1, 0, 'a caveat')",
    ("INSERT INTO provenances (id, content_hash, source, hardware, engine_image, temperature) "
     "VALUES (1, :p, 'https://example.org/run', 'b300', 'vllm:1', 0.0)"),
    ("INSERT INTO provenance_settings (provenance_id, name, value, value_type) VALUES "
     "(1, 'seed', '7', 'integer')"),
    ("INSERT INTO profiles (id, set_id, position, model, speculative_method, num_spec_tokens, "
     "thinking, category, acceptance_length, method, provenance_id, rationale, copied_from) "
     "VALUES (1, 1, 0, 'm', 'mtp', 3, 'on', 'coding', 2.5, 'measured', 1, NULL, NULL), "
     "(2, 1, 1, 'm', 'mtp', 3, 'on', 'chat', 2.25, 'measured', 1, NULL, NULL)"),
    "INSERT INTO profile_rates (profile_id, position, rate) VALUES (1, 1, 0.8), (1, 2, 0.5), "
    "(1, 3, 0.2)",
    ("INSERT INTO revisions (id, set_name, revision, action, imported_at, source_file, "
     "content_hash, profile_count, message) VALUES "
     "(1, 'golden', 1, 'added', :t1, 'acceptance/golden.yaml', :h1, 1, NULL), "
     "(2, 'golden', 2, 'updated', :t2, 'acceptance/golden.yaml', :h2, 2, 'more'), "
     "(3, 'gone', 1, 'added', :t1, 'acceptance/gone.yaml', :h3, 1, NULL), "
     "(4, 'gone', 2, 'deleted', :t2, 'acceptance/gone.yaml', NULL, 0, 'bye')"),
    "INSERT INTO revision_caveats (revision_id, position, text) VALUES (2, 0, 'a caveat')",
    ("INSERT INTO revision_profiles (id, revision_id, position, model, speculative_method, "
     "num_spec_tokens, thinking, category, acceptance_length, method, provenance_id, rationale, "
     "copied_from) VALUES "
     "(1, 1, 0, 'm', 'mtp', 3, 'on', 'coding', 2.4, 'measured', 1, NULL, NULL), "
     "(2, 2, 0, 'm', 'mtp', 3, 'on', 'coding', 2.5, 'measured', 1, NULL, NULL), "
     "(3, 2, 1, 'm', 'mtp', 3, 'on', 'chat', 2.25, 'measured', 1, NULL, NULL), "
     "(4, 3, 0, 'g', 'eagle', 2, 'off', 'coding', 1.75, 'assumed', NULL, 'a guess', NULL)"),
    "INSERT INTO revision_rates (profile_id, position, rate) VALUES (2, 1, 0.8), (2, 2, 0.5), "
    "(2, 3, 0.2)",
]

#: 0004's tables, and its views' columns (the downgrade must give them back exactly).
TABLES = ("profile_sets", "set_caveats", "methods", "provenances", "provenance_settings",
          "profiles", "profile_rates", "revisions", "revision_caveats", "revision_profiles",
          "revision_rates")

COUNTED = """kind: AcceptanceProfileSet
name: counted
profiles:
  - model: m
    speculative_method: mtp
    num_spec_tokens: 3
    thinking: "on"
    category: coding
    acceptance_length: 2.5
    counts: {drafts: 4, draft_tokens: 12, accepted_tokens: 6, accepted_per_position: [3, 2, 1]}
    method: assumed
    rationale: the hand-computed case
"""


def _fill(engine) -> None:
    params = {"h1": "1" * 64, "h2": "2" * 64, "h3": "3" * 64, "p": "p" * 64, "t1": T1, "t2": T2}
    with engine.begin() as conn:
        for sql in _ROWS:
            conn.execute(text(sql), params)
        if conn.dialect.name == "postgresql":  # the rows gave their ids: move the sequences on
            for table in ("profile_sets", "provenances", "profiles", "revisions",
                          "revision_profiles"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                  f"(SELECT MAX(id) FROM {table}))"))


def _tables(engine) -> dict[str, list[tuple]]:
    """Every row of 0004's tables, by all their columns."""
    out = {}
    with engine.connect() as conn:
        insp = inspect(conn)
        for table in TABLES:
            cols = ", ".join(c["name"] for c in insp.get_columns(table))
            out[table] = [tuple(r) for r in conn.execute(
                text(f"SELECT {cols} FROM {table} ORDER BY {cols}"))]
    return out


def _view_columns(engine) -> dict[str, list[str]]:
    with engine.connect() as conn:
        insp = inspect(conn)
        return {v: [c["name"] for c in insp.get_columns(v)] for v in insp.get_view_names()}


def _would_lose(engine) -> list[str]:
    module = ScriptDirectory.from_config(store.alembic_config()).get_revision("0005").module
    with engine.connect() as conn:
        return module.would_lose(conn)


def test_a_filled_registry_upgrades_takes_counts_and_downgrades(empty_url, tmp_path):
    with migrated_to(empty_url, PREVIOUS) as engine:
        _fill(engine)
        before, views_before = _tables(engine), _view_columns(engine)
        store.upgrade(engine, "0005")
        assert _tables(engine) == before
        assert not broken_foreign_keys(engine)
        assert _would_lose(engine) == []
        # The views gain the counts as their last columns, NULL for what was stored before.
        after = _view_columns(engine)
        for view in ("acceptance_profiles", "profile_history"):
            assert after[view] == views_before[view] + [
                "drafts", "draft_tokens", "accepted_tokens", "al_stderr", "al_stderr_exact"]
        assert after["profile_coverage"] == views_before["profile_coverage"] + [
            "drafts", "al_stderr", "al_stderr_exact"]
        with engine.connect() as conn:
            assert conn.execute(text(
                "SELECT COUNT(*) FROM acceptance_profiles WHERE drafts IS NULL")).scalar() == 2
        # The commands need the head (the migrations after 0005 move no row).
        store.upgrade(engine)
        # The migrated registry reads as it did: history, diff, show.
        shown = json.loads(run_cli("-d", empty_url, "show", "golden", "--json").stdout)
        assert [p["uncertainty"] for p in shown["profiles"]] == [None, None]
        diff = json.loads(run_cli("-d", empty_url, "diff", "golden", "--json").stdout)
        changed = {c["profile"]: c["fields"] for c in diff["changes"]}
        assert changed["m/mtp/k3/thinking-on/coding"]["acceptance_length"] == {
            "from": 2.4, "to": 2.5}

        # Counts after the upgrade: imported, in the view and in the history.
        path = tmp_path / "counted.yaml"
        path.write_text(COUNTED, encoding="utf-8")
        result = run_cli("-d", empty_url, "import", str(path))
        assert result.exit_code == 0, result.output
        with engine.connect() as conn:
            row = conn.execute(text("SELECT drafts, al_stderr_exact FROM acceptance_profiles "
                                    "WHERE profile_set = 'counted'")).one()
            assert tuple(row) == (4, 1)
        # Back at 0006 (0007 stores versions), where 0005's would_lose reads its tables.
        store.downgrade(engine, "0006")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM revision_counts")).scalar() == 1
        assert _would_lose(engine) == [
            "counts on 1 current profile(s) and 1 profile(s) of the history"]

        # Down again: the counts go, every other row stays as it was at 0005.
        kept = _tables(engine)
        store.downgrade(engine, PREVIOUS)
        assert store.current_revision(engine) == PREVIOUS
        assert _tables(engine) == kept
        assert _view_columns(engine) == views_before
        with engine.connect() as conn:
            names = set(inspect(conn).get_table_names())
        assert {"profile_counts", "revision_counts"}.isdisjoint(names)
        assert not broken_foreign_keys(engine)
        # And up once more: the registry is whole at the head, without the dropped counts.
        store.upgrade(engine)
        shown = json.loads(run_cli("-d", empty_url, "show", "counted", "--json").stdout)
        assert shown["profiles"][0]["counts"] is None
