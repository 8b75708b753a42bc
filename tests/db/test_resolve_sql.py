"""The resolver's decision is made in SQL, on both backends: the lookup statement restricts to
the sets in scope, prefers the workload's category over the fallback and counts the sets that
hold the winner; and docs/schema.md's "what would the resolver answer?" query gives what the
library gives on a generated registry with conflicts and fallbacks."""

from __future__ import annotations

import random
import re

import pytest
from sqlalchemy import text

from registry_db.errors import ResolutionRefused
from registry_db.importing import write as importer
from registry_db.model import Pin
from registry_db.resolve.lookup import (
    Lookup,
    cursor,
    lookup_many,
    lookup_one,
    one_parameters,
    one_statement,
)
from registry_db.resolve.plan import Request, resolve
from tests.helpers import CATEGORIES, ROOT, build_sets, generated_sets


@pytest.fixture
def reg(shared_registry):
    """An engine on a registry holding :data:`SETS`, shared by the tests that only read it."""
    return shared_registry("sets", build_sets)


def _decide(engine, *lookups: Lookup) -> tuple[list, dict]:
    """Each lookup alone (one statement each) and all of them in one batch statement."""
    with cursor(engine) as c:
        alone = [lookup_one(c, lk) for lk in lookups]
    with cursor(engine, snapshot=True) as c:
        together = lookup_many(c, lookups)
    return alone, together


def _summary(winner) -> tuple | None:
    if winner is None:
        return None
    return (winner.category, winner.set_count, [c.profile_set for c in winner.candidates])


@pytest.mark.parametrize("lookup, expected", [
    # duo/coding is held by alpha, beta and gamma: the statement counts three sets...
    (Lookup("duo", "eagle", 3, "off", "coding", None), ("coding", 3,
                                                        ["alpha", "beta", "gamma"])),
    # ... and only the sets in scope.
    (Lookup("duo", "eagle", 3, "off", "coding", None, ("beta", "gamma")),
     ("coding", 2, ["beta", "gamma"])),
    (Lookup("duo", "eagle", 3, "off", "coding", None, ("gamma",)), ("coding", 1, ["gamma"])),
    # The workload's category wins over the fallback when it has a curve in scope...
    (Lookup("solo", "eagle", 3, "off", "math", "coding", ("beta",)), ("math", 1, ["beta"])),
    # ... and the fallback stands in when it has none in scope (alpha has no solo/math).
    (Lookup("solo", "eagle", 3, "off", "math", "coding", ("alpha",)),
     ("coding", 1, ["alpha"])),
    # No workload category: the fallback is all there is.
    (Lookup("solo", "eagle", 3, "off", None, "chat"), ("chat", 1, ["alpha"])),
    # A conflict in the fallback is counted just the same.
    (Lookup("duo", "eagle", 3, "off", "poetry", "chat"), ("chat", 2, ["alpha", "beta"])),
    # Nothing in scope: no winner.
    (Lookup("solo", "eagle", 3, "off", "math", None, ("gamma",)), None),
    (Lookup("solo", "eagle", 3, "off", "poetry", "law"), None),
])
def test_the_statement_decides_scope_preference_and_set_count(reg, lookup, expected):
    alone, together = _decide(reg, lookup)
    assert _summary(alone[0]) == expected
    assert _summary(together.get(lookup)) == expected


def test_the_statement_returns_only_the_winning_keys_rows(reg):
    """No row of the losing category or of a set out of scope reaches Python."""
    lookup = Lookup("solo", "eagle", 3, "off", "chat", "coding", ("alpha", "beta"))
    with cursor(reg) as c:
        statement, order = one_statement(c.dialect, 2)
        c.cur.execute(statement, one_parameters(lookup, order))
        rows = c.cur.fetchall()
    # alpha holds solo/chat (with three stored rates: three rows) and both hold solo/coding.
    assert [(r[1], r[4]) for r in rows] == [("chat", "alpha")] * 3
    assert [r[2] for r in rows if r[10] == 1] == [1]  # the set count, on the profile's first row
    assert sorted(r[10] for r in rows) == [1, 2, 3]


def test_one_batch_statement_decides_many_lookups_at_once(reg):
    lookups = [Lookup("duo", "eagle", 3, "off", "coding", None, scope)
               for scope in (None, ("alpha",), ("alpha", "beta"))] + [
        Lookup("solo", "eagle", 3, "off", c, f, s) for c in ("math", None) for f in ("coding", None)
        for s in (None, ("beta",)) if c or f]
    alone, together = _decide(reg, *lookups)
    assert [_summary(w) for w in alone] == [_summary(together.get(lk)) for lk in lookups]
    assert {w.set_count for w in together.values()} == {1, 2, 3}


# --- docs/schema.md's query against the library ----------------------------------------------

def _documented_query() -> str:
    page = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- example: resolver-answer [^>]*-->\n```sql\n(.*?)```", page, re.S)
    assert m, "docs/schema.md lost the resolver-answer query"
    return m.group(1)


def _cases(n: int, seed: int = 5):
    rng = random.Random(seed)
    models = [f"model-{i}" for i in range(30)]
    for _ in range(n):
        category = rng.choice(CATEGORIES + (None, "unseen"))
        fallback = rng.choice(CATEGORIES + (None, None, "unseen"))
        if category is None and fallback is None:
            fallback = rng.choice(CATEGORIES)
        yield (rng.choice(models), rng.choice(("eagle", "mtp")), rng.randint(1, 5),
               rng.choice(("on", "off")), category, fallback)


def test_the_documented_query_answers_what_the_library_does(engine):
    importer.import_sets(engine, generated_sets())
    sql = text(_documented_query())
    seen = set()
    with engine.connect() as conn:
        for model, method, k, thinking, category, fallback in _cases(400):
            rows = conn.execute(sql, {
                "model": model, "method": method, "k": k, "thinking": thinking,
                # As the page says: no category binds '', no fallback binds the category.
                "category": "" if category is None else category,
                "fallback_category": category if fallback is None else fallback}).all()
            pin = None if fallback is None else Pin(fallback_category=fallback)
            try:
                answer = resolve(engine, Request(model, method, k, thinking, category, pin=pin))
            except ResolutionRefused as refusal:
                seen.add(refusal.reason)
                if refusal.reason == "conflict":
                    assert {r.answer for r in rows} == {"conflict"}
                    names = ", ".join(r.profile_set for r in rows)
                    assert f"{len(rows)} registry sets hold" in refusal.message
                    assert f": {names}; name one" in refusal.message
                    assert {r.set_count for r in rows} == {len(rows)}
                    assert len({r.fallback_used for r in rows}) == 1
                else:
                    assert refusal.reason in ("no_match", "fallback_no_match")
                    assert rows == []
                continue
            seen.add("fallback" if answer.fallback else "resolved")
            assert [tuple(r) for r in rows] == [(
                "resolved", answer.profile_set, answer.profile, answer.acceptance_length,
                answer.fallback.category if answer.fallback else None, 1)]
    # The generated registry really exercises every outcome.
    assert seen == {"resolved", "fallback", "conflict", "no_match", "fallback_no_match"}
