"""History on both backends: every import and deletion a revision, diffs field by field,
deleting and pruning sets, as users meet them through the command line."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from registry_db import history, store
from registry_db.errors import NotFound
from registry_db.importing import write as importer
from tests.helpers import SEED_FILE, broken_foreign_keys, orphan_provenances, run_cli, write_set

REVISION_KEYS = ["set", "revision", "action", "imported_at", "file", "profiles",
                 "content_hash", "message", "git_commit", "git_dirty", "git_path"]
#: The table's columns: git's three as one short cell, before the message.
TABLE_KEYS = ["set", "revision", "action", "imported_at", "file", "profiles", "content_hash",
              "commit", "message"]


def cli(url: str, *args: str):
    return run_cli("-d", url, *args)


def revisions_json(url: str, *args: str) -> list[dict]:
    result = cli(url, "history", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["revisions"]


def edited_seed(tmp_path, old: str, new: str):
    path = tmp_path / "edited" / SEED_FILE.name
    path.parent.mkdir(exist_ok=True)
    source = path.read_text() if path.exists() else SEED_FILE.read_text()
    assert old in source
    path.write_text(source.replace(old, new, 1))
    return path


def test_import_edit_import_delete_import_again(db_url, tmp_path):
    name = "inferencex-golden-al"
    assert cli(db_url, "import", str(SEED_FILE), "-m", "first curves").exit_code == 0
    assert cli(db_url, "import", str(SEED_FILE)).exit_code == 0  # unchanged: no revision
    edited = edited_seed(tmp_path, "acceptance_length: 3.51", "acceptance_length: 3.55")
    assert cli(db_url, "import", str(edited), "-m", "re-ran").exit_code == 0
    assert cli(db_url, "delete", name, "-m", "superseded").exit_code == 0
    assert cli(db_url, "import", str(SEED_FILE)).exit_code == 0

    found = revisions_json(db_url, name)
    assert [list(r) for r in found] == [REVISION_KEYS] * 4
    assert [(r["revision"], r["action"], r["profiles"], r["message"]) for r in found] == [
        (4, "added", 3, None), (3, "deleted", 0, "superseded"), (2, "updated", 3, "re-ran"),
        (1, "added", 3, "first curves")]
    assert found[2]["file"] == str(edited) and found[3]["file"] == str(SEED_FILE)
    assert found[1]["content_hash"] is None
    assert found[0]["content_hash"] == found[3]["content_hash"] != found[2]["content_hash"]
    times = [r["imported_at"] for r in found]
    assert times == sorted(times, reverse=True) and all(t.endswith("+00:00") for t in times)
    # Every set's history, newest first, is the same list here (one set).
    assert revisions_json(db_url) == found


def test_history_text_and_csv(db_url):
    cli(db_url, "import", str(SEED_FILE), "-m", "first")
    table = cli(db_url, "history").stdout.splitlines()
    assert table[0].split() == TABLE_KEYS
    assert table[2].split()[:3] == ["inferencex-golden-al", "1", "added"]
    assert table[2].split()[-1] == "first"
    rows = cli(db_url, "history", "--csv").stdout.splitlines()
    assert rows[0] == ",".join(REVISION_KEYS)
    assert len(rows[1].split(",")[6]) == 64  # the whole hash


def test_history_of_an_unknown_set_names_the_nearest(db_url):
    cli(db_url, "import", str(SEED_FILE))
    result = cli(db_url, "history", "inferencex-golden")
    assert result.exit_code == 1
    assert "did you mean 'inferencex-golden-al'" in result.stderr


def test_diff_names_exactly_the_changed_fields(db_url, tmp_path):
    cli(db_url, "import", str(SEED_FILE))
    edited = edited_seed(tmp_path, "acceptance_length: 3.51", "acceptance_length: 3.55")
    edited = edited_seed(tmp_path, "hardware: b300", "hardware: h200")
    assert cli(db_url, "import", str(edited)).exit_code == 0
    result = cli(db_url, "diff", "inferencex-golden-al", "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert (got["set"], got["from"], got["to"]) == ("inferencex-golden-al", 1, 2)
    changes = {c["profile"]: (c["change"], c["fields"]) for c in got["changes"]}
    # The seed's first provenance (an anchor) is shared by both deepseek profiles.
    assert changes == {
        "deepseek-v4.1-flash/dspark/k5/thinking-off/coding": ("changed", {
            "provenance.hardware": {"from": "b300", "to": "h200"}}),
        "deepseek-v4.1-flash/dspark/k5/thinking-on/coding": ("changed", {
            "acceptance_length": {"from": 3.51, "to": 3.55},
            "provenance.hardware": {"from": "b300", "to": "h200"}}),
    }
    lines = cli(db_url, "diff", "inferencex-golden-al").stdout.splitlines()
    assert "changed  deepseek-v4.1-flash/dspark/k5/thinking-on/coding  acceptance_length: " \
           "3.51 → 3.55" in lines
    assert len(lines) == 3


def test_diff_of_added_removed_and_caveats(db_url, tmp_path):
    write_set(tmp_path / "a", "s", 3, caveats=("one",))
    write_set(tmp_path / "b", "s", 2, caveats=("two",), first_category=1)
    cli(db_url, "import", str(tmp_path / "a"))
    cli(db_url, "import", str(tmp_path / "b"))
    got = json.loads(cli(db_url, "diff", "s", "--json").stdout)
    assert got["changes"] == [
        {"profile": None, "change": "changed",
         "fields": {"caveats": {"from": ["one"], "to": ["two"]}}},
        {"profile": "model-a/mtp/k3/thinking-on/cat0", "change": "removed",
         "fields": {"acceptance_length": {"from": 2.5, "to": None}}},
    ]
    first = json.loads(cli(db_url, "diff", "s", "--to", "1", "--json").stdout)
    assert first["from"] is None and [c["change"] for c in first["changes"]] == ["added"] * 3
    same = cli(db_url, "diff", "s", "--from", "2", "--to", "2")
    assert same.exit_code == 0 and same.stdout == "(no changes)\n"


def test_diff_refuses_unknown_revisions_and_sets(db_url):
    cli(db_url, "import", str(SEED_FILE))
    result = cli(db_url, "diff", "inferencex-golden-al", "--from", "1", "--to", "5")
    assert result.exit_code == 1
    assert "has no revision 5; its revisions are 1 to 1" in result.stderr
    assert cli(db_url, "diff", "nope").exit_code == 1
    assert cli(db_url, "diff", "inferencex-golden-al", "--to", "0").exit_code == 2


def test_delete_is_all_or_nothing_and_names_the_nearest(db_url, tmp_path):
    for name in ("alpha", "beta"):
        write_set(tmp_path, name, 2, model=name)
    cli(db_url, "import", str(tmp_path))
    result = cli(db_url, "delete", "alpha", "bta")
    assert result.exit_code == 1
    assert "no profile set named 'bta'; did you mean 'beta'" in result.stderr
    assert "nothing was deleted" in result.stderr
    engine = store.open_registry(db_url)
    try:
        assert [s.name for s in store.list_sets(engine)] == ["alpha", "beta"]
        assert len(history.history(engine)) == 2
        result = cli(db_url, "delete", "alpha", "beta", "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == {"sets": [
            {"name": "alpha", "file": str(tmp_path / "alpha.yaml"), "status": "deleted",
             "profiles": 2, "revision": 2},
            {"name": "beta", "file": str(tmp_path / "beta.yaml"), "status": "deleted",
             "profiles": 2, "revision": 2}]}
        assert store.list_sets(engine) == []
        assert not broken_foreign_keys(engine) and orphan_provenances(engine) == 0
        # The history still holds what was deleted, provenance included.
        old = history.load_revision(engine, "alpha", 1)
        assert len(old.profiles) == 2 and old.profiles[0].provenance.hardware == "b300"
        assert history.load_revision(engine, "alpha", 2) is None
    finally:
        engine.dispose()


def test_a_deleted_set_no_longer_resolves_or_conflicts(db_url, tmp_path):
    write_set(tmp_path, "one", 2, model="m")
    write_set(tmp_path, "two", 2, model="m")
    cli(db_url, "import", str(tmp_path))
    assert json.loads(cli(db_url, "conflicts", "--json").stdout) != []
    args = ["resolve", "--model", "m", "--method", "mtp", "--k", "3", "--thinking", "on",
            "--category", "cat0", "--json"]
    assert json.loads(cli(db_url, *args).stdout)["refused"]["reason"] == "conflict"
    cli(db_url, "delete", "two")
    assert json.loads(cli(db_url, "conflicts", "--json").stdout) == []
    assert json.loads(cli(db_url, *args).stdout)["profile_set"] == "one"


def test_prune_deletes_exactly_the_sets_not_declared(db_url, tmp_path):
    for name in ("keep", "drop-a", "drop-b"):
        write_set(tmp_path / "all", name, 2, model=name)
    write_set(tmp_path / "now", "keep", 2, model="keep")
    write_set(tmp_path / "now", "new", 1, model="new")
    cli(db_url, "import", str(tmp_path / "all"))

    dry = cli(db_url, "import", "--prune", "--dry-run", "--json", str(tmp_path / "now"))
    assert dry.exit_code == 0, dry.output
    assert [(s["name"], s["status"]) for s in json.loads(dry.stdout)["sets"]] == [
        ("keep", "unchanged"), ("new", "added"), ("drop-a", "deleted"), ("drop-b", "deleted")]
    engine = store.open_registry(db_url)
    try:
        assert len(store.list_sets(engine)) == 3  # the dry run wrote nothing
        result = cli(db_url, "import", "--prune", "-m", "tidy", str(tmp_path / "now"))
        assert result.exit_code == 0, result.output
        assert [line.split()[:2] for line in result.stdout.splitlines()] == [
            ["unchanged", "keep"], ["added", "new"], ["deleted", "drop-a"], ["deleted", "drop-b"]]
        assert "1 added, 0 updated, 1 unchanged, 2 deleted" in result.stderr
        assert [s.name for s in store.list_sets(engine)] == ["keep", "new"]
        actions = {(r.set, r.revision): (r.action, r.message) for r in history.history(engine)}
        assert actions == {("keep", 1): ("added", None), ("drop-a", 1): ("added", None),
                           ("drop-b", 1): ("added", None), ("drop-a", 2): ("deleted", "tidy"),
                           ("drop-b", 2): ("deleted", "tidy"), ("new", 1): ("added", "tidy")}
    finally:
        engine.dispose()
    # Without --prune nothing is deleted.
    cli(db_url, "import", str(tmp_path / "all" / "keep.yaml"))
    assert len(revisions_json(db_url)) == 6


def test_dry_run_prints_each_updated_sets_changes(db_url, tmp_path):
    cli(db_url, "import", str(SEED_FILE))
    edited = edited_seed(tmp_path, "acceptance_length: 2.99", "acceptance_length: 3.1")
    result = cli(db_url, "import", "--dry-run", str(edited))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == [
        "inferencex-golden-al:",
        "changed  glm-5.3/mtp/k3/thinking-on/coding  acceptance_length: 2.99 → 3.1"]
    assert len(revisions_json(db_url)) == 1


def test_revisions_keep_every_revisions_content(engine, tmp_path):
    [seed], _ = importer.load_paths([SEED_FILE])
    importer.import_sets(engine, [seed], message="one")
    edited = edited_seed(tmp_path, "acceptance_length: 3.51", "acceptance_length: 3.55")
    [second], _ = importer.load_paths([edited])
    importer.import_sets(engine, [second])
    assert history.load_revision(engine, seed.name, 1).content_hash() == seed.content_hash()
    assert history.load_revision(engine, seed.name, 2).content_hash() == second.content_hash()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT revision FROM profile_sets")).scalar() == 2
        # Each revision holds its three profiles and its caveats; the caveats are copied per
        # revision, a profile is stored once per version (the range of revisions holding it).
        counts = conn.execute(text(
            "SELECT v.revision, (SELECT COUNT(*) FROM profile_versions p "
            "WHERE p.set_name = v.set_name AND p.first_revision <= v.revision "
            "AND (p.last_revision IS NULL OR p.last_revision >= v.revision)), "
            "(SELECT COUNT(*) FROM revision_caveats c "
            "WHERE c.revision_id = v.id) FROM revisions v ORDER BY v.revision")).all()
        versions = conn.execute(text("SELECT COUNT(*) FROM profile_versions")).scalar()
    assert [tuple(r) for r in counts] == [(1, 3, len(seed.caveats)), (2, 3, len(seed.caveats))]
    assert versions == 4  # the edited profile's two versions and the two others' one each
    with pytest.raises(NotFound, match="has no revision 3"):
        history.load_revision(engine, seed.name, 3)


def test_revision_numbers_are_unique_per_set(engine):
    [seed], _ = importer.load_paths([SEED_FILE])
    importer.import_sets(engine, [seed])
    with pytest.raises(IntegrityError):
        with engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO revisions (set_name, revision, action, imported_at, content_hash, "
                "profile_count) VALUES ('inferencex-golden-al', 1, 'updated', "
                "CURRENT_TIMESTAMP, 'x', 0)"))


def test_help_texts_end_with_an_example(db_url):
    for command in ("history", "diff", "delete", "import"):
        out = cli(db_url, command, "--help").stdout
        assert "Example:" in out.split("Options:")[0], command


def test_the_analysts_views_over_a_history(db_url, tmp_path):
    """profile_history gives each revision's value and what replaced it; set_revisions each
    revision with its counts and whether it is the latest (docs/schema.md examples 18-20)."""
    from registry_db.store.query import run_query as query

    def run_query(url, sql, params=None):  # the test's own SQL: no reader role needed
        return query(url, sql, params, trust_sql=True)

    write_set(tmp_path / "1", "s", 2, al=2.5)
    write_set(tmp_path / "2", "s", 2, al=2.75, caveats=("c1", "c2"))
    for args in (["import", str(tmp_path / "1"), "-m", "one"], ["import", str(tmp_path / "2")],
                 ["delete", "s"], ["import", str(tmp_path / "1")]):
        assert cli(db_url, *args).exit_code == 0
    curve = run_query(db_url, "SELECT revision, action, acceptance_length, superseded_by, "
                      "is_current, valid_until IS NULL FROM profile_history "
                      "WHERE profile = 'model-a/mtp/k3/thinking-on/cat0' ORDER BY revision")
    assert [tuple(r) for r in curve.rows] == [
        (1, "added", 2.5, 2, 0, 0), (2, "updated", 2.75, 3, 0, 0), (4, "added", 2.5, None, 1, 1)]
    revs = run_query(db_url, "SELECT revision, action, profile_count, caveat_count, message, "
                     "is_latest, content_hash IS NULL FROM set_revisions ORDER BY revision")
    assert [tuple(r) for r in revs.rows] == [
        (1, "added", 2, 1, "one", 0, 0), (2, "updated", 2, 2, None, 0, 0),
        (3, "deleted", 0, 0, None, 0, 1), (4, "added", 2, 1, None, 1, 0)]
    # Example 17: as of revision 2's time, the registry held revision 2's values.
    t2 = run_query(db_url, "SELECT imported_at FROM set_revisions WHERE revision = 2").rows[0][0]
    at = run_query(db_url, "SELECT revision, acceptance_length FROM profile_history "
                   "WHERE valid_from <= :t AND (valid_until IS NULL OR valid_until > :t)",
                   {"t": t2})
    assert {tuple(r) for r in at.rows} == {(2, 2.75)}

