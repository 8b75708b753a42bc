"""``registry resolve`` on SQLite both ways: the read-only ``sqlite3`` path and the engine path.

The command line reads a plain SQLite registry at the head without SQLAlchemy
(:mod:`registry_db.store.sqlite_read`); ``REGISTRY_NO_FAST_PATH`` sends it through the engine.
Every request of the corpus below (answers, refusals, usage errors, files, text and JSON, batches)
must give the same bytes on stdout and stderr and the same exit code both ways, and the fast
path must really have been taken where it applies.
"""

from __future__ import annotations

import pytest

from registry_db import store
from registry_db.store import sqlite_read
from tests.helpers import DATA, run_cli, seed_with_overlap, spy_on_open

FILES = DATA / "resolve"
DSV = ["--model", "deepseek-v4.1-flash", "--method", "dspark", "--k", "5"]
GLM = ["--model", "glm-5.3", "--method", "mtp", "--k", "3", "--thinking", "on"]
A = ["--model", "model-a", "--method", "mtp", "--k", "3", "--thinking", "on"]

CORPUS = [
    DSV + ["--thinking", "off", "--category", "coding"],
    DSV + ["--thinking", "off", "--category", "coding", "--hardware", "mi355x"],
    DSV + ["--thinking", "off", "--category", "chat", "--fallback-category", "coding"],
    DSV + ["--category", "coding"],                              # no_thinking
    DSV + ["--thinking", "off"],                                 # no_category
    GLM + ["--category", "coding"],
    GLM + ["--category", "chat"],                                # no_match
    GLM + ["--category", "chat", "--fallback-category", "math"],  # fallback_no_match
    GLM + ["--category", "coding", "--set", "inferencex"],       # unknown_set, suggestions
    GLM + ["--category", "coding", "--profiles", "nope"],        # unknown_set, pin
    GLM + ["--category", "coding", "--set", "inferencex-golden-al"],
    GLM + ["--category", "coding", "--acceptance-length", "2"],
    GLM + ["--category", "coding", "--acceptance-length", "2", "--acceptance-rate", "0.5"],
    GLM + ["--category", "coding", "--acceptance-length", "9"],  # invalid_value
    GLM + ["--category", "coding", "--per-position-rates", "0.9,0.8,0.1"],
    A + ["--category", "cat0"],                                  # conflict: two sets hold it
    A + ["--category", "cat0", "--set", "second"],
    A + ["--category", "cat9", "--fallback-category", "cat1"],
    DSV + ["--workload", str(FILES / "workload-coding-off.yaml")],
    DSV + ["--workload", str(FILES / "workload-with-value.yaml")],
    DSV + ["--workload", str(FILES / "workload-typo.yaml")],
    DSV + ["--workload", str(FILES / "workload-broken.yaml")],
    DSV + ["--thinking", "off", "--category", "coding", "--scenario",
           str(FILES / "scenario-fallback.yaml")],
    DSV + ["--thinking", "off", "--category", "coding", "--scenario",
           str(FILES / "scenario-unknown-set.yaml")],
    DSV + ["--thinking", "off", "--category", "Coding!"],        # usage error, exit 2
    # As of a time: the registry then (2000: empty, 2100: as it stands), from the history.
    A + ["--category", "cat0", "--as-of", "2100-01-01"],         # conflict then too
    A + ["--category", "cat0", "--set", "second", "--as-of", "2100-01-01T00:00:00+02:00"],
    GLM + ["--category", "coding", "--as-of", "2000-01-01"],     # no_match: nothing then
    GLM + ["--category", "coding", "--set", "inferencex-golden-al", "--as-of", "2000-01-01"],
    DSV + ["--thinking", "off", "--category", "chat", "--fallback-category", "coding",
           "--as-of", "2100-01-01Z"],
    GLM + ["--category", "coding", "--as-of", "2026-13-01"],     # usage error, exit 2
    ["--method", "m", "--k", "3"],                               # usage error, exit 2
]


@pytest.fixture
def sqlite_url(shared_sqlite_url, tmp_path_factory):
    """A SQLite registry holding the seed and two small sets that share a key, built once a
    session: the tests only read it."""
    return shared_sqlite_url("seed-overlap", lambda engine: seed_with_overlap(
        engine.url.render_as_string(hide_password=False), tmp_path_factory.mktemp("overlap")))


@pytest.fixture
def taken(monkeypatch):
    """How many times the fast path answered (a connection was opened)."""
    return spy_on_open(monkeypatch, sqlite_read)


def _both(url, args, input=None):
    fast = run_cli("-d", url, "resolve", *args, input=input)
    slow = run_cli("-d", url, "resolve", *args, input=input,
                   env={sqlite_read.NO_FAST_PATH_ENV: "1"})
    return fast, slow


@pytest.mark.parametrize("args", CORPUS + [a + ["--json"] for a in CORPUS],
                         ids=lambda a: " ".join(a)[-60:])
def test_same_bytes_and_exit_code_both_ways(sqlite_url, taken, args):
    fast, slow = _both(sqlite_url, args)
    assert (fast.stdout, fast.stderr, fast.exit_code) == (slow.stdout, slow.stderr,
                                                          slow.exit_code)
    # Asked once by each run: the fast run's answered, the engine run's declined (the switch);
    # bad flags or files stop before any database is opened.
    assert taken in ([True, False], [])
    if fast.exit_code == 0:
        assert taken == [True, False]


def test_batch_same_bytes_both_ways(sqlite_url, taken):
    lines = "\n".join([
        '{"model": "deepseek-v4.1-flash", "method": "dspark", "k": 5, "thinking": "off", '
        '"category": "coding"}',
        '{"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "chat"}',
        '{"model": "model-a", "method": "mtp", "k": 3, "thinking": "on", "category": "cat0"}',
        '{"model": "model-a", "method": "mtp", "k": 3, "thinking": "on", "category": "cat0", '
        '"sets": ["second"]}',
        '{"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "x", '
        '"pin": {"fallback_category": "coding"}}',
        '{"model": "glm-5.3", "method": "mtp", "k": "3"}',
        "not json",
        '{"model": "m", "method": "x", "k": 3, "thinking": "on", "category": "c", '
        '"sets": ["nope"]}',
        '{"model": "model-a", "method": "mtp", "k": 3, "thinking": "on", "category": "cat0", '
        '"sets": ["second"], "as_of": "2100-01-01"}',
        '{"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "coding", '
        '"as_of": "2000-01-01"}',
        '{"model": "glm-5.3", "method": "mtp", "k": 3, "as_of": "yesterday"}',
    ]) + "\n"
    fast, slow = _both(sqlite_url, ["--batch", "-"], input=lines)
    assert (fast.stdout, fast.stderr, fast.exit_code) == (slow.stdout, slow.stderr,
                                                          slow.exit_code)
    assert fast.stdout.count("\n") == 11 and True in taken


def test_fast_path_declines_what_it_cannot_read(tmp_path, taken):
    """A missing file, an empty or old database, PostgreSQL URLs: the engine path answers."""
    assert sqlite_read.open_readonly(f"sqlite:///{tmp_path / 'missing.db'}") is None
    (tmp_path / "empty.db").write_bytes(b"")
    assert sqlite_read.open_readonly(f"sqlite:///{tmp_path / 'empty.db'}") is None
    assert sqlite_read.open_readonly("postgresql+psycopg://u@h/db") is None
    assert sqlite_read.open_readonly("sqlite://") is None
    old = f"sqlite:///{tmp_path / 'old.db'}"
    engine = store.make_engine(old)
    try:
        store.upgrade(engine, "0001")
    finally:
        engine.dispose()
    assert sqlite_read.open_readonly(old) is None
    fast, slow = _both(old, GLM + ["--category", "coding"])
    assert (fast.stdout, fast.stderr, fast.exit_code) == (slow.stdout, slow.stderr, 3)
    assert "registry db upgrade" in fast.stderr


def test_no_fast_path_env_sends_it_through_the_engine(sqlite_url, monkeypatch):
    monkeypatch.setenv(sqlite_read.NO_FAST_PATH_ENV, "1")
    assert sqlite_read.open_readonly(sqlite_url) is None
    monkeypatch.delenv(sqlite_read.NO_FAST_PATH_ENV)
    conn = sqlite_read.open_readonly(sqlite_url)
    assert conn is not None
    conn.close()
