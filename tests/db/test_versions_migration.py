"""Migration 0007 as users meet it, on both backends: a history filled at 0006 (a copy of every
profile per revision, written with that revision's SQL, never today's importer) becomes one row
per profile version; the analysts' views give the same rows before and after; every as-of
answer (resolve --as-of and a batch of them, history, diff, show --as-of, export --revision,
restore --revision) is the
same after the upgrade, after the downgrade (which writes the copies back exactly) and after
upgrading again; and nothing is lost, so ``db downgrade`` needs no --force."""

from __future__ import annotations

import json

from alembic.script import ScriptDirectory
from sqlalchemy import text

from registry_db import store
from tests.helpers import HISTORY_0006 as HISTORY
from tests.helpers import HISTORY_TIMES as T
from tests.helpers import broken_foreign_keys, migrated_to, run_cli
from tests.helpers import fill_history_0006 as _fill

PREVIOUS = "0006"
def _copies(engine) -> list[tuple]:
    """0006's history by content: each revision's profiles with their rates and counts."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT v.set_name, v.revision, p.position, p.model, p.category, "
            "p.acceptance_length, p.method, p.provenance_id, p.rationale, "
            "(SELECT COUNT(*) FROM revision_rates r WHERE r.profile_id = p.id), "
            "(SELECT SUM(r.rate * r.position) FROM revision_rates r WHERE r.profile_id = p.id), "
            "c.drafts, c.accepted_tokens, c.accepted_per_position, c.al_stderr "
            "FROM revision_profiles p JOIN revisions v ON v.id = p.revision_id "
            "LEFT JOIN revision_counts c ON c.profile_id = p.id "
            "ORDER BY v.set_name, v.revision, p.position")).all()
    return [tuple(r) for r in rows]


def _views(engine) -> dict[str, list[tuple]]:
    """Every row of the history's views, every column."""
    out = {}
    with engine.connect() as conn:
        for view in ("profile_history", "set_revisions"):
            rows = conn.execute(text(f"SELECT * FROM {view}")).all()
            out[view] = sorted(tuple(str(v) for v in r) for r in rows)
    return out


def _cli(url: str, *args: str) -> str:
    """What a command says: its exit code and output (a refusal or a NotFound included)."""
    result = run_cli("-d", url, *args)
    assert result.exit_code in (0, 1), result.output
    return f"{result.exit_code}\n{result.output}"


def _answers(url: str, tmp_path) -> dict[str, str]:
    """What the as-of commands say, for every set at several times and revisions."""
    golden = ["--model", "m", "--method", "mtp", "--k", "3", "--thinking", "on"]
    vendor = ["--model", "v", "--method", "eagle", "--k", "2", "--thinking", "off",
              "--category", "coding"]
    times = ["2025-12-01T00:00:00Z", T[0].isoformat(), "2026-01-15T00:00:00Z",
             T[1].isoformat(), "2026-03-15T00:00:00Z", "2026-04-15T00:00:00Z",
             "2026-06-01T00:00:00Z"]
    out: dict[str, str] = {}
    for at in [None, *times]:
        when = [] if at is None else ["--as-of", at]
        for category in ("coding", "chat", "math", "law"):
            out[f"resolve golden {category} {at}"] = _cli(
                url, "resolve", *golden, "--category", category, "--json", *when)
        out[f"resolve vendor {at}"] = _cli(url, "resolve", *vendor, "--json", *when)
        out[f"resolve scoped {at}"] = _cli(url, "resolve", *golden, "--category", "coding",
                                           "--set", "golden", "--json", *when)
        if at is not None:
            out[f"show {at}"] = _cli(url, "show", "golden", "--json", *when)
    tmp_path.mkdir(parents=True, exist_ok=True)
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({
        "model": "m", "method": "mtp", "k": 3, "thinking": "on", "category": c,
        "as_of": at}) + "\n" for at in times for c in ("coding", "chat", "math", "law")))
    out["batch"] = _cli(url, "resolve", "--batch", str(batch), "--json")
    for name, revisions in HISTORY.items():
        out[f"history {name}"] = _cli(url, "history", name, "--json")
        for number in range(1, len(revisions) + 1):
            out[f"diff {name} {number}"] = _cli(url, "diff", name, "--to", str(number), "--json")
            if revisions[number - 1][1] != "deleted":
                folder = tmp_path / f"export-{name}-{number}"
                _cli(url, "export", name, "--revision", str(number), "-o", str(folder))
                out[f"export {name} {number}"] = "".join(
                    f.read_text() for f in sorted(folder.rglob("*.yaml")))
    return out


def _would_lose(engine) -> list[str]:
    module = ScriptDirectory.from_config(store.alembic_config()).get_revision("0007").module
    with engine.connect() as conn:
        return module.would_lose(conn)


def test_a_history_becomes_versions_and_back_with_every_answer_kept(empty_url, tmp_path):
    with migrated_to(empty_url, PREVIOUS) as engine:
        _fill(engine)
        copies, views = _copies(engine), _views(engine)
        assert len(copies) == 8
        store.upgrade(engine, "0007")
        assert _views(engine) == views
        assert not broken_foreign_keys(engine)
        with engine.connect() as conn:
            versions = [tuple(r) for r in conn.execute(text(
                "SELECT set_name, category, acceptance_length, first_revision, last_revision, "
                "valid_until IS NULL FROM profile_versions "
                "ORDER BY set_name, first_revision, position"))]
        # Eight copies, seven versions: B spans golden's revisions 1 and 2; A's return to its
        # first value and vendor's re-addition are versions of their own.
        assert versions == [
            ("golden", "coding", 2.5, 1, 1, 0), ("golden", "chat", 2.25, 1, 2, 0),
            ("golden", "coding", 2.6, 2, 2, 0), ("golden", "coding", 2.5, 3, None, 1),
            ("golden", "math", 2.0, 3, None, 1),
            ("vendor", "coding", 1.75, 1, 1, 0), ("vendor", "coding", 1.75, 3, None, 1)]
        with engine.connect() as conn:
            keys = [tuple(r) for r in conn.execute(text(
                "SELECT set_name, category, valid_until IS NULL FROM profile_keys "
                "ORDER BY set_name, valid_from, category"))]
        # Each unbroken stretch of a key: golden's coding through every edit, chat until its
        # removal, math since; vendor's coding before its deletion and after its return.
        assert keys == [("golden", "chat", 0), ("golden", "coding", 1), ("golden", "math", 1),
                        ("vendor", "coding", 0), ("vendor", "coding", 1)]
        store.upgrade(engine)  # the commands need the head; 0008 adds a cache table only
        answers = _answers(empty_url, tmp_path / "first")
        assert json.loads(answers[f"resolve golden coding {T[1].isoformat()}"].split(
            "\n", 1)[1])["acceptance_length"] == 2.6
        assert json.loads(answers["resolve vendor 2026-03-15T00:00:00Z"].split("\n", 1)[1])[
            "refused"]["reason"] == "no_match"
        assert sum(a.startswith("0") for a in answers.values()) > len(answers) // 2
        assert _would_lose(engine) == []

        # Down through the command line: it loses nothing, so it needs no --force.
        result = run_cli("-d", empty_url, "db", "downgrade", PREVIOUS)
        assert result.exit_code == 0, result.output
        assert store.current_revision(engine) == PREVIOUS
        assert _copies(engine) == copies
        assert _views(engine) == views
        assert not broken_foreign_keys(engine)

        store.upgrade(engine)
        assert _answers(empty_url, tmp_path / "again") == answers
        assert not broken_foreign_keys(engine)
        # restore --revision brings back what the migrated history holds.
        assert run_cli("-d", empty_url, "restore", "golden", "--revision", "2").exit_code == 0
        folder = tmp_path / "restored"
        _cli(empty_url, "export", "golden", "-o", str(folder))
        assert "".join(f.read_text() for f in sorted(folder.rglob("*.yaml"))) == answers[
            "export golden 2"]


def test_an_empty_registry_upgrades_and_downgrades(empty_url):
    with migrated_to(empty_url, PREVIOUS) as engine:
        store.upgrade(engine, "0007")
        assert _would_lose(engine) == []
        store.downgrade(engine, PREVIOUS)
        assert _copies(engine) == []
        store.upgrade(engine)
