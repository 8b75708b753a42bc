"""Resolving as of a time (issue 13), on both backends: import, edit, import, delete, import
again, and ``--as-of`` at and between each step answers that step's value and revision (before
the first import: an empty registry); batches equal one-by-one; conflicts, fallbacks, ``--set``,
pins and ``--emit`` as of a time behave as they do now; the fast SQLite path agrees with the
engine; hostile times are one-line errors; and the statements search the history's indexes."""

from __future__ import annotations

import json
import re
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import text

from registry_db.errors import ResolutionRefused
from registry_db.model import Pin
from registry_db.resolve.plan import Request, resolve, resolve_many
from registry_db.store import sqlite_read
from tests.helpers import run_cli, write_set

KEY = ("model-a", "mtp", 3)
#: The run the steps are resolved with (model-a/mtp/k3/thinking-on/cat0).
ARGS = ["--model", "model-a", "--method", "mtp", "--k", "3", "--thinking", "on",
        "--category", "cat0"]
US = timedelta(microseconds=1)


def _times(url: str, name: str) -> list[datetime]:
    """When each revision of ``name`` was recorded, oldest first."""
    shown = run_cli("-d", url, "history", name, "--json")
    assert shown.exit_code == 0, shown.output
    revisions = json.loads(shown.stdout)["revisions"]
    return [datetime.fromisoformat(r["imported_at"]) for r in reversed(revisions)]


def _cli(url: str, *args: str, env: dict | None = None):
    result = run_cli("-d", url, *args, env=env)
    assert result.exit_code == 0, result.output
    return result


def _url(engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _build_steps(engine) -> None:
    """Import (AL 2.5), edit and import (3.0), delete, import again (3.5), on the command line."""
    url = _url(engine)
    with tempfile.TemporaryDirectory() as folder:
        for al in (2.5, 3.0, None, 3.5):
            if al is None:
                _cli(url, "delete", "golden", "-m", "retracted")
            else:
                write_set(Path(folder), "golden", al=al)
                _cli(url, "import", folder)


def _build_two_sets(engine) -> None:
    """first (t1), then second holding the same keys (t2: a conflict), then first deleted (t3)."""
    url = _url(engine)
    with tempfile.TemporaryDirectory() as folder:
        write_set(Path(folder) / "a", "first", al=2.5)
        write_set(Path(folder) / "b", "second", al=3.0, first_category=1)
        _cli(url, "import", str(Path(folder) / "a"))
        _cli(url, "import", str(Path(folder) / "b"))
        _cli(url, "delete", "first")


def _build_long_history(engine) -> None:
    """The generated registry imported twice (two revisions of each of its five sets) beside
    a long history of other sets (4,000 revisions), so that the planners see tables of
    thousands and choose as they would on a registry that has been in use for a while."""
    import dataclasses

    from registry_db.importing import write as importer
    from tests.helpers import generated_sets

    sets = generated_sets()
    importer.import_sets(engine, sets)
    importer.import_sets(engine, [dataclasses.replace(s, caveats=("second",)) for s in sets])
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO revisions (set_name, revision, action, imported_at, content_hash, "
            "profile_count) VALUES (:n, :r, :a, :t, :h, 0)"),
            [{"n": f"archive-{i}", "r": j, "a": "added" if j == 1 else "updated",
              "t": datetime(2020, 1 + j % 12, 1 + i % 28, tzinfo=UTC), "h": "h" * 64}
             for i in range(40) for j in range(1, 101)])
        if engine.dialect.name == "postgresql":
            conn.execute(text("ANALYZE"))


#: The histories the tests read, in the order a test asking for several builds them.
HISTORIES = {"two_sets": _build_two_sets, "steps": _build_steps,
             "long_history": _build_long_history}


@pytest.fixture
def db_url(request, shared_url) -> str:
    """Here: the registry holding the histories the test asks for (``steps``, ``two_sets``,
    ``long_history``), built once a session and only read (``shared_url`` checks)."""
    names = [n for n in HISTORIES if n in request.fixturenames]
    return shared_url("history-" + "+".join(names),
                      lambda engine: [HISTORIES[n](engine) for n in names])


@pytest.fixture
def steps(db_url):
    """The URL and, per step of :func:`_build_steps`, its time and what the run resolves to
    then ((AL, revision), or None: nothing)."""
    answers = ((2.5, 1), (3.0, 2), None, (3.5, 4))
    return db_url, list(zip(_times(db_url, "golden"), answers, strict=True))


def _answer(bind, at, **kw):
    """(AL, revision) of the run as of ``at``, or the refusal's reason."""
    try:
        got = resolve(bind, Request(*KEY, "on", "cat0", as_of=at, **kw))
    except ResolutionRefused as refusal:
        return refusal.reason
    return got.acceptance_length, got.revision


def _moments(times: list[datetime]) -> list[tuple[datetime, int | None]]:
    """Each step's time exactly, a microsecond before it, and half-way to the next step: the
    moment and the index of the step it falls in (None: before the first)."""
    out: list[tuple[datetime, int | None]] = [(times[0] - timedelta(days=3650), None),
                                              (times[0] - US, None)]
    for i, t in enumerate(times):
        out.append((t, i))
        if i + 1 < len(times):
            out.append((t + (times[i + 1] - t) / 2, i))
            out.append((times[i + 1] - US, i))
        else:
            out.append((t + timedelta(days=1), i))
    return out


def test_each_step_as_of_its_time(steps, engine):
    url, recorded = steps
    times = [t for t, _ in recorded]
    assert times == sorted(times) and len(set(times)) == 4
    for at, step in _moments(times):
        expected = "no_match" if step is None or recorded[step][1] is None \
            else recorded[step][1]
        # A datetime, aware or naive (UTC), and the ISO text with a zone: the same moment.
        assert _answer(engine, at) == expected, (at, step)
        assert _answer(engine, at.replace(tzinfo=None)) == expected
        assert _answer(engine, at.isoformat()) == expected
    # Without a time: the current registry, whose answer names its revision too.
    assert _answer(engine, None) == (3.5, 4)


def test_as_of_on_the_command_line_both_ways(steps, backend):
    url, recorded = steps
    env_ways = [None, {sqlite_read.NO_FAST_PATH_ENV: "1"}] if backend == "sqlite" else [None]
    for at, step in _moments([t for t, _ in recorded]):
        # The text a user types: no zone (UTC), and Z.
        for shown in (at.replace(tzinfo=None).isoformat(),
                      at.isoformat().replace("+00:00", "Z")):
            outs = []
            for env in env_ways:
                result = run_cli("-d", url, "resolve", *ARGS, "--as-of", shown, "--json",
                                 env=env)
                outs.append((result.stdout, result.stderr, result.exit_code))
            assert len(set(outs)) == 1, outs  # the fast path and the engine agree
            body = json.loads(outs[0][0])
            if step is None or recorded[step][1] is None:
                assert body["refused"]["reason"] == "no_match"
                assert " as of " in body["refused"]["message"]
            else:
                assert (body["acceptance_length"], body["revision"]) == recorded[step][1]


def test_as_of_exactly_an_imports_time_sees_it(steps, engine):
    """The comparison is ``imported_at <= as_of``, to the microsecond, on both backends (on
    SQLite, where the time is text, the bound is written in the stored format)."""
    _, recorded = steps
    (first, _), (second, _) = recorded[:2]
    assert _answer(engine, first) == (2.5, 1)
    assert _answer(engine, first - US) == "no_match"
    assert _answer(engine, second) == (3.0, 2)
    assert _answer(engine, second - US) == (2.5, 1)
    # The same instant written in another zone.
    east = second.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert _answer(engine, east.isoformat()) == (3.0, 2)


@pytest.mark.only_backend("sqlite")
def test_sqlite_stores_times_in_the_format_the_bound_is_written_in(steps, engine):
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT imported_at FROM revisions")).scalars().all()
    assert len(stored) == 4
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", s) for s in stored), stored


def test_every_stored_answer_names_its_revision_and_inline_ones_none(steps, engine):
    url, _ = steps
    now = resolve(engine, Request(*KEY, "on", "cat0"))
    assert now.revision == 4 and now.to_json()["revision"] == 4
    inline = resolve(engine, Request(*KEY, "on", "cat0", cli={"num_spec_tokens": 3,
                                                              "acceptance_length": 2.0}))
    assert inline.revision is None and inline.to_json()["revision"] is None
    shown = json.loads(_cli(url, "resolve", *ARGS, "--json").stdout)
    assert shown["revision"] == 4 and list(shown).index("revision") == list(shown).index(
        "profile") + 1


# --- batches -------------------------------------------------------------------------------------

def _requests(times: list[datetime]) -> list[Request]:
    out = []
    for at, _ in _moments(times):
        for shown in (at, at.isoformat()):
            out += [Request(*KEY, "on", "cat0", as_of=shown),
                    Request(*KEY, "on", "cat7", pin=Pin(fallback_category="cat1"), as_of=shown),
                    Request(*KEY, "on", "cat0", sets=("golden",), as_of=shown),
                    Request(*KEY, "on", "cat0", pin=Pin(profiles="golden"), as_of=shown),
                    Request(*KEY, "on", "cat0", sets=("gold",), as_of=shown),
                    Request(*KEY, "off", "cat0", as_of=shown)]
    out += [Request(*KEY, "on", "cat0"), Request(*KEY, "on", "cat0", as_of="not a time")]
    return out


def _one(bind, request):
    try:
        return resolve(bind, request).to_json()
    except ResolutionRefused as refusal:
        return refusal.to_json()


def test_batch_as_of_equals_one_by_one(steps, engine):
    _, recorded = steps
    requests = _requests([t for t, _ in recorded])
    batch = [a.to_json() for a in resolve_many(engine, requests)]
    assert batch == [_one(engine, r) for r in requests]
    reasons = {a["refused"]["reason"] for a in batch if "refused" in a}
    assert reasons == {"no_match", "fallback_no_match", "unknown_set", "invalid_request"}
    assert {a["revision"] for a in batch if "revision" in a} == {1, 2, 4}
    assert any(a.get("fallback") for a in batch)


def test_batch_lines_take_as_of(steps):
    url, recorded = steps
    times = [t for t, _ in recorded]
    lines, expected = [], []
    for at, step in _moments(times):
        lines.append(json.dumps({"model": "model-a", "method": "mtp", "k": 3, "thinking": "on",
                                 "category": "cat0", "as_of": at.isoformat()}))
        expected.append(None if step is None else recorded[step][1])
    lines.append('{"model": "model-a", "method": "mtp", "k": 3, "as_of": 20261130}')
    result = run_cli("-d", url, "resolve", "--batch", "-", input="\n".join(lines) + "\n")
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.exit_code == 1  # the last line is not a well-formed request
    for answer, want in zip(answers, expected):
        if want is None:
            assert answer["refused"]["reason"] == "no_match"
        else:
            assert (answer["acceptance_length"], answer["revision"]) == want
    assert answers[-1]["refused"]["reason"] == "invalid_request"
    assert "as_of must be a string" in answers[-1]["refused"]["message"]


# --- conflicts, scope, pins, fallback and --emit as of a time -----------------------------------

@pytest.fixture
def two_sets(db_url):
    """The URL and the times of :func:`_build_two_sets`'s steps (t1, t2, t3)."""
    (t1, t3), (t2,) = _times(db_url, "first"), _times(db_url, "second")
    return db_url, (t1, t2, t3)


def _run(bind, at, category="cat1", **kw):
    try:
        got = resolve(bind, Request(*KEY, "on", category, as_of=at, **kw))
    except ResolutionRefused as refusal:
        return refusal.reason, refusal.message
    return got.profile_set, got.revision, got.acceptance_length, got.fallback


def test_conflicts_scope_and_pins_as_of(two_sets, engine):
    _, (t1, t2, t3) = two_sets
    # t1: only first; cat1 is first's.
    assert _run(engine, t1) == ("first", 1, 2.5, None)
    # t2: both hold cat1 (second's categories are cat1..cat3): a conflict naming both.
    reason, message = _run(engine, t2)
    assert reason == "conflict" and "2 registry sets hold" in message
    assert "first, second" in message
    # ... which --set and a pin settle, as of that time.
    assert _run(engine, t2, sets=("second",)) == ("second", 1, 3.0, None)
    assert _run(engine, t2, pin=Pin(profiles="first")) == ("first", 1, 2.5, None)
    # t3: first is deleted; second alone answers, and naming first is unknown_set then.
    assert _run(engine, t3) == ("second", 1, 3.0, None)
    reason, message = _run(engine, t3, sets=("first",))
    assert reason == "unknown_set" and message.startswith("--set: no profile set named 'first'")
    assert message.endswith(f"known sets: second as of {t3.isoformat()[:-6]}Z")
    # At t1 second did not exist yet: naming it is unknown_set, suggesting first.
    reason, message = _run(engine, t1, pin=Pin(profiles="second"))
    assert reason == "unknown_set" and "first" in message
    # The current registry agrees with t3.
    assert _run(engine, None) == _run(engine, t3)


def test_fallback_as_of(two_sets, engine):
    _, (t1, t2, t3) = two_sets
    fallback = Pin(fallback_category="cat0")  # cat0: first's only
    got = _run(engine, t1, category="cat9", pin=fallback)
    assert got[:3] == ("first", 1, 2.5) and got[3].category == "cat0"
    # At t3 first is gone, and with it the fallback's only curve.
    reason, message = _run(engine, t3, category="cat9", pin=fallback)
    assert reason == "fallback_no_match" and " as of " in message
    # A conflict in the fallback is counted as of the time too (cat2: both at t2).
    assert _run(engine, t2, category="cat9", pin=Pin(fallback_category="cat2"))[0] == "conflict"
    assert _run(engine, t3, category="cat9", pin=Pin(fallback_category="cat2"))[0] == "second"


def test_no_match_as_of_says_what_was_stored_then(two_sets, engine):
    _, (t1, _, t3) = two_sets
    reason, message = _run(engine, t1, category="cat3")
    assert reason == "no_match"
    assert message.endswith("stored for model-a/mtp there: K 3; thinking on; "
                            "categories cat0, cat1, cat2")
    reason, message = _run(engine, t3, category="cat0")
    assert message.endswith("categories cat1, cat2, cat3")
    reason, message = _run(engine, t1 - timedelta(days=1), category="cat0")
    assert message.endswith("nothing is stored for model-a/mtp there")
    # A batch says the same.
    requests = [Request(*KEY, "on", c, as_of=at) for at in (t1, t3, t1 - timedelta(days=1))
                for c in ("cat0", "cat3")]
    assert [a.to_json() for a in resolve_many(engine, requests)] == [
        _one(engine, r) for r in requests]


def test_many_misses_as_of_say_what_was_stored_each_then(two_sets, engine):
    """More distinct (model, method, time) misses than one PostgreSQL statement takes
    (``AS_OF_CHUNK``), across every set and in named sets, and times where nothing was: the
    batch (one statement on SQLite's TEMP table) says what each one-by-one answer says."""
    from registry_db.resolve.stored import AS_OF_CHUNK

    url, (t1, t2, t3) = two_sets
    times = [t1 + i * US for i in range(AS_OF_CHUNK + 5)] + [t2, t3, t1 - timedelta(days=1)]
    requests = [Request(*KEY, "on", "cat9", as_of=at, sets=sets)
                for at in times for sets in (None, ("second",), ("first", "second"))]
    answers = [a.to_json() for a in resolve_many(engine, requests)]
    assert answers == [_one(engine, r) for r in requests]
    said = {re.search(r"(nothing is )?stored for .*", a["refused"]["message"])[0]
            for a in answers if a["refused"]["reason"] == "no_match"}
    assert said == {"stored for model-a/mtp there: K 3; thinking on; categories cat0, cat1, cat2",
                    "stored for model-a/mtp there: K 3; thinking on; "
                    "categories cat0, cat1, cat2, cat3",
                    "stored for model-a/mtp there: K 3; thinking on; categories cat1, cat2, cat3",
                    "nothing is stored for model-a/mtp there"}
    if url.startswith("sqlite"):  # the command line's read-only path says the same
        conn = sqlite_read.open_readonly(url)
        assert conn is not None
        try:
            assert [a.to_json() for a in resolve_many(conn, requests)] == answers
        finally:
            conn.close()


def test_emit_as_of(two_sets):
    url, (t1, _, _) = two_sets
    args = [*ARGS[:-1], "cat1", "--emit", "vllm", "--as-of", t1.isoformat()]
    then = json.loads(_cli(url, "resolve", *args, "--json").stdout)
    assert (then["resolution"]["profile_set"], then["resolution"]["revision"]) == ("first", 1)
    assert then["resolution"]["acceptance_length"] == 2.5
    now = json.loads(_cli(url, "resolve", *args[:-2], "--json").stdout)
    assert now["resolution"]["profile_set"] == "second"


# --- hostile times -------------------------------------------------------------------------------

HOSTILE = ["garbage", "", "99999-01-01", "2026-02-30", "2026-11-30x12:00", "2026-11-30+12:00",
           "9999-12-31T23:00:00-05:00", "0001-01-01T00:30:00+01:00", "2026-11-30T25:00",
           "x" * 10_000, "2026-11-30T12:00:00\u2028", "١٢٣٤-01-01"]


@pytest.mark.parametrize("value", [v for v in HOSTILE if v != "garbage"],
                         ids=lambda v: repr(v)[:30])
def test_a_hostile_as_of_is_a_one_line_usage_error(steps, value):
    """Neither a time nor a label's name (``garbage`` could name a label: see test_labels)."""
    url, _ = steps
    result = run_cli("-d", url, "resolve", *ARGS, "--as-of", value)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "--as-of" in errors[0], result.stderr
    assert len(errors[0]) < 300


def test_a_nul_in_as_of_is_refused_before_anything(steps):
    url, _ = steps
    result = run_cli("-d", url, "resolve", *ARGS, "--as-of", "2026-11-30\x00T12:00")
    assert result.exit_code == 2 and "NUL" in result.stderr


@pytest.mark.parametrize("value", [*HOSTILE, 12, True, ["2026-11-30"]], ids=lambda v: repr(v)[:30])
def test_a_hostile_as_of_refuses_the_run_and_the_batch_line(steps, engine, value):
    with pytest.raises(ResolutionRefused) as refused:
        resolve(engine, Request(*KEY, "on", "cat0", as_of=value))
    assert refused.value.reason == "invalid_request"
    assert "as_of" in refused.value.message and "\n" not in refused.value.message
    (answer,) = resolve_many(engine, [Request(*KEY, "on", "cat0", as_of=value)])
    assert answer.to_json() == refused.value.to_json()
    url, _ = steps
    line = json.dumps({"model": "model-a", "method": "mtp", "k": 3, "as_of": value})
    result = run_cli("-d", url, "resolve", "--batch", "-", input=line + "\n")
    (shown,) = result.stdout.splitlines()
    assert json.loads(shown)["refused"]["reason"] == "invalid_request"
    assert result.exit_code == 1


# --- the statements search the history's indexes --------------------------------------------------

@pytest.fixture
def long_history(engine):
    """The engine on :func:`_build_long_history`'s registry."""
    return engine


def _index(conn, table: str, columns: list[str]) -> str:
    """The index on ``columns`` of ``table`` (SQLite names a unique constraint's itself)."""
    if conn.dialect.name != "sqlite":
        return {"revisions": "ix_revisions_set_name_imported_at",
                "profile_keys": "uq_profile_keys_key",
                "profile_versions": "uq_profile_versions_stretch"}[table]
    for row in conn.exec_driver_sql(f"PRAGMA index_list({table})"):
        found = [r[2] for r in conn.exec_driver_sql(f"PRAGMA index_info('{row[1]}')")]
        if found == columns:
            return row[1]
    raise AssertionError(f"no index on {table} {columns}")


KEY_COLUMNS = ["model", "speculative_method", "num_spec_tokens", "thinking", "category",
               "set_name", "valid_from", "valid_until"]
# A scoped run also binds the set's name, the next column of the key.
SEARCH_KEY = ("USING {how}INDEX {index} (model=? AND speculative_method=? AND num_spec_tokens=? "
              "AND thinking=? AND category=?")


def _plan(conn, sql: str, params) -> str:
    cur = conn.connection.dbapi_connection.cursor()
    if conn.dialect.name == "sqlite":
        cur.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(r[-1]) for r in cur.fetchall())
    cur.execute(f"EXPLAIN {sql}", params)
    return "\n".join(r[0] for r in cur.fetchall())


def _assert_searches(conn, plan: str, scanned: tuple[str, ...] = ()) -> None:
    """``plan`` finds stretches, later revisions and versions by index; it scans nothing but
    ``scanned`` (on SQLite: the batch's key table and the statement's own intermediate
    results)."""
    key = _index(conn, "profile_keys", KEY_COLUMNS)
    stretch = _index(conn, "profile_versions", ["key_id", "first_revision"])
    later = _index(conn, "revisions", ["set_name", "imported_at"])
    if conn.dialect.name == "sqlite":
        # Every stretch found by its whole key (from the index alone); each set's revision of
        # the time read in one probe of (set_name, imported_at); the version it held in one
        # probe of (key_id, first_revision), then its row by primary key.
        assert f"SEARCH p {SEARCH_KEY.format(how='COVERING ', index=key)}" in plan, plan
        assert f"SEARCH n USING INDEX {later} (set_name=? AND imported_at<?)" in plan, plan
        assert (f"SEARCH q USING COVERING INDEX {stretch} (key_id=? AND first_revision<?)"
                in plan), plan
        assert "SEARCH p USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
        scans = re.findall(r"^SCAN (\S+)", plan, re.M)
        assert all(name in scanned or name.startswith("(subquery") for name in scans), plan
    else:
        assert key in plan and stretch in plan and later in plan, plan
        for table in ("profile_keys", "profile_versions", "revisions"):
            assert f"Seq Scan on {table}" not in plan, plan


@pytest.mark.parametrize("scoped", [0, 2])
def test_one_run_as_of_searches_the_history_indexes(long_history, scoped):
    from registry_db.resolve.lookup import Lookup, one_parameters, one_statement

    at = datetime.now(UTC)
    lookup = Lookup("model-1", "eagle", 3, "off", "chat", "coding",
                    ("north", "south") if scoped else None, at)
    with long_history.connect() as conn:
        statement, order = one_statement(conn.dialect.name, scoped, True)
        plan = _plan(conn, statement, one_parameters(lookup, order, conn.dialect.name))
        # c (and h, the same): the run's few candidates, the statement's own CTE.
        _assert_searches(conn, plan, scanned=("c", "h"))


def test_batch_as_of_probes_the_history_indexes_for_a_few_keys(long_history):
    from registry_db.resolve import lookup as lk

    at = datetime.now(UTC)
    lookups = [lk.Lookup("model-1", "eagle", 3, "off", c, None, ("north",) if i % 2 else None,
                         at) for i, c in enumerate(("coding", "chat", "math", "law", "poetry"))]
    with long_history.connect() as conn:
        rows = lk._lookup_rows(lookups, True, conn.dialect.name)
        cur = conn.connection.dbapi_connection.cursor()
        if conn.dialect.name == "sqlite":
            cur.execute(lk.SQLITE_AS_OF_DDL)
            cur.executemany(lk.SQLITE_AS_OF_INSERT, rows)
            plan = _plan(conn, lk.SQLITE_LOOKUP_MANY_AS_OF, ())
        else:
            plan = _plan(conn, lk.PG_LOOKUP_MANY_AS_OF, lk.pg_parameters(rows))
        # t: the keys; r: the ranked candidates (the statement's CTE, not a table).
        _assert_searches(conn, plan, scanned=("t", "r"))


def test_the_current_lookup_still_reads_the_current_tables(long_history):
    """The registry as it stands is still read from profiles (its revision from profile_sets),
    never from the history: its statement is unchanged but for that one column."""
    from registry_db.resolve.lookup import LOOKUP_ONE, PG_LOOKUP_MANY, SQLITE_LOOKUP_MANY

    for sql in (*LOOKUP_ONE.values(), PG_LOOKUP_MANY, SQLITE_LOOKUP_MANY):
        assert "revision_profiles" not in sql and "FROM revisions" not in sql
        assert "profile_versions" not in sql
        assert "s.revision" in sql


# --- docs/schema.md's "what would the resolver have answered on a date" -------------------------

def _documented_as_of_query() -> str:
    from tests.helpers import ROOT

    page = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- example: resolver-answer-as-of [^>]*-->\n```sql\n(.*?)```", page, re.S)
    assert m, "docs/schema.md lost the resolver-answer-as-of query"
    return m.group(1)


def _as_text(at: datetime, dialect: str) -> str:
    """``t`` as the page says to bind it: UTC text with a space; the zone on PostgreSQL."""
    shown = at.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
    return shown if dialect == "sqlite" else shown + "+00"


def test_the_documented_as_of_query_answers_what_the_library_does(two_sets, steps, engine):
    """On a history with a conflict, a deletion and a re-import (both fixtures share the
    database): at, before and between every import, each run the query answers as the
    library does."""
    _, (t1, t2, t3) = two_sets
    _, recorded = steps
    times = sorted([t1, t2, t3, *(t for t, _ in recorded)])
    moments = [at for at, _ in _moments(times)]
    sql = text(_documented_as_of_query())
    seen = set()
    with engine.connect() as conn:
        for at in moments:
            for category, fallback in (("cat0", None), ("cat1", None), ("cat2", None),
                                       ("cat9", "cat0"), ("cat9", "cat3"), ("cat3", "cat0")):
                rows = conn.execute(sql, {
                    "model": "model-a", "method": "mtp", "k": 3, "thinking": "on",
                    "category": category,
                    "fallback_category": category if fallback is None else fallback,
                    "t": _as_text(at, engine.dialect.name)}).all()
                pin = None if fallback is None else Pin(fallback_category=fallback)
                try:
                    got = resolve(engine, Request(*KEY, "on", category, pin=pin, as_of=at))
                except ResolutionRefused as refusal:
                    seen.add(refusal.reason)
                    if refusal.reason == "conflict":
                        assert {r.answer for r in rows} == {"conflict"}
                        assert f": {', '.join(r.profile_set for r in rows)}; name" in \
                            refusal.message
                    else:
                        assert rows == [], (at, category, fallback)
                    continue
                seen.add("fallback" if got.fallback else "resolved")
                assert [tuple(r) for r in rows] == [(
                    "resolved", got.profile_set, got.revision, got.profile,
                    got.acceptance_length, got.fallback.category if got.fallback else None, 1)]
    assert seen == {"resolved", "fallback", "conflict", "no_match", "fallback_no_match"}


def test_deployment_as_of(steps, tmp_path):
    """--deployment resolves each speculating pool against the registry of the time too."""
    url, recorded = steps
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text("pools:\n  - name: prefill\n  - name: decode\n    engine:\n"
                          "      speculative: {method: mtp, num_spec_tokens: 3}\n")
    args = ["resolve", "--model", "model-a", "--deployment", str(deployment), "--thinking", "on",
            "--category", "cat0", "--json"]
    for at, expected in recorded:
        result = run_cli("-d", url, *args, "--as-of", at.isoformat())
        body = json.loads(result.stdout)
        if expected is None:  # the deleted interval: the pool's run is refused, naming it
            assert result.exit_code == 1 and body["refused"]["reason"] == "no_match"
            assert body["refused"]["message"].startswith("pool 'decode': ")
        else:
            decode = body["pools"]["decode"]
            assert (decode["acceptance_length"], decode["revision"]) == expected
