"""Imports in separate processes on both backends: killed mid-write, and racing each other.

A process killed inside its write transaction leaves no partial set; four processes importing
overlapping sets ten times each all succeed, and the result is one that some serial order of
those imports produces. These spawn real ``registry import`` processes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.store import write as importer
from registry_db.store.urls import sqlite_path
from tests.conftest import ROOT
from tests.helpers import broken_foreign_keys, orphan_provenances, write_set

pytestmark = pytest.mark.slow


_ENV = {**os.environ, "REGISTRY_LOCK_TIMEOUT": "60"}

#: One process running several ``registry`` command lines in turn (Python starts once), each
#: followed by a line "@@exit <code>" so that the outputs can be told apart.
_MANY = """
import json, sys
from registry_db.cli.group import main
for args in json.loads(sys.argv[2]):
    try:
        main(["-d", sys.argv[1], *args], prog_name="registry", standalone_mode=False)
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    print("@@exit", code, flush=True)
"""


def registry(url: str, *args: str) -> subprocess.Popen:
    """Start ``registry -d URL ARGS`` as its own process."""
    return subprocess.Popen([sys.executable, "-m", "registry_db", "-d", url, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=_ENV)


def registry_runs(url: str, runs: list[list[str]]) -> list[tuple[int, str]]:
    """Run several ``registry`` command lines in ONE new process, one after another.

    Returns ``(exit code, stdout)`` per command line; any stderr with a traceback fails.
    """
    proc = subprocess.run([sys.executable, "-c", _MANY, url, json.dumps(runs)],
                          capture_output=True, text=True, cwd=ROOT, env=_ENV, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    out, buffer = [], []
    for line in proc.stdout.splitlines(keepends=True):
        if line.startswith("@@exit "):
            out.append((int(line.split()[1]), "".join(buffer)))
            buffer = []
        else:
            buffer.append(line)
    return out


def concurrent_runs(url: str, per_worker: list[list[list[str]]]) -> list[tuple[int, str]]:
    """Each worker's command lines in a process of its own, all workers at once (threads
    waiting on the processes); every ``(exit code, stdout)``, and no worker may raise."""
    results: list[tuple[int, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(runs: list[list[str]]) -> None:
        try:
            done = registry_runs(url, runs)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread below
            errors.append(exc)
            return
        with lock:
            results.extend(done)

    threads = [threading.Thread(target=worker, args=(runs,)) for runs in per_worker]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return results


def kill_while_writing(url: str, proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` at a random moment while it holds the writers' lock; fails when it
    finished before it could be killed mid-write."""
    killed_while_writing = False
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if writer_holds_lock(url):
            time.sleep(random.uniform(0, 0.05))
            # Still writing? A write can end during the pause: its commit is then whole, and
            # killing the process as it exits would test nothing (the CI once saw that).
            killed_while_writing = proc.poll() is None and writer_holds_lock(url)
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    proc.wait(timeout=60)
    proc.stdout.close()
    proc.stderr.close()
    assert killed_while_writing, "the import finished before it could be killed mid-write"


def writer_holds_lock(url: str) -> bool:
    """True while some process is inside a registry write transaction."""
    path = sqlite_path(url)
    if path:
        probe = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return True
            raise
        finally:
            probe.close()
    engine = store.make_engine(url)
    try:
        with engine.connect() as conn:
            # pg_advisory_xact_lock(bigint) shows as classid = high half, objid = low half.
            return bool(conn.execute(text(
                "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid = :hi AND objid = :lo AND objsubid = 1"),
                {"hi": store.WRITE_LOCK_KEY >> 32,
                 "lo": store.WRITE_LOCK_KEY & 0xFFFFFFFF}).scalar())
    finally:
        engine.dispose()


def assert_sets_complete(engine, expected: dict[str, int]) -> None:
    """Every stored set has exactly its file's profiles; nothing dangles."""
    for s in store.list_sets(engine):
        assert s.profiles == expected[s.name], s
        assert store.load_set(engine, s.name).content_hash() == s.content_hash
    assert not broken_foreign_keys(engine)
    assert orphan_provenances(engine) == 0


def test_killed_import_leaves_no_partial_set(db_url, tmp_path):
    folder = tmp_path / "big"
    expected = {}
    for i in range(20):
        write_set(folder, f"big-{i:02d}", 500, model=f"m{i}", source=f"https://e/{i}.yaml")
        expected[f"big-{i:02d}"] = 500
    kill_while_writing(db_url, registry(db_url, "import", str(folder)))

    engine = store.open_registry(db_url)
    try:
        assert_sets_complete(engine, expected)
        # The database is usable afterwards: the same import completes.
        again = registry(db_url, "import", "--json", str(folder))
        out, err = again.communicate(timeout=120)
        assert again.returncode == 0, err.decode()
        assert len(json.loads(out)["sets"]) == 20
        assert_sets_complete(engine, expected)
        assert len(store.list_sets(engine)) == 20
    finally:
        engine.dispose()


def test_four_processes_ten_imports_each(db_url, tmp_path):
    # Two versions of two shared sets, crossed: version 1 of the folder holds a@v1 with b@v2,
    # version 2 holds a@v2 with b@v1. Any serial order leaves a and b from one folder.
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    write_set(v1, "shared-a", 30, model="a", al=2.5, source="https://e/a1.yaml")
    write_set(v1, "shared-b", 20, model="b", al=2.0, source="https://e/b2.yaml")
    write_set(v2, "shared-a", 24, model="a", al=2.75, source="https://e/a2.yaml")
    write_set(v2, "shared-b", 26, model="b", al=3.0, source="https://e/b1.yaml",
              first_category=3)
    own = [write_set(tmp_path / "own", f"worker-{w}", 10, model="a",  # overlaps shared-a
                     source="https://e/a1.yaml") for w in range(4)]
    versions = {}
    for folder in (v1, v2):
        sets, _ = importer.load_paths([folder])
        for s in sets:
            versions.setdefault(s.name, {})[s.content_hash()] = (folder.name, len(s.profiles))
    for _w, path in enumerate(own):
        [s], _ = importer.load_paths([path])
        versions[s.name] = {s.content_hash(): ("own", 10)}

    results = concurrent_runs(db_url, [
        [["import", "--json", str((v1, v2)[(w + j) % 2]), str(own[w])] for j in range(10)]
        for w in range(4)])
    assert [rc for rc, _ in results] == [0] * 40
    added = Counter(s["name"] for _, out in results for s in json.loads(out)["sets"]
                    if s["status"] == "added")
    assert added == Counter({name: 1 for name in versions}), added

    engine = store.open_registry(db_url)
    try:
        stored = {s.name: s for s in store.list_sets(engine)}
        assert sorted(stored) == sorted(versions)
        origin = {}
        for name, s in stored.items():
            assert s.content_hash in versions[name], name
            origin[name], count = versions[name][s.content_hash]
            assert s.profiles == count
        assert {origin["shared-a"], origin["shared-b"]} in ({"v1"}, {"v2"}), origin
        assert_sets_complete(engine, {n: s.profiles for n, s in stored.items()})
        with engine.connect() as conn:
            names = conn.execute(text("SELECT name FROM profile_sets")).scalars().all()
            hashes = conn.execute(text("SELECT content_hash FROM provenances")).scalars().all()
        assert len(names) == len(set(names)) and len(hashes) == len(set(hashes))
    finally:
        engine.dispose()


def test_readers_never_see_half_a_set(db_url, tmp_path):
    """While one process replaces a set again and again, a reader sees one version or the
    other, never a mix (one transaction per import)."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_set(a, "flip", 200, model="m", al=2.25)
    write_set(b, "flip", 150, model="m", al=3.5)
    assert registry(db_url, "import", str(a)).wait(timeout=120) == 0
    stop = threading.Event()

    def flipper() -> None:
        try:
            codes = [rc for rc, _ in registry_runs(
                db_url, [["import", str((b, a)[j % 2])] for j in range(8)])]
            assert codes == [0] * 8
        finally:
            stop.set()

    thread = threading.Thread(target=flipper)
    thread.start()
    engine = store.open_registry(db_url)
    seen = set()
    try:
        while not stop.is_set():
            with engine.connect() as conn, conn.begin():
                rows = conn.execute(text(
                    "SELECT p.acceptance_length FROM profiles p JOIN profile_sets s "
                    "ON s.id = p.set_id WHERE s.name = 'flip'")).scalars().all()
            seen.add((len(rows), frozenset(rows)))
            time.sleep(0.01)
    finally:
        thread.join()
        engine.dispose()
    assert seen <= {(200, frozenset({2.25})), (150, frozenset({3.5}))}, seen
