"""The resolver's one-run statement with named parameters (``named_one_statement``), as a reader
of the SQLite file runs it (``sqlite3`` with a mapping, as a Datasette canned query does): the
same rows the resolver's own lookup reads, for runs in every set and in some, with a fallback
and without."""

from __future__ import annotations

import sqlite3

import pytest

from registry_db import store
from registry_db.importing import write as importer
from registry_db.model import Profile, ProfileSet, Provenance, Sampling
from registry_db.resolve.lookup import Lookup, cursor, one_parameters, one_statement
from registry_db.resolve.statements import named_one_statement

PV = Provenance("https://example.org/r", hardware="b300", engine_image="vllm:1",
                sampling=Sampling(1.0))


def _set(name: str, *keys: tuple[str, float]) -> ProfileSet:
    return ProfileSet(name, ("test data",), tuple(
        Profile("m", "eagle", 3, "off", category, al, "measured", provenance=PV,
                per_position_rates=(0.9, 0.5, 0.1) if al == 2.5 else None)
        for category, al in keys), file=f"{name}.yaml")


@pytest.fixture
def path(tmp_path):
    file = tmp_path / "registry.db"
    engine = store.open_registry(f"sqlite:///{file}")
    try:
        importer.import_sets(engine, [_set("north", ("coding", 2.5), ("chat", 2.0)),
                                      _set("south", ("coding", 2.2)), _set("east", ("math", 1.5))])
    finally:
        engine.dispose()
    return file


LOOKUPS = [Lookup("m", "eagle", 3, "off", category, fallback, scope)
           for category in ("coding", "chat", "math", "law", None)
           for fallback in (None, "coding", "math")
           for scope in (None, ("north",), ("east", "north", "south"))
           if category is not None or fallback is not None]


@pytest.mark.parametrize("lookup", LOOKUPS, ids=repr)
def test_the_named_statement_reads_the_rows_the_resolver_reads(path, lookup):
    engine = store.open_registry(f"sqlite:///{path}")
    try:
        with cursor(engine) as c:
            statement, order = one_statement("sqlite", len(lookup.scope or ()))
            c.cur.execute(statement, one_parameters(lookup, order))
            theirs = c.cur.fetchall()
    finally:
        engine.dispose()
    named = {"model": lookup.model, "method": lookup.method, "k": lookup.k,
             "thinking": lookup.thinking, "category": lookup.category,
             "fallback": lookup.fallback,
             **{f"set_{i}": name for i, name in enumerate(lookup.scope or (), 1)}}
    with sqlite3.connect(path) as conn:
        ours = conn.execute(named_one_statement("sqlite", len(lookup.scope or ())),
                            named).fetchall()
    assert sorted(ours, key=repr) == sorted(theirs, key=repr)


def test_a_blank_fallback_is_no_fallback(path):
    """Datasette passes a parameter left empty as ''; no category is empty."""
    sql = named_one_statement("sqlite", 0)
    with sqlite3.connect(path) as conn:
        blank, null = (conn.execute(sql, {"model": "m", "method": "eagle", "k": 3,
                                          "thinking": "off", "category": "law",
                                          "fallback": fallback}).fetchall()
                       for fallback in ("", None))
        assert blank == null == []
        # coding is held by two sets (a conflict: both rows, one per stored rate or profile)
        coding = conn.execute(sql, {"model": "m", "method": "eagle", "k": 3, "thinking": "off",
                                    "category": "coding", "fallback": ""}).fetchall()
        assert sorted({row[4] for row in coding}) == ["north", "south"]
        fallback = conn.execute(sql, {"model": "m", "method": "eagle", "k": 3,
                                      "thinking": "off", "category": "", "fallback": "math"})
        assert [(row[1], row[4]) for row in fallback] == [("math", "east")]
