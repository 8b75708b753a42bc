"""Deleted is not gone (issue 28.6), on both backends: `restore SET [--revision N]`, `export SET
--revision N`, `--as-of TIME` on show, profiles, export, coverage and plot, and an export of a
deleted set that says when it went and which revision holds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry_db.sources.profile_set import check_paths
from tests.helpers import run_cli, write_set

NAME = "curves"


def run(url: str, *args: str):
    return run_cli("-d", url, *args)


def _build(db_url: str, tmp_path: Path) -> tuple[str, dict]:
    """``curves`` added (AL 2.5, three profiles), updated (AL 2.6, two), then deleted; and
    ``other`` added after all that. Returns the URL and revision -> its time."""
    first = write_set(tmp_path / "v1", NAME, 3, al=2.5)
    assert run(db_url, "import", "-m", "first", str(first)).exit_code == 0
    second = write_set(tmp_path / "v2", NAME, 2, al=2.6)
    assert run(db_url, "import", "-m", "second", str(second)).exit_code == 0
    assert run(db_url, "delete", NAME, "-m", "gone").exit_code == 0
    write_set(tmp_path / "v3", "other", 1, model="o")
    assert run(db_url, "import", str(tmp_path / "v3")).exit_code == 0
    return _timed(db_url)


def _timed(db_url: str) -> tuple[str, dict]:
    revs = json.loads(run(db_url, "history", NAME, "--json").stdout)["revisions"]
    return db_url, {r["revision"]: r["imported_at"] for r in revs}


@pytest.fixture
def timeline(shared_url, tmp_path_factory):
    """:func:`_build`'s history, built once a session for the tests that only read it."""
    return _timed(shared_url("as-of-timeline", lambda engine: _build(
        engine.url.render_as_string(hide_password=False), tmp_path_factory.mktemp("timeline"))))


@pytest.fixture
def own_timeline(db_url, tmp_path):
    """:func:`_build`'s history in the test's own registry, for a test that writes."""
    return _build(db_url, tmp_path)


def _als(doc_profiles: list[dict]) -> list[float]:
    return [p["acceptance_length"] for p in doc_profiles]


# --- --as-of on the reading commands -------------------------------------------------------------

def test_show_as_of_a_time_shows_the_set_as_it_was(timeline):
    url, at = timeline
    doc = json.loads(run(url, "show", NAME, "--as-of", at[1], "--json").stdout)
    assert _als(doc["profiles"]) == [2.5, 2.5, 2.5]
    assert doc["revision"] == 1 and doc["imported_at"] == at[1]
    later = json.loads(run(url, "show", NAME, "--as-of", at[2], "--json").stdout)
    assert _als(later["profiles"]) == [2.6, 2.6] and later["revision"] == 2
    text = run(url, "show", NAME, "--as-of", at[1])
    assert text.exit_code == 0 and "revision: 1" in text.stdout
    gone = run(url, "show", NAME, "--as-of", at[3])
    assert gone.exit_code == 1
    assert f"was deleted at {at[3]} (revision 3)" in gone.stderr
    before = run(url, "show", NAME, "--as-of", "2000-01-01")
    assert before.exit_code == 1
    assert f"first added at {at[1]}" in before.stderr


def test_profiles_as_of_a_time(timeline):
    url, at = timeline
    rows = json.loads(run(url, "profiles", "--as-of", at[1], "--json").stdout)
    assert [(r["set"], r["acceptance_length"]) for r in rows] == [(NAME, 2.5)] * 3
    rows = json.loads(run(url, "profiles", "--as-of", at[2], "--set", NAME, "--json").stdout)
    assert [r["acceptance_length"] for r in rows] == [2.6, 2.6]
    # Now: the set is deleted, only `other` is there.
    assert {r["set"] for r in json.loads(run(url, "profiles", "--json").stdout)} == {"other"}
    unknown = run(url, "profiles", "--as-of", at[1], "--set", "other")
    assert unknown.exit_code == 1 and "first added at" in unknown.stderr


def test_coverage_and_plot_as_of_a_time(timeline, tmp_path):
    url, at = timeline
    grid = json.loads(run(url, "coverage", "--as-of", at[1], "--json").stdout)
    cells = [c for r in grid["rows"] for c in r["cells"] if c["acceptance_length"] is not None]
    assert [(c["k"], c["acceptance_length"], c["sets"]) for c in cells] == [
        (3, 2.5, [NAME])] * 3
    now = json.loads(run(url, "coverage", "--json").stdout)
    assert {r["model"] for r in now["rows"]} == {"o"}
    empty = run(url, "coverage", "--as-of", "2000-01-01")
    assert empty.exit_code == 1 and "as of 2000-01-01T00:00:00+00:00" in empty.stderr
    pytest.importorskip("matplotlib")
    drawn = run(url, "plot", "--as-of", at[2], "-o", str(tmp_path / "then.svg"), "--json")
    assert drawn.exit_code == 0, drawn.output
    assert json.loads(drawn.stdout)["points"] == 2


def test_a_time_that_is_not_one_is_a_usage_error(timeline):
    url, _ = timeline
    for command in (["show", NAME], ["profiles"], ["export", "-o", "-"], ["coverage"]):
        result = run(url, *command, "--as-of", "2026-11-31")
        assert result.exit_code == 2, command
        assert "'2026-11-31' is not a valid time" in result.stderr
        result = run(url, *command, "--as-of", "yester day")
        assert result.exit_code == 2, command
        assert "'yester day' is not an ISO 8601 time" in result.stderr
        # A word could name a label (docs/history.md): none has that name.
        result = run(url, *command, "--as-of", "yesterday")
        assert result.exit_code == 1, command
        assert "no label named 'yesterday' (nor is it a time" in result.stderr


# --- export at a revision or a time, and of a deleted set ----------------------------------------

def test_export_a_revision_or_a_time(timeline, tmp_path):
    url, at = timeline
    printed = run(url, "export", NAME, "--revision", "1", "-o", "-")
    assert printed.exit_code == 0, printed.output
    assert printed.stdout.count("acceptance_length: 2.5") == 3
    out = tmp_path / "then"
    written = run(url, "export", "--as-of", at[2], "-o", str(out))
    assert written.exit_code == 0, written.output
    assert written.stdout.strip() == str(out / f"{NAME}.yaml")
    sets, findings = check_paths([out])
    assert findings == [] and [len(s.profiles) for s in sets] == [2]
    hashes = {r["revision"]: r["content_hash"] for r in json.loads(
        run(url, "history", NAME, "--json").stdout)["revisions"]}
    assert sets[0].content_hash() == hashes[2]


def test_export_revision_needs_one_set_and_not_a_time_too(timeline):
    url, at = timeline
    assert run(url, "export", "--revision", "1", "-o", "-").exit_code == 2
    assert run(url, "export", NAME, "other", "--revision", "1", "-o", "-").exit_code == 2
    both = run(url, "export", NAME, "--revision", "1", "--as-of", at[1], "-o", "-")
    assert both.exit_code == 2 and "--revision and --as-of" in both.stderr
    deletion = run(url, "export", NAME, "--revision", "3", "-o", "-")
    assert deletion.exit_code == 1
    assert "revision 3 of 'curves' is its deletion" in deletion.stderr
    assert "revision 2 holds its last content" in deletion.stderr


def test_export_of_a_deleted_set_says_when_and_which_revision_holds_it(timeline, tmp_path):
    url, at = timeline
    result = run(url, "export", NAME, "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert (f"set 'curves' was deleted at {at[3]} (revision 3); revision 2 holds its last "
            "content") in result.stderr
    assert "registry export curves --revision 2" in result.stderr
    assert "registry restore curves" in result.stderr
    assert not (tmp_path / "out").exists()


# --- restore -------------------------------------------------------------------------------------

def test_restore_brings_a_deleted_set_back_as_a_new_revision(own_timeline):
    url, _ = own_timeline
    result = run(url, "restore", NAME, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sets"] == [{
        "name": NAME, "file": json.loads(run(url, "history", NAME, "--json").stdout)[
            "revisions"][0]["file"], "status": "added", "profiles": 2,
        "from_revision": 2, "revision": 4}]
    rows = json.loads(run(url, "profiles", "--set", NAME, "--json").stdout)
    assert [r["acceptance_length"] for r in rows] == [2.6, 2.6]
    latest = json.loads(run(url, "history", NAME, "--json").stdout)["revisions"][0]
    assert (latest["revision"], latest["action"], latest["message"]) == (
        4, "added", "restore of revision 2")
    # An earlier revision, with a message of its own: an update, as an import would be.
    older = run(url, "restore", NAME, "--revision", "1", "-m", "back to the first run")
    assert older.exit_code == 0, older.output
    assert older.stdout.startswith("updated  curves  (3 profiles)  revision 1 -> revision 5")
    latest = json.loads(run(url, "history", NAME, "--json").stdout)["revisions"][0]
    assert (latest["revision"], latest["action"], latest["message"]) == (
        5, "updated", "back to the first run")
    same = run(url, "restore", NAME, "--revision", "5")
    assert same.exit_code == 0 and same.stdout.startswith("unchanged  curves")


def test_restore_refusals(timeline):
    url, _ = timeline
    live = run(url, "restore", "other")
    assert live.exit_code == 2 and "--revision" in live.stderr
    unknown = run(url, "restore", "curvs")
    assert unknown.exit_code == 1 and "did you mean 'curves'" in unknown.stderr
    deletion = run(url, "restore", NAME, "--revision", "3")
    assert deletion.exit_code == 1 and "is its deletion" in deletion.stderr
    missing = run(url, "restore", NAME, "--revision", "9")
    assert missing.exit_code == 1 and "its revisions are 1 to 3" in missing.stderr
