"""Many runs at once: the batch answers exactly what one-by-one resolution does, with a fixed
number of statements however many requests there are, and the lookups use the profile key's
index (asserted on the query plans, not on timings)."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import text

from registry_db.errors import ResolutionRefused
from registry_db.gcpause import PAUSE_FROM as GC_PAUSE_FROM
from registry_db.model import InlineValue, Pin
from registry_db.resolve import plan as plan_module
from registry_db.resolve.lookup import (
    LOOKUP_ONE,
    PG_LOOKUP_MANY,
    SQLITE_KEYS_DDL,
    SQLITE_KEYS_INSERT,
    SQLITE_LOOKUP_MANY,
    Lookup,
    one_parameters,
    one_statement,
    pg_parameters,
)
from registry_db.resolve.plan import Request, resolve, resolve_many
from tests.helpers import CATEGORIES, CHIPS, SET_NAMES, build_generated, random_key


def generated_requests(n: int, seed: int = 11) -> list[Request]:
    """A mix over every rule: hits, misses, conflicts, fallbacks, pins, values, bad input."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        model, method, k, thinking, category = random_key(rng)
        kw: dict = {}
        r = rng.random
        if r() < 0.05:
            thinking = None
        if r() < 0.1:
            category = None
        elif r() < 0.1:
            category = "unseen"
        if r() < 0.3:
            kw["sets"] = tuple(rng.sample(SET_NAMES, rng.randint(1, 3)))
        elif r() < 0.02:
            kw["sets"] = ("nowhere",)
        roll = r()
        if roll < 0.2:
            kw["pin"] = Pin(fallback_category=rng.choice(CATEGORIES))
        elif roll < 0.3:
            kw["pin"] = Pin(profiles=rng.choice(SET_NAMES + ("elsewhere",)),
                            fallback_category=rng.choice((None,) + CATEGORIES))
        elif roll < 0.33:
            kw["pin"] = Pin(value=InlineValue(rng.choice((k, k, k + 1)), acceptance_length=1.5))
        if r() < 0.05:
            kw["workload"] = InlineValue(k, acceptance_rate=rng.choice((0.25, 0.5, 1.5)))
        if r() < 0.05:
            kw["cli"] = InlineValue(rng.choice((k, k + 1)), acceptance_length=1.25)
        if r() < 0.3:
            kw["hardware"] = rng.choice(CHIPS)
        if r() < 0.01:
            thinking = "sometimes"
        out.append(Request(model, method, k, thinking, category, **kw))
    return out


def _one(engine, request: Request):
    try:
        return resolve(engine, request).to_json()
    except ResolutionRefused as refusal:
        return refusal.to_json()


def _many(engine, requests):
    return [a.to_json() for a in resolve_many(engine, requests)]


@pytest.fixture
def big(shared_registry):
    return shared_registry("generated", build_generated)


def test_batch_equals_one_by_one(big):
    requests = generated_requests(2_000)
    batch = _many(big, requests)
    assert batch == [_one(big, r) for r in requests]
    reasons = {a["refused"]["reason"] for a in batch if "refused" in a}
    layers = {a["layer"] for a in batch if "layer" in a}
    # The mix really covers the rules it is meant to compare.
    assert reasons >= {"no_thinking", "no_category", "no_match", "fallback_no_match", "conflict",
                       "unknown_set", "k_mismatch", "invalid_value", "invalid_request"}
    assert layers == {"registry", "workload", "scenario", "cli"}
    assert any(a.get("fallback") for a in batch) and any(a.get("hardware_mismatch")
                                                         for a in batch)
    assert {a.get("rates_derived") for a in batch if "layer" in a} == {True, False}


def test_batch_of_duplicates_and_empty_batch(big):
    requests = generated_requests(50, seed=3) * 3
    assert _many(big, requests) == _many(big, requests[:50]) * 3
    assert resolve_many(big, []) == []


class _Counting:
    """A DB-API connection that records every statement its cursors send (one per call)."""

    def __init__(self, real):
        self.real, self.sent = real, []

    def cursor(self):
        return _CountingCursor(self.real.cursor(), self.sent)

    def __getattr__(self, name):
        return getattr(self.real, name)


class _CountingCursor:
    def __init__(self, real, sent):
        self.real, self.sent = real, sent

    def execute(self, sql, *args):
        self.sent.append(sql)
        return self.real.execute(sql, *args)

    def executemany(self, sql, rows):
        self.sent.append(sql)
        return self.real.executemany(sql, rows)

    def __getattr__(self, name):
        return getattr(self.real, name)


def _statements(engine, work) -> list[str]:
    """The statements ``work(conn)`` sends through a connection of ``engine``."""
    with engine.connect() as conn:
        fairy = conn.connection
        real = fairy.dbapi_connection
        counting = fairy.dbapi_connection = _Counting(real)
        try:
            work(conn)
        finally:
            fairy.dbapi_connection = real
    return counting.sent


@pytest.mark.parametrize("by_function", [False, True])
def test_batch_makes_no_per_request_round_trips(big, by_function, monkeypatch):
    monkeypatch.setattr(plan_module, "BY_FUNCTION", by_function)
    small = _statements(big, lambda conn: resolve_many(conn, generated_requests(10)))
    large = _statements(big, lambda conn: resolve_many(conn, generated_requests(3_000)))
    # <= 6, + at most 2: no_match refusals say what is stored, one query for the runs in every
    # set and one for the runs scoped to some (the sets told apart), however many lines.
    stored = "GROUP BY p.model, p.speculative_method"
    if big.dialect.name == "postgresql" and by_function:
        # registry_resolve_many (0013) answers every run in one set or every set, saying
        # what is stored itself; only runs in several sets take the lookup statement.
        for sent in (small, large):
            assert len(sent) <= 8, sent
            assert sum("registry_resolve_many" in sql for sql in sent) == 1, sent
            assert sum(stored in sql for sql in sent) <= 2, sent
        return
    for sent in (small, large):
        assert len(sent) - sum(stored in sql for sql in sent) <= 6, sent
        assert 1 <= sum(stored in sql for sql in sent) <= 2, sent
    assert sum(stored in sql for sql in large) == 2  # the 3,000 have misses of both kinds
    assert sum("JOIN profiles p" in sql for sql in large) == 1


def test_one_run_is_one_lookup_query(big):
    """One statement decides a run: the registry layer's (on PostgreSQL, its function)."""
    request = Request("model-1", "eagle", 3, "off", "chat", pin=Pin(fallback_category="coding"))
    sent = _statements(big, lambda conn: _one(conn, request))
    assert len(sent) == 1
    assert ("FROM registry_resolve(" if big.dialect.name == "postgresql"
            else "FROM profiles p") in sent[0]
    # In the one set it names (--set, or a scenario's): the statement also says whether the
    # set is stored, and what is stored for model-1/eagle (this run is refused no_match) comes
    # in the answer's own row.
    for named in (Request("model-1", "eagle", 3, "off", "chat", sets=("north",)),
                  Request("model-1", "eagle", 3, "off", "chat", pin=Pin(profiles="north"))):
        assert _one(big, named)["refused"]["reason"] == "no_match"
        assert len(_statements(big, lambda conn, named=named: _one(conn, named))) == 1
    # Several sets named: the same one statement, the sets as one parameter (set_names).
    several = Request("model-1", "eagle", 3, "off", "chat", sets=("north", "south"))
    sent = _statements(big, lambda conn: _one(conn, several))
    assert len(sent) == 1
    assert ("FROM registry_resolve(" if big.dialect.name == "postgresql"
            else "json_each(") in sent[0]


def _plan_text(conn, sql: str, params) -> str:
    cur = conn.connection.dbapi_connection.cursor()
    if conn.dialect.name == "sqlite":
        cur.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(r[-1]) for r in cur.fetchall())
    cur.execute(f"EXPLAIN {sql}", params)
    return "\n".join(r[0] for r in cur.fetchall())


KEY_COLUMNS = ["model", "speculative_method", "num_spec_tokens", "thinking", "category",
               "set_id"]


def _key_index(conn) -> str:
    """The index behind the unique constraint uq_profiles_key (SQLite names it itself)."""
    if conn.dialect.name != "sqlite":
        return "uq_profiles_key"
    for row in conn.exec_driver_sql("PRAGMA index_list(profiles)"):
        columns = [r[2] for r in conn.exec_driver_sql(f"PRAGMA index_info('{row[1]}')")]
        if columns == KEY_COLUMNS:
            return row[1]
    raise AssertionError("no index on the profile key")


@pytest.mark.parametrize("fallback", ["coding", None])
def test_one_run_lookup_uses_the_profile_key_index(big, fallback):
    """With a fallback and without (the same statement, the fallback bound to null)."""
    with big.connect() as conn:
        statement, order = one_statement(conn.dialect.name, 0)
        if fallback is not None:
            assert statement == LOOKUP_ONE[conn.dialect.name]
        params = one_parameters(Lookup("model-1", "eagle", 3, "off", "chat", fallback), order)
        plan = _plan_text(conn, statement, params)
        index = _key_index(conn)
    assert index in plan, plan
    if big.dialect.name == "sqlite":
        # All five key columns bound: a search of the index, not a scan of the table.
        assert (f"SEARCH p USING INDEX {index} (model=? AND speculative_method=? AND "
                "num_spec_tokens=? AND thinking=? AND category=?)") in plan, plan
    assert "SCAN p\n" not in plan + "\n" and "Seq Scan on profiles" not in plan, plan


def test_batch_lookup_probes_the_index_for_a_few_keys(big):
    """SQLite probes the index per key of the TEMP table; PostgreSQL does for a few keys sent
    as JSON (for many it may merge-join the sorted keys with the table: set-based either way)."""
    # One lookup row per category, every other one scoped to a set: (lookup, preference, key,
    # set name or '' for every set).
    keys = [(i, i % 2, "model-1", "eagle", 3, "off", c, "north" if i % 2 else "")
            for i, c in enumerate(CATEGORIES)]
    with big.connect() as conn:
        index = _key_index(conn)
        cur = conn.connection.dbapi_connection.cursor()
        if conn.dialect.name == "sqlite":
            cur.execute(SQLITE_KEYS_DDL)
            cur.executemany(SQLITE_KEYS_INSERT, keys)
            plan = "\n".join(r[-1] for r in cur.execute("EXPLAIN QUERY PLAN "
                                                         + SQLITE_LOOKUP_MANY))
            # The window's rows from the index alone (it covers the key and the id); the
            # winners' columns then by primary key.
            assert f"SEARCH p USING COVERING INDEX {index} (model=? AND speculative_method=? " \
                   "AND num_spec_tokens=? AND thinking=? AND category=?)" in plan, plan
            assert "SEARCH p USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
            assert "SCAN p\n" not in plan + "\n", plan
            return
        cur.execute("EXPLAIN " + PG_LOOKUP_MANY, pg_parameters(keys))
        plan = "\n".join(r[0] for r in cur.fetchall())
    assert index in plan and "Seq Scan on profiles" not in plan, plan


def test_batch_tells_equal_values_of_other_types_apart(big):
    """K 1 and K True compare equal in Python; only the first is a valid K."""
    good = Request("model-1", "eagle", 1, cli=InlineValue(1, acceptance_length=1.5))
    bad = Request("model-1", "eagle", 1, cli=InlineValue(True, acceptance_length=1.5))
    first, second = resolve_many(big, [good, bad])
    assert first.layer == "cli"
    assert second.reason == "invalid_value" and "num_spec_tokens" in second.message


def test_identical_runs_are_planned_once_and_answered_as_each_alone(big):
    """A batch plans identical runs once; requests that only compare equal (K 1, 1.0 and True;
    text against a number) are not the same run, and each keeps its own answer: a term of
    another type than its own is refused where the request is checked, before any plan, and a
    list of set names is the same run as the tuple."""
    from registry_db.resolve import plan as planner

    base = dict(thinking="off", category="chat")
    variants = [Request("model-1", "eagle", 1, **base), Request("model-1", "eagle", True, **base),
                Request("model-1", "eagle", 1.0, **base), Request("model-1", "eagle", 3, **base),
                Request("model-1", "eagle", 3, **base, hardware="b300"),
                Request("model-1", "eagle", 3, **base, sets=("north",)),
                Request("model-1", "eagle", 3, **base, sets=["north"]),  # the same scope
                Request("model-1", "eagle", 3, **base, as_of="2100-01-01"),
                Request(1, "eagle", 3, **base), Request(True, "eagle", 3, **base)]
    requests = [r for _ in range(3) for r in variants]
    calls = []
    real = planner.plan

    def counting(run, known):
        calls.append(run)
        return real(run, known)

    try:
        planner.plan = counting
        batch = [a.to_json() for a in resolve_many(big, requests)]
    finally:
        planner.plan = real
    assert batch == [_one(big, r) for r in requests]
    # The five distinct runs planned once each; K True, K 1.0 and the models 1 and True are
    # refused before any plan (issue 23: the run is checked once, at the border).
    assert len(calls) == len(set(calls)) == 5
    k_one, k_true, k_float = batch[:3]
    assert k_true["refused"]["reason"] == k_float["refused"]["reason"] == "invalid_request"
    assert k_one != k_true


def test_one_at_a_time_resolutions_check_each_request(big):
    """resolve() checks every request where it enters: a value equal to a good one but of
    another type (K True or 1.0 after K 1) is still refused."""
    good = Request("model-1", "eagle", 1, thinking="off", category="chat")
    _one(big, good)
    for bad in (Request("model-1", "eagle", True, thinking="off", category="chat"),
                Request("model-1", "eagle", 1.0, thinking="off", category="chat"),
                Request("model-1", "eagle", 65, thinking="off", category="chat")):
        assert _one(big, bad)["refused"]["reason"] == "invalid_request", bad
    assert _one(big, good) == resolve_many(big, [good])[0].to_json()


def test_large_batch_leaves_the_garbage_collector_as_it_found_it(big):
    import gc

    requests = generated_requests(GC_PAUSE_FROM)
    assert gc.isenabled()
    resolve_many(big, requests)
    assert gc.isenabled()
    gc.disable()
    try:
        resolve_many(big, requests)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_is_stored_matches_every_stored_key(big):
    """The no-profile refusal's "stored ... there" text, read per set in one query, says what a
    plain reading of every stored key says, for every scope a run can have."""
    from registry_db.resolve.stored import stored_variants

    with big.connect() as conn:
        keys = conn.execute(text(
            "SELECT p.model, p.speculative_method, s.name, p.num_spec_tokens, p.thinking, "
            "p.category FROM profiles p JOIN profile_sets s ON s.id = p.set_id")).all()
    pairs = sorted({(m, meth) for m, meth, *_ in keys}) + [("model-none", "eagle")]
    stored = stored_variants(big, pairs)
    together = stored_variants(big, pairs, per_set=False)
    scopes = [None, ("north",), ("south", "west"), ("centre", "east", "nowhere"), ()]
    for pair in pairs:
        for scope in scopes:
            rows = [r for r in keys if tuple(r[:2]) == pair and (scope is None or r[2] in scope)]
            expected = "" if not rows else (
                f"K {', '.join(str(k) for k in sorted({r[3] for r in rows}))}; "
                f"thinking {', '.join(sorted({r[4] for r in rows}))}; "
                f"categories {', '.join(sorted({r[5] for r in rows}))}")
            assert stored[pair].describe(scope) == expected, (pair, scope)
            if scope is None:  # runs in every set read the sets together: the same text
                assert together[pair].describe() == expected, pair
    assert stored[("model-none", "eagle")].describe() == ""
    assert together[("model-none", "eagle")].describe() == ""

