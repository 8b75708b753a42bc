"""``registry resolve`` and ``check`` on PostgreSQL both ways: psycopg alone and the engine.

The command line reads a PostgreSQL registry at the head through one read-only psycopg
connection (:mod:`registry_db.store.pg_read`); ``REGISTRY_NO_FAST_PATH`` sends it through
SQLAlchemy's engine. Every request below (answers, refusals, usage errors, as of a time, text
and JSON, batches, checks) and every way of failing to reach the registry (refused, no such
database or role, no registry, an old schema, a role without its grant) must give the same bytes
and exit code both ways, the reader's session must be read-only, and the fast path must really
have been taken where it applies.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from registry_db import store
from registry_db.errors import RegistryError
from registry_db.resolve.lookup import cursor
from registry_db.resolve.plan import Request, resolve_many
from registry_db.store import pg_read, sqlite_read
from tests.helpers import run_cli, seed_with_overlap, spy_on_open, unique_name

pytestmark = pytest.mark.only_backend("postgresql")

VLLM = Path(__file__).resolve().parents[1] / "data" / "sources" / "vllm"
DSV = ["--model", "deepseek-v4.1-flash", "--method", "dspark", "--k", "5"]
GLM = ["--model", "glm-5.3", "--method", "mtp", "--k", "3", "--thinking", "on"]
A = ["--model", "model-a", "--method", "mtp", "--k", "3", "--thinking", "on"]

CORPUS = [
    DSV + ["--thinking", "off", "--category", "coding"],
    DSV + ["--thinking", "off", "--category", "chat", "--fallback-category", "coding"],
    DSV + ["--category", "coding"],                              # no_thinking
    GLM + ["--category", "coding"],
    GLM + ["--category", "chat"],                                # no_match
    GLM + ["--category", "coding", "--set", "inferencex"],       # unknown_set, suggestions
    GLM + ["--category", "coding", "--set", "inferencex-golden-al"],
    GLM + ["--category", "coding", "--acceptance-length", "2"],
    A + ["--category", "cat0"],                                  # conflict: two sets hold it
    A + ["--category", "cat0", "--set", "second"],
    A + ["--category", "cat9", "--fallback-category", "cat1"],
    A + ["--category", "cat0", "--as-of", "2100-01-01"],
    A + ["--category", "cat0", "--set", "second", "--as-of", "2100-01-01T00:00:00+02:00"],
    GLM + ["--category", "coding", "--as-of", "2000-01-01"],     # no_match: nothing then
    GLM + ["--category", "coding", "--set", "inferencex-golden-al", "--as-of", "2000-01-01"],
    DSV + ["--thinking", "off", "--category", "chat", "--fallback-category", "coding",
           "--as-of", "2100-01-01Z"],
    DSV + ["--thinking", "off", "--category", "Coding!"],        # usage error, exit 2
]

BATCH = "\n".join([
    '{"model": "deepseek-v4.1-flash", "method": "dspark", "k": 5, "thinking": "off", '
    '"category": "coding"}',
    '{"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "chat"}',
    '{"model": "model-a", "method": "mtp", "k": 3, "thinking": "on", "category": "cat0"}',
    '{"model": "model-a", "method": "mtp", "k": 3, "thinking": "on", "category": "cat0", '
    '"sets": ["second"]}',
    '{"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "x", '
    '"pin": {"fallback_category": "coding"}}',
    "not json",
    '{"model": "m", "method": "x", "k": 3, "thinking": "on", "category": "c", '
    '"sets": ["nope"]}',
    '{"model": "model-a", "method": "mtp", "k": 3, "thinking": "on", "category": "cat0", '
    '"sets": ["second"], "as_of": "2100-01-01"}',
    '{"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "coding", '
    '"as_of": "2000-01-01"}',
    '{"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "coding", '
    '"sets": ["inferencex-golden-al"], "as_of": "2100-01-01"}',
]) + "\n"


@pytest.fixture
def pg_url(db_url, tmp_path):
    """A PostgreSQL registry holding the seed and two small sets that share a key."""
    return seed_with_overlap(db_url, tmp_path)


@pytest.fixture
def taken(monkeypatch):
    """What the PostgreSQL reader answered each time it was asked (True: a connection)."""
    return spy_on_open(monkeypatch, pg_read)


def _both(url, *args, input=None):
    fast = run_cli("-d", url, *args, input=input)
    slow = run_cli("-d", url, *args, input=input, env={sqlite_read.NO_FAST_PATH_ENV: "1"})
    return fast, slow


def _same(fast, slow):
    assert (fast.stdout, fast.stderr, fast.exit_code) == (slow.stdout, slow.stderr,
                                                          slow.exit_code)


@pytest.mark.parametrize("args", CORPUS + [a + ["--json"] for a in CORPUS],
                         ids=lambda a: " ".join(a)[-60:])
def test_same_bytes_and_exit_code_both_ways(backend, pg_url, taken, args):
    fast, slow = _both(pg_url, "resolve", *args)
    _same(fast, slow)
    # Asked once by each run: the fast run's answered, the engine run's declined (the switch);
    # bad flags stop before any database is opened.
    assert taken in ([True, False], [])
    if fast.exit_code in (0, 1):
        assert taken == [True, False]


def test_batch_same_bytes_both_ways(backend, pg_url, taken):
    fast, slow = _both(pg_url, "resolve", "--batch", "-", input=BATCH)
    _same(fast, slow)
    assert fast.stdout.count("\n") == 10 and taken == [True, False]


def test_check_same_bytes_both_ways(backend, db_url, tmp_path, taken):
    folder = tmp_path / "acc"
    folder.mkdir()
    (folder / "golden.yaml").write_text(
        "kind: AcceptanceProfileSet\nname: golden\nprofiles:\n"
        "  - {model: example-model, speculative_method: eagle3, num_spec_tokens: 3, "
        'thinking: "on", category: coding, acceptance_length: 1.5, method: measured,\n'
        "     counts: {drafts: 100, draft_tokens: 300, accepted_tokens: 50},\n"
        "     provenance: {source: https://example.org/run, hardware: b300, "
        "engine_image: 'vllm:1', sampling: {temperature: 0.0}}}\n", encoding="utf-8")
    assert run_cli("-d", db_url, "import", str(folder)).exit_code == 0
    terms = ["--model", "example-model", "--method", "eagle3", "--k", "3", "--thinking", "on"]
    for category in ("coding", "chat"):  # a check, and a refused resolution
        for json_ in ([], ["--json"]):
            taken.clear()
            fast, slow = _both(db_url, "check", str(VLLM / "drifted.prom"), *terms,
                               "--category", category, *json_)
            _same(fast, slow)
            assert fast.exit_code == (0 if category == "coding" else 1), fast.stderr
            assert taken == [True, False]


def test_the_library_answers_the_same_through_either(backend, pg_url):
    runs = [Request(model="deepseek-v4.1-flash", method="dspark", k=5, thinking="off",
                    category=c, as_of=at)
            for c in ("coding", "chat", "math") for at in (None, "2100-01-01", "2000-01-01")]
    runs += [Request(model="model-a", method="mtp", k=3, thinking="on", category="cat0",
                     sets=s, as_of=at)
             for s in (None, ("second",)) for at in (None, "2100-01-01")]
    engine = store.open_registry(pg_url, readonly=True)
    reader = pg_read.open_readonly(pg_url)
    assert reader is not None
    try:
        assert resolve_many(reader, runs) == resolve_many(engine, runs)
    finally:
        reader.close()
        engine.dispose()


def test_the_readers_session_is_read_only_and_a_snapshot_repeatable(backend, pg_url):
    reader = pg_read.open_readonly(pg_url)
    assert reader is not None
    try:
        with cursor(reader) as c:
            c.cur.execute("SHOW transaction_read_only")
            assert c.cur.fetchone() == ("on",)
            assert reader.conn.autocommit  # one statement, no BEGIN and ROLLBACK around it
        with cursor(reader, snapshot=True) as c:
            c.cur.execute("SELECT current_setting('transaction_isolation'), "
                          "current_setting('transaction_read_only')")
            assert c.cur.fetchone() == ("repeatable read", "on")
        assert reader.conn.autocommit and reader.conn.info.transaction_status == 0  # IDLE
        with pytest.raises(RegistryError, match="read-only"), cursor(reader) as c:
            c.cur.execute("DELETE FROM profile_sets")
        assert reader.conn.info.transaction_status == 0
    finally:
        reader.close()


def _swapped(url: str, **parts) -> str:
    return make_url(url).set(**parts).render_as_string(hide_password=False)


@pytest.fixture
def no_grant_role(pg_url):
    """A login role of this test's own with no grant on the registry's tables."""
    name = unique_name("registry_nogrant")
    engine = store.make_engine(pg_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f'CREATE ROLE "{name}" LOGIN'))
            conn.execute(text(f'GRANT USAGE ON SCHEMA public TO "{name}"'))
        yield name
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP OWNED BY "{name}"'))
            conn.execute(text(f'DROP ROLE IF EXISTS "{name}"'))
        engine.dispose()


def test_failing_to_reach_the_registry_reads_the_same_both_ways(backend, pg_url, no_grant_role,
                                                                taken):
    """Refused, no such database, no such role, a password in the URL, a role without its
    grant, libpq refusing the URL's options: one line each, the same words as the engine's,
    the password never shown."""
    missing_db = _swapped(pg_url, database=unique_name("registry_missing"))
    urls = {
        "refused": _swapped(pg_url, port=1, password="s3cret-pw"),
        "no database": missing_db,
        "no role": _swapped(pg_url, username=unique_name("nobody")),
        "no grant": _swapped(pg_url, username=no_grant_role),
        "no such option": f"{pg_url}?badparam=1",
        "a bad sslmode": f"{pg_url}?sslmode=bogus",
    }
    for what, url in urls.items():
        taken.clear()
        fast, slow = _both(url, "resolve", *GLM, "--category", "coding")
        _same(fast, slow)
        assert fast.exit_code == 3 and fast.stderr.count("\n") == 1, (what, fast.stderr)
        assert "s3cret-pw" not in fast.stderr
        # The reader itself said it (it raised), and the engine run was asked and declined.
        assert taken == [False], what
    assert "***" in run_cli("-d", urls["refused"], "resolve", *GLM, "--category",
                            "coding").stderr
    assert "permission denied" in run_cli("-d", urls["no grant"], "resolve", *GLM).stderr


def test_no_registry_or_an_old_one_is_left_to_the_engine(backend, empty_url, taken):
    fast, slow = _both(empty_url, "resolve", *GLM, "--category", "coding")
    _same(fast, slow)
    assert fast.exit_code == 3 and "no registry" in fast.stderr and taken == [False, False]
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine, "0001")
    finally:
        engine.dispose()
    taken.clear()
    fast, slow = _both(empty_url, "resolve", *GLM, "--category", "coding")
    _same(fast, slow)
    assert "registry db upgrade" in fast.stderr and taken == [False, False]


def _modules_after(code: str) -> set[str]:
    script = code + "\nimport sys; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return set(out.split())


def test_a_postgresql_resolution_does_not_load_sqlalchemy(backend, pg_url, tmp_path):
    (tmp_path / "b.jsonl").write_text(BATCH)
    for args in (GLM + ["--category", "coding", "--json"], GLM + ["--category", "chat"],
                 ["--batch", str(tmp_path / "b.jsonl")]):
        code = ("from registry_db.cli import main\n"
                f"try:\n    main(['-d', {pg_url!r}, 'resolve'] + {args!r}, "
                "prog_name='registry')\n"
                "except SystemExit as e:\n    assert e.code in (0, 1, None), e.code\n")
        assert "sqlalchemy" not in _modules_after(code), args
        switched_off = "import os; os.environ['REGISTRY_NO_FAST_PATH'] = '1'\n" + code
        assert "sqlalchemy" in _modules_after(switched_off), args


def test_ctrl_c_cancels_the_readers_statement_on_the_server(backend, pg_url):
    """The reader's connection is psycopg's own, as the engine's was: Ctrl-C while a statement
    runs cancels it on the server before the client ends (a statement of ten minutes here)."""
    import signal

    tag = unique_name("registry_cancel")
    url = f"{pg_url}?application_name={tag}"
    script = ("import sys\nfrom registry_db.resolve.lookup import cursor\n"
              "from registry_db.store import pg_read\n"
              f"reader = pg_read.open_readonly({url!r})\nassert reader is not None\n"
              "try:\n    with cursor(reader) as c:\n"
              "        c.cur.execute('SELECT pg_sleep(600)')\n"
              "except KeyboardInterrupt:\n    sys.exit(130)\n")
    watcher = store.make_engine(pg_url)

    def running() -> list[str]:
        with watcher.connect() as conn:
            return list(conn.execute(text(
                "SELECT query FROM pg_stat_activity WHERE application_name = :t "
                "AND state = 'active'"), {"t": tag}).scalars())

    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(1200):  # the server's own state says when the statement runs
            if running() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert running() == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        watcher.dispose()
