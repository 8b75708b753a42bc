"""Migration 0004 as users meet it, on both backends: a registry filled at the previous head
(rows written with that revision's SQL, never today's importer) is upgraded; every set becomes
revision 1 of itself with its import time kept; history, diff, resolve and --as-of work on it;
and the downgrade keeps the current registry intact and drops the history."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import inspect, text

from registry_db import store
from tests.helpers import broken_foreign_keys, migrated_to, run_cli

#: The schema revision before history.
PREVIOUS = "0003"

IMPORTED_AT = datetime(2026, 6, 1, 9, 30, tzinfo=UTC)

#: Two sets as the importer of the previous head wrote them: ids, hash, time, one shared
#: provenance with a setting, caveats, rates on one profile.
_ROWS = [
    ("INSERT INTO profile_sets (id, name, source_file, content_hash, imported_at) VALUES "
     "(1, 'golden', 'acceptance/golden.yaml', :h1, :t), "
     "(2, 'vendor', 'acceptance/vendor.yaml', :h2, :t)"),
    ("INSERT INTO set_caveats (set_id, position, text) VALUES "
     "(1, 0, 'first caveat'), (1, 1, 'second caveat')"),
    ("INSERT INTO provenances (id, content_hash, source, hardware, engine_image, temperature) "
     "VALUES (1, :p1, 'https://example.org/run', 'b300', 'vllm:1', 0.0)"),
    ("INSERT INTO provenance_settings (provenance_id, name, value, value_type) VALUES "
     "(1, 'seed', '7', 'integer')"),
    ("INSERT INTO profiles (id, set_id, position, model, speculative_method, num_spec_tokens, "
     "thinking, category, acceptance_length, method, provenance_id, rationale, copied_from) "
     "VALUES "
     "(1, 1, 0, 'm', 'mtp', 3, 'on', 'coding', 2.5, 'measured', 1, NULL, NULL), "
     "(2, 1, 1, 'm', 'mtp', 3, 'on', 'chat', 2.25, 'measured', 1, NULL, NULL), "
     "(3, 2, 0, 'v', 'eagle', 2, 'off', 'coding', 1.75, 'assumed', NULL, 'a guess', NULL)"),
    ("INSERT INTO profile_rates (profile_id, position, rate) VALUES "
     "(1, 1, 0.8), (1, 2, 0.5), (1, 3, 0.2)"),
]


def _fill(engine) -> None:
    with engine.begin() as conn:
        for sql in _ROWS:
            conn.execute(text(sql), {"h1": "1" * 64, "h2": "2" * 64, "p1": "p" * 64,
                                     "t": IMPORTED_AT})


def _current(engine) -> dict[str, list[tuple]]:
    """The current registry as the previous head held it (without 0004's column)."""
    tables = {
        "profile_sets": "id, name, source_file, content_hash",
        "set_caveats": "set_id, position, text",
        "provenances": "id, content_hash, source, hardware",
        "provenance_settings": "provenance_id, name, value",
        "profiles": "id, set_id, position, model, category, acceptance_length, method",
        "profile_rates": "profile_id, position, rate",
    }
    with engine.connect() as conn:
        return {t: [tuple(r) for r in conn.execute(text(f"SELECT {c} FROM {t} ORDER BY {c}"))]
                for t, c in tables.items()}


def test_a_filled_registry_upgrades_to_history_and_back(empty_url, tmp_path):
    with migrated_to(empty_url, PREVIOUS) as engine:
        _fill(engine)
        before = _current(engine)
        store.upgrade(engine, "0004")
        assert _current(engine) == before
        assert not broken_foreign_keys(engine)
        store.upgrade(engine)  # the command line reads a registry at the head

        # Every stored set is revision 1 of itself, its import time kept.
        result = run_cli("-d", empty_url, "history", "--json")
        assert result.exit_code == 0, result.output
        found = json.loads(result.stdout)["revisions"]
        assert sorted((r["set"], r["revision"], r["action"], r["profiles"], r["file"],
                       r["content_hash"], r["imported_at"]) for r in found) == [
            ("golden", 1, "added", 2, "acceptance/golden.yaml", "1" * 64,
             IMPORTED_AT.isoformat()),
            ("vendor", 1, "added", 1, "acceptance/vendor.yaml", "2" * 64,
             IMPORTED_AT.isoformat())]
        # Revision 1 holds the same content, rates, caveats and provenance included.
        shown = run_cli("-d", empty_url, "diff", "golden", "--json")
        assert [(c["profile"], c["change"]) for c in json.loads(shown.stdout)["changes"]] == [
            ("m/mtp/k3/thinking-on/chat", "added"), ("m/mtp/k3/thinking-on/coding", "added")]
        from registry_db import history

        golden = history.load_revision(engine, "golden", 1)
        assert store.load_set(engine, "golden") == golden
        assert golden.profiles[0].per_position_rates == (0.8, 0.5, 0.2)
        assert golden.profiles[0].provenance.settings == (("seed", 7),)

        # Resolution names the revision the migration made, now and as of the import time.
        golden = ["resolve", "--model", "m", "--method", "mtp", "--k", "3", "--thinking", "on",
                  "--category", "coding", "--json"]
        vendor = ["resolve", "--model", "v", "--method", "eagle", "--k", "2", "--thinking",
                  "off", "--category", "coding", "--json"]
        for at in (None, IMPORTED_AT.isoformat(), "2026-06-01T09:30:00"):
            flags = [] if at is None else ["--as-of", at]
            answer = json.loads(run_cli("-d", empty_url, *golden, *flags).stdout)
            assert (answer["profile_set"], answer["revision"], answer["acceptance_length"],
                    answer["per_position_rates"]) == ("golden", 1, 2.5, [0.8, 0.5, 0.2])
        earlier = json.loads(run_cli("-d", empty_url, *golden, "--as-of",
                                    "2026-06-01T09:29:59.999999Z").stdout)
        assert earlier["refused"]["reason"] == "no_match"

        # New imports continue the numbering.
        run_cli("-d", empty_url, "delete", "vendor")
        assert [r["revision"] for r in json.loads(run_cli(
            "-d", empty_url, "history", "vendor", "--json").stdout)["revisions"]] == [2, 1]
        # Deleted now, vendor still answers as of before its deletion.
        assert json.loads(run_cli("-d", empty_url, *vendor).stdout)["refused"]["reason"] == \
            "no_match"
        then = json.loads(run_cli("-d", empty_url, *vendor, "--as-of", "2026-07-01").stdout)
        assert (then["profile_set"], then["revision"], then["acceptance_length"]) == (
            "vendor", 1, 1.75)

        store.downgrade(engine, PREVIOUS)
        assert store.current_revision(engine) == PREVIOUS
        with engine.connect() as conn:
            insp = inspect(conn)
            assert not [t for t in insp.get_table_names() if t.startswith("revision")]
            assert "revision" not in {c["name"] for c in insp.get_columns("profile_sets")}
            assert {"set_revisions", "profile_history"}.isdisjoint(insp.get_view_names())
        after = _current(engine)
        # The current registry is intact: golden as it was, vendor deleted (its deletion
        # was the current state), and no provenance that only the history cited.
        expected = {t: [r for r in rows if not (
            (t == "profile_sets" and r[1] == "vendor") or (t == "profiles" and r[1] == 2))]
            for t, rows in before.items()}
        assert after == expected
        assert not broken_foreign_keys(engine)


def test_an_empty_registry_upgrades_and_downgrades(empty_url):
    with migrated_to(empty_url, PREVIOUS) as engine:
        store.upgrade(engine, "0004")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM revisions")).scalar() == 0
        store.downgrade(engine, PREVIOUS)
        store.upgrade(engine)
        assert store.current_revision(engine) == store.HEAD_REVISION


def test_the_downgrade_drops_provenances_only_history_cited(empty_url, tmp_path):
    from tests.helpers import write_set

    with migrated_to(empty_url, PREVIOUS) as engine:
        store.upgrade(engine)  # 0004 and what follows it: the command line needs the head
        write_set(tmp_path / "a", "s", 2, source="https://e/one")
        write_set(tmp_path / "b", "s", 2, source="https://e/two")
        run_cli("-d", empty_url, "import", str(tmp_path / "a"))
        run_cli("-d", empty_url, "import", str(tmp_path / "b"))
        with engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM provenances")).scalar() == 2
        store.downgrade(engine, PREVIOUS)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT source FROM provenances")).scalars().all() == [
                "https://e/two"]
            assert conn.execute(text("SELECT COUNT(*) FROM provenance_settings")).scalar() == 2
        assert not broken_foreign_keys(engine)
