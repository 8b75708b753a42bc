"""``registry_db.Registry``, the entry object for programs, on SQLite and PostgreSQL: it answers
as the library's functions and the command line do, and closes its engine."""

from __future__ import annotations

import json

import pytest

from registry_db import (
    Counts,
    DatabaseError,
    Registry,
    Request,
    ResolutionRefused,
    check_run,
    list_sets,
    resolve,
    resolve_many,
)
from registry_db.history import read as history_module
from registry_db.resolve.batch import answer_lines
from registry_db.store import read as read_module
from tests.helpers import run_cli

KEY = {"model": "deepseek-v4.1-flash", "method": "dspark", "k": 5, "thinking": "off",
       "category": "coding"}




def test_it_answers_as_the_library_and_the_command_line(own_seeded, engine):
    with Registry(own_seeded) as reg:
        got = reg.resolve(**KEY, hardware="h200")
        assert got == resolve(engine, Request(**KEY, hardware="h200"))
        assert reg.resolve(Request(**KEY)) == resolve(engine, Request(**KEY))
        cli = json.loads(run_cli("-d", own_seeded, "resolve", "--model", KEY["model"], "--method",
                                 "dspark", "--k", "5", "--thinking", "off", "--category",
                                 "coding", "--json").stdout)
        assert reg.resolve(**KEY).to_json() == cli
        requests = [Request(**KEY), Request(**{**KEY, "k": 4})]
        assert reg.resolve_many(requests) == resolve_many(engine, requests)
        with pytest.raises(ResolutionRefused) as refused:
            reg.resolve(**{**KEY, "k": 4})
        assert refused.value.reason == "no_match"


def test_batch_is_the_batch(own_seeded, engine):
    lines = [json.dumps({"id": "a", **KEY}), "", "{bad", json.dumps(KEY)]
    with Registry(own_seeded) as reg:
        got = list(reg.batch(lines))
    assert got == list(answer_lines(engine, lines))
    assert [(a.id, a.line) for a in got] == [("a", 1), (None, 3), (None, 4)]


def test_reads_and_checks_as_the_library(own_seeded, engine):
    counts = Counts(drafts=1000, draft_tokens=5000, accepted_tokens=3070)
    with Registry(own_seeded) as reg:
        assert reg.profiles(model="glm-5.3") == read_module.list_profiles(engine,
                                                                           model="glm-5.3")
        assert reg.sets() == list_sets(engine)
        assert reg.history() == history_module.history(engine)
        assert reg.history("inferencex-golden-al")[0].revision == 1
        later = reg.history()[0].imported_at
        assert reg.profiles(as_of=later) == reg.profiles()
        assert reg.check(Request(**KEY), counts) == check_run(engine, Request(**KEY), counts)
        assert reg.check(Request(**KEY), counts).verdict == "consistent"


def test_the_with_block_closes_the_engine(own_seeded):
    with Registry(own_seeded) as reg:
        reg.resolve(**KEY)
        assert reg.engine.pool.checkedin() == 1  # the connection, back in the pool
    assert reg.engine.pool.checkedin() == 0


def test_a_request_and_its_fields_are_not_both_taken(own_seeded):
    with Registry(own_seeded) as reg, pytest.raises(TypeError, match="not both"):
        reg.resolve(Request(**KEY), model="x")


def test_a_database_that_is_no_registry_is_refused(empty_url, tmp_path):
    with pytest.raises(DatabaseError, match="no registry"):
        Registry(empty_url)
    with pytest.raises(DatabaseError, match="no registry at"):
        Registry(str(tmp_path / "missing.db"))
    assert not (tmp_path / "missing.db").exists()
