"""Labels (issue 46, item 4): ``registry label NAME [SET@REVISION | --as-of TIME]`` names a state
of the registry, ``registry labels`` lists them (and ``--history`` every position), moving one
needs ``--force``, and every ``--as-of`` takes a label's name: the answer is the one its time
gives. Names are a small charset, never one that reads as a time. Both backends."""

from __future__ import annotations

import json

import pytest

from registry_db.client import Registry
from registry_db.errors import NotFound
from tests.helpers import run_cli, write_set

RUN = ("--model", "model-a", "--method", "mtp", "--k", "3", "--thinking", "on",
       "--category", "cat0")


@pytest.fixture
def edited(db_url, tmp_path):
    """alpha at AL 2.5 (revision 1), then 2.75 (revision 2); beta added with revision 2."""
    folder = tmp_path / "acceptance"
    write_set(folder, "alpha")
    assert run_cli("-d", db_url, "import", "-q", str(folder)).exit_code == 0
    write_set(folder, "alpha", al=2.75)
    write_set(folder, "beta", model="model-b")
    assert run_cli("-d", db_url, "import", "-q", str(folder)).exit_code == 0
    return db_url


def history(url: str) -> dict[tuple[str, int], dict]:
    found = json.loads(run_cli("-d", url, "history", "--json").stdout)["revisions"]
    return {(r["set"], r["revision"]): r for r in found}


def labels(url: str, *args: str) -> dict:
    result = run_cli("-d", url, "labels", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def label(url: str, *args: str):
    return run_cli("-d", url, "label", *args)


def al(url: str, *args: str) -> float:
    result = run_cli("-d", url, "resolve", *RUN, *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["acceptance_length"]


def test_a_label_made_from_a_revision_names_its_time(edited):
    first = history(edited)[("alpha", 1)]
    result = label(edited, "golden-v1", "alpha@1", "-m", "the first cut")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"created  golden-v1  {first['imported_at']} (alpha@1)")
    [made] = labels(edited)["labels"]
    assert made == {"name": "golden-v1", "as_of": first["imported_at"], "set": "alpha",
                    "revision": 1, "labelled_at": made["labelled_at"],
                    "message": "the first cut"}
    # Every --as-of reads the label as its time: the revision's state, not the current one.
    assert al(edited, "--as-of", "golden-v1") == al(edited, "--as-of", first["imported_at"])
    assert al(edited, "--as-of", "golden-v1") == 2.5 and al(edited) == 2.75
    for command in (("profiles", "--json"), ("show", "alpha", "--json"),
                    ("coverage", "--json"), ("export", "alpha", "-o", "-")):
        by_label = run_cli("-d", edited, *command, "--as-of", "golden-v1")
        by_time = run_cli("-d", edited, *command, "--as-of", first["imported_at"])
        assert by_label.exit_code == 0, by_label.stderr
        assert by_label.stdout == by_time.stdout, command
    # beta came later: the label's registry does not hold it.
    assert "model-b" not in run_cli("-d", edited, "profiles", "--as-of", "golden-v1").stdout


def test_a_label_of_now_and_of_a_time(edited, tmp_path):
    assert label(edited, "release-2026-12").exit_code == 0
    assert label(edited, "q4", "--as-of", "2000-01-01T00:00:00Z").exit_code == 0
    made = {x["name"]: x for x in labels(edited)["labels"]}
    assert list(made) == ["q4", "release-2026-12"]
    assert made["q4"]["as_of"] == "2000-01-01T00:00:00+00:00" and made["q4"]["set"] is None
    latest = max(r["imported_at"] for r in history(edited).values())
    assert made["release-2026-12"]["as_of"] > latest
    # A later import does not move what a label names.
    write_set(tmp_path / "acceptance", "alpha", al=3.0)
    assert run_cli("-d", edited, "import", "-q", str(tmp_path / "acceptance")).exit_code == 0
    assert al(edited, "--as-of", "release-2026-12") == 2.75 and al(edited) == 3.0
    # Before the first import, the registry held nothing.
    refused = run_cli("-d", edited, "resolve", *RUN, "--as-of", "q4", "--json")
    assert refused.exit_code == 1 and json.loads(refused.stdout)["refused"]["reason"] == \
        "no_match"
    # A label may be made from another label: the same moment.
    assert label(edited, "copy", "--as-of", "release-2026-12").exit_code == 0
    made = {x["name"]: x for x in labels(edited)["labels"]}
    assert made["copy"]["as_of"] == made["release-2026-12"]["as_of"]


def test_moving_a_label_needs_force_and_keeps_its_history(edited):
    assert label(edited, "golden", "alpha@1").exit_code == 0
    again = label(edited, "golden", "alpha@1")
    assert (again.exit_code, again.stdout.split()[0]) == (0, "unchanged")
    refused = label(edited, "golden", "alpha@2")
    assert refused.exit_code == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        "Error: label 'golden' already names alpha@1; give --force to move it (its earlier "
        "position stays in `registry labels --history`)")
    assert labels(edited)["labels"][0]["revision"] == 1
    moved = label(edited, "golden", "alpha@2", "--force", "-m", "re-cut")
    assert moved.exit_code == 0 and moved.stdout.startswith("moved  golden") and \
        "(was " in moved.stdout
    assert labels(edited)["labels"][0]["revision"] == 2
    events = labels(edited, "--history")["events"]
    assert [(e["action"], e["revision"], e["message"]) for e in events] == [
        ("moved", 2, "re-cut"), ("created", 1, None)]
    assert labels(edited, "--history", "golden") == {"events": events}
    assert al(edited, "--as-of", "golden") == 2.75
    table = run_cli("-d", edited, "labels", "--history").stdout
    assert "moved" in table and "created" in table


def test_an_unknown_label_is_one_line_naming_the_known_ones(edited):
    none = run_cli("-d", edited, "resolve", *RUN, "--as-of", "release")
    assert none.exit_code == 1
    assert none.stderr == ("Error: no label named 'release' (nor is it a time such as "
                           "2026-11-30T12:00:00Z): the registry has no labels yet; make one "
                           "with `registry label NAME`\n")
    assert label(edited, "release-2026-12").exit_code == 0
    for command in (("resolve", *RUN), ("profiles",), ("show", "alpha"), ("coverage",),
                    ("export", "-o", "-"), ("labels", "releas")):
        args = command if command[0] == "labels" else (*command, "--as-of", "releas")
        result = run_cli("-d", edited, *args)
        assert result.exit_code == 1, command
        assert result.stderr == ("Error: no label named 'releas' (nor is it a time such as "
                                 "2026-11-30T12:00:00Z); did you mean 'release-2026-12'? "
                                 "known labels: release-2026-12\n"), command


@pytest.mark.parametrize("name", ["2026-12-01", "2026-12", "20261201", "2026-12-01T12:00Z",
                                  "_x", ".hidden", "a b", "ünï", "a/b", "x" * 65, ""])
def test_a_bad_or_time_like_name_is_refused(edited, name):
    result = label(edited, name)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1].startswith("Error: Invalid value for 'NAME'")
    assert labels(edited)["labels"] == []


def test_what_a_label_cannot_name_is_refused(edited):
    future = label(edited, "later", "--as-of", "9999-01-01")
    assert future.exit_code == 2 and "is after now" in future.stderr
    assert label(edited, "x", "alpha@9").stderr.strip() == (
        "Error: set 'alpha' has no revision 9; its revisions are 1 to 2")
    assert label(edited, "x", "nope@1").exit_code == 1
    assert label(edited, "x", "alpha@0").exit_code == 2
    assert label(edited, "x", "alpha@1", "--as-of", "2026-01-01").exit_code == 2
    assert labels(edited)["labels"] == []


def test_a_set_name_may_hold_an_at_sign(db_url, tmp_path):
    write_set(tmp_path, "team@lab")
    assert run_cli("-d", db_url, "import", "-q", str(tmp_path)).exit_code == 0
    assert label(db_url, "v1", "team@lab@1").exit_code == 0
    assert labels(db_url)["labels"][0]["set"] == "team@lab"


def test_the_library_takes_a_label_wherever_it_takes_as_of(edited):
    assert label(edited, "golden", "alpha@1").exit_code == 0
    with Registry(edited) as reg:
        then = reg.label_time("golden")
        assert [x.name for x in reg.labels()] == ["golden"]
        assert reg.profiles(as_of="golden") == reg.profiles(as_of=then)
        fields = dict(zip(RUN[::2], RUN[1::2]))
        run = {"model": "model-a", "method": "mtp", "k": 3, "thinking": "on",
               "category": fields["--category"]}
        assert reg.resolve(**run, as_of="golden").acceptance_length == 2.5
        assert reg.resolve(**run).acceptance_length == 2.75
        with pytest.raises(NotFound, match="known labels: golden"):
            reg.resolve(**run, as_of="gold")


@pytest.mark.only_backend("postgresql")
def test_the_reader_role_reads_labels_and_provenance_and_writes_nothing(edited):
    from sqlalchemy import create_engine, text

    from tests.helpers import reader_role

    assert label(edited, "golden", "alpha@1").exit_code == 0
    with reader_role(edited) as url:
        result = run_cli("-d", edited, "query", "--query-url", url, "--json",
                         "SELECT l.name, e.action, r.git_commit FROM labels l "
                         "JOIN label_events e ON e.name = l.name "
                         "JOIN set_revisions r ON r.profile_set = l.set_name "
                         "AND r.revision = l.revision")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout) == [
            {"name": "golden", "action": "created", "git_commit": None}]
        reader = create_engine(url)
        try:
            for sql in ("DELETE FROM labels", "INSERT INTO label_events (name, action, as_of, "
                        "labelled_at) VALUES ('x', 'created', now(), now())"):
                with reader.connect() as conn, pytest.raises(Exception, match="denied|read-only"):
                    conn.execute(text(sql))
        finally:
            reader.dispose()
    assert len(labels(edited, "--history")["events"]) == 1


def test_a_batch_line_may_name_a_label(edited):
    assert label(edited, "golden", "alpha@1").exit_code == 0
    then = labels(edited)["labels"][0]["as_of"]
    run = {"model": "model-a", "method": "mtp", "k": 3, "thinking": "on", "category": "cat0"}
    lines = "\n".join(json.dumps({**run, **extra}) for extra in (
        {"as_of": "golden", "id": 1}, {"as_of": then, "id": 2}, {"id": 3},
        {"as_of": "gold", "id": 4}, {"as_of": "2026-11-31", "id": 5})) + "\n"
    result = run_cli("-d", edited, "resolve", "--batch", "-", input=lines)
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a.get("acceptance_length") for a in answers[:3]] == [2.5, 2.5, 2.75]
    assert answers[0]["revision"] == answers[1]["revision"] == 1
    assert answers[3]["refused"]["reason"] == "invalid_request"
    assert "no label named 'gold'" in answers[3]["refused"]["message"]
    assert "known labels: golden" in answers[3]["refused"]["message"]
    assert "is not a valid time" in answers[4]["refused"]["message"]
    with Registry(edited) as reg:
        [a] = list(reg.batch([json.dumps({**run, "as_of": "golden"})]))
        assert a.answer.acceptance_length == 2.5


def test_a_moved_label_moves_the_next_batch_too(edited):
    # A label's name in a batch line is read against that batch's labels, never a kept reading
    # (the common lines' reader keeps others, per distinct value, for the process's life).
    line = json.dumps({"model": "model-a", "method": "mtp", "k": 3, "thinking": "on",
                       "category": "cat0", "as_of": "golden"}) + "\n"
    got = []
    for position in ("alpha@1", "alpha@2"):
        assert label(edited, "golden", position, "--force").exit_code == 0
        result = run_cli("-d", edited, "resolve", "--batch", "-", input=line)
        got.append(json.loads(result.stdout)["acceptance_length"])
    assert got == [2.5, 2.75]
