"""``registry serve`` as a person uses it: a real server on a free local port, its pages, its
JSON API, each canned query with parameters, the pictures, and no way to write."""

from __future__ import annotations

import hashlib
import html
import json
import signal
import sqlite3
import urllib.error
import urllib.parse
import urllib.request

import pytest

from registry_db.analyze import web
from registry_db.store import catalog
from tests.helpers import Server, free_port


def _get(server, path: str, **params: str) -> tuple[int, str, bytes]:
    url = f"{server.url}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.headers.get_content_type(), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get_content_type(), exc.read()


def _json(server, path: str, **params: str):
    status, kind, body = _get(server, path, **params)
    assert status == 200 and kind == "application/json", (status, body[:500])
    return json.loads(body)


def _sql(server, sql: str, params: dict | None = None) -> list[dict]:
    """The same question asked of the file directly (read-only), for comparison."""
    conn = sqlite3.connect(f"file:{server.path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params or {})]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def db(server) -> str:
    """The database's name on the server: the file's stem."""
    return server.path.stem


def test_it_listens_on_the_loopback_and_says_where(server):
    log = server.log.read_text()
    assert f"read-only at http://127.0.0.1:{server.port}/" in log
    assert f"Uvicorn running on http://127.0.0.1:{server.port}" in log


def test_the_home_page_names_the_registry_its_views_and_questions(server, db):
    status, kind, body = _get(server, "/")
    page = html.unescape(body.decode())
    assert (status, kind) == (200, "text/html")
    assert web.TITLE in page and web.DESCRIPTION in page
    status, _, body = _get(server, f"/{db}")
    page = html.unescape(body.decode())
    assert status == 200
    for name in catalog.VIEWS:
        assert name in page
    for query in web.canned_queries():
        assert query.title in page
    # The tables are there, one click away: the page leads with the analysts' surface.
    assert f"{len(catalog.TABLES)} hidden tables" in page
    assert f'href="/{db}/profiles"' not in page
    status, _, body = _get(server, f"/{db}/profiles.json", _shape="array", _size="1")
    assert status == 200 and len(json.loads(body)) == 1


@pytest.mark.parametrize("view", sorted(catalog.VIEWS))
def test_every_views_page_explains_every_column_with_its_unit(server, db, view):
    status, _, body = _get(server, f"/{db}/{view}")
    page = html.unescape(body.decode())
    assert status == 200
    relation = catalog.VIEWS[view]
    assert catalog.plain_text(relation.summary) in page
    for column in relation.columns:
        assert catalog.plain_text(column.meaning, column.unit) in page, column.name


def test_the_profiles_page_has_its_facets_and_order(server, db):
    data = _json(server, f"/{db}/acceptance_profiles.json")
    assert set(web.PAGES["acceptance_profiles"].facets) <= set(data["facet_results"])
    models = {v["value"]: v["count"] for v in data["facet_results"]["model"]["results"]}
    stored = _sql(server, "SELECT model, COUNT(*) AS n FROM acceptance_profiles GROUP BY model")
    assert models == {r["model"]: r["n"] for r in stored}
    labels = [row[data["columns"].index("profile")] for row in data["rows"]]
    assert labels == sorted(labels)


def test_the_json_api_filters_as_the_page_does(server, db):
    rows = _json(server, f"/{db}/acceptance_profiles.json", _shape="array", model="model-a",
                 thinking="on", _size="max")
    expected = _sql(server, "SELECT profile_id FROM acceptance_profiles "
                            "WHERE model = 'model-a' AND thinking = 'on'")
    assert sorted(r["profile_id"] for r in rows) == sorted(r["profile_id"] for r in expected)
    assert rows and all(r["model"] == "model-a" and r["thinking"] == "on" for r in rows)


def _canned(server, db, name: str, **params: str) -> list[dict]:
    return _json(server, f"/{db}/{name}.json", _shape="array", **params)


def _a_key(server, set_count: int) -> dict:
    """A key of the generated registry that ``set_count`` sets hold."""
    (key,) = _sql(server, "SELECT model, speculative_method, num_spec_tokens, thinking, "
                          "category FROM profile_conflicts WHERE set_count = :n LIMIT 1"
                  if set_count > 1 else
                  "SELECT model, speculative_method, num_spec_tokens, thinking, category "
                  "FROM acceptance_profiles a WHERE NOT EXISTS (SELECT 1 FROM "
                  "profile_conflicts c WHERE c.model = a.model AND c.speculative_method = "
                  "a.speculative_method AND c.num_spec_tokens = a.num_spec_tokens AND "
                  "c.thinking = a.thinking AND c.category = a.category) LIMIT 1",
                  {"n": set_count})
    return key


def test_resolve_a_run_through_the_server(server, db):
    key = _a_key(server, 1)
    form = {"model": key["model"], "method": key["speculative_method"],
            "k": str(key["num_spec_tokens"]), "thinking": key["thinking"],
            "category": key["category"], "fallback": "", "set": "", "hardware": "",
            "as_of": ""}
    (answer,) = _canned(server, db, "resolve", **form)
    (stored,) = _sql(server, "SELECT profile, profile_set, acceptance_length FROM "
                             "acceptance_profiles WHERE profile = :p",
                     {"p": "{model}/{speculative_method}/k{num_spec_tokens}/thinking-"
                           "{thinking}/{category}".format(**key)})
    assert answer["answer"] == "resolved"
    assert {k: answer[k] for k in stored} == stored
    # The same row as the statement gives on the file, bound as the form binds: as text.
    (direct,) = _sql(server, web.resolve_sql(), form)
    assert answer == direct
    conflict = _a_key(server, 2)
    (answer,) = _canned(server, db, "resolve", model=conflict["model"],
                        method=conflict["speculative_method"],
                        k=str(conflict["num_spec_tokens"]), thinking=conflict["thinking"],
                        category=conflict["category"])
    assert answer["answer"] == "conflict"
    assert answer["message"].startswith("2 registry sets hold ")
    (answer,) = _canned(server, db, "resolve", model="model-a", method="mtp", k="1",
                        thinking="on", category="coding", set="nope")
    assert answer["answer"] == "unknown_set"


def test_the_other_canned_queries_with_their_parameters(server, db):
    coverage = _canned(server, db, "coverage", model="model-b", _size="max")
    assert len(coverage) == len(_sql(server, "SELECT 1 FROM profile_coverage "
                                             "WHERE model = 'model-b'"))
    assert {r["status"] for r in coverage} == {"stored", "missing", "conflict"}
    narrowed = _canned(server, db, "coverage", model="model-b", method="mtp", _size="max")
    assert narrowed and {r["speculative_method"] for r in narrowed} == {"mtp"}
    history = _canned(server, db, "set_history", set="beta")
    assert [(r["revision"], r["action"], r["is_latest"]) for r in history] == [(1, "added", 1)]
    conflicts = _canned(server, db, "conflicts", _size="max")
    held = _sql(server, "SELECT SUM(set_count) AS n FROM profile_conflicts")[0]["n"]
    assert len(conflicts) == held
    names = {q.name for q in web.canned_queries()}
    assert names >= {"resolve", "coverage", "set_history", "conflicts"}
    if "uncertainty" in names:  # with the counts columns
        rows = _canned(server, db, "uncertainty", model="model-a", _size="max")
        counted = _sql(server, "SELECT profile_id, acceptance_length, al_stderr FROM "
                               "acceptance_profiles WHERE model = 'model-a' AND drafts IS NOT NULL")
        assert len(rows) == len(counted) > 0
        # no per-position counts here: the bound, but exact at K = 1 (0014)
        assert all(r["al_stderr"] > 0 and r["al_stderr_exact"] == (r["num_spec_tokens"] == 1)
                   for r in rows)
        assert {r["al_stderr_exact"] for r in rows} == {0, 1}
        assert all(r["al_low_95"] == pytest.approx(r["acceptance_length"] - 1.96 * r["al_stderr"])
                   for r in rows)


def _png_size(body: bytes) -> tuple[int, int]:
    assert body[:8] == b"\x89PNG\r\n\x1a\n", body[:40]
    return int.from_bytes(body[16:20], "big"), int.from_bytes(body[20:24], "big")


def test_a_page_of_profiles_and_an_answer_have_their_pictures(server, db):
    status, kind, body = _get(server, f"/{db}/acceptance_profiles.png", model="model-a")
    assert (status, kind) == (200, "image/png")
    assert _png_size(body) == (1200, 780)
    page = _get(server, f"/{db}/acceptance_profiles", model="model-a")[2].decode()
    assert "acceptance_profiles.png?model=model-a" in html.unescape(page)
    key = _a_key(server, 1)
    status, kind, body = _get(server, f"/{db}/resolve.png", model=key["model"],
                              method=key["speculative_method"], k=str(key["num_spec_tokens"]),
                              thinking=key["thinking"], category=key["category"])
    assert (status, kind) == (200, "image/png")
    # Rows that hold no acceptance length have no picture to offer.
    page = _get(server, f"/{db}/set_overview")[2].decode()
    assert "set_overview.png" not in page


def test_nothing_can_be_written(server, db):
    before = hashlib.sha256(server.path.read_bytes()).hexdigest()
    databases = _json(server, "/-/databases.json")
    # Mutable: it changes with each import (served from snapshots); writable it is not.
    assert [d["name"] for d in databases] == [db]
    for sql in ("INSERT INTO profile_sets (name, source_file, content_hash, imported_at, "
                "revision) VALUES ('x', 'x', 'x', '2026-01-01', 1)",
                "DELETE FROM profiles",
                "WITH doomed AS (SELECT id FROM profiles) DELETE FROM profiles",
                "UPDATE profiles SET acceptance_length = 1",
                "DROP VIEW acceptance_profiles",
                "PRAGMA journal_mode = DELETE"):
        status, _, body = _get(server, f"/{db}.json", sql=sql)
        assert status >= 400 or json.loads(body).get("ok") is False, (sql, body[:300])
    status, _, _ = _post(server, f"/{db}/resolve", {"model": "x"})
    assert status >= 400
    assert _sql(server, "SELECT COUNT(*) AS n FROM profiles")[0]["n"] > 0
    assert hashlib.sha256(server.path.read_bytes()).hexdigest() == before


def _post(server, path: str, form: dict[str, str]) -> tuple[int, str, bytes]:
    request = urllib.request.Request(f"{server.url}{path}", method="POST",
                                     data=urllib.parse.urlencode(form).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers.get_content_type(), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get_content_type(), exc.read()


@pytest.mark.parametrize("how, code", [(signal.SIGINT, 0), (signal.SIGTERM, -signal.SIGTERM)])
def test_ctrl_c_stops_the_server_cleanly(registry_file, how, code):
    """Ctrl-C is a server's normal end: it shuts down and exits 0. SIGTERM shuts it down the
    same way, and the process then ends by the signal (uvicorn re-raises it for supervisors)."""
    running = Server(registry_file, free_port())
    try:
        running.wait()
        running.process.send_signal(how)
        assert running.process.wait(timeout=30) == code
    finally:
        running.stop()
    assert "Finished server process" in running.log.read_text()
    assert "Traceback" not in running.log.read_text()


def test_a_port_already_taken_is_said_and_exit_1(server):
    """Another server on the port: uvicorn's reason, then what to do, and no traceback."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "registry_db", "-d", str(server.path), "serve",
                           "--port", str(server.port)], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "address already in use" in done.stderr
    assert f"cannot listen on 127.0.0.1:{server.port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_picture_past_a_bound_is_refused_with_why(server, db):
    sql = ("SELECT 'm' AS model, 'mtp' AS speculative_method, 10000000 AS num_spec_tokens, "
           "'off' AS thinking, 2.0 AS acceptance_length, 'measured' AS method")
    status, kind, body = _get(server, f"/{db}.png", sql=sql)
    assert (status, kind) == (400, "text/plain")
    assert body.decode().startswith("No picture: K 10000000 is more than a picture draws")
    assert _get(server, f"/{db}/set_overview.json")[0] == 200  # and the server goes on


def test_the_server_answers_while_a_picture_is_drawn(server, db):
    """A slow picture (36 panels) is drawn off the event loop: a page asked for after it
    answers before it does."""
    import threading

    sql = ("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 431) "
           "SELECT 'model-' || (i % 36) AS model, 'mtp' AS speculative_method, "
           "1 + i % 12 AS num_spec_tokens, 'off' AS thinking, 'c' || (i / 144) AS category, "
           "1.0 + (i % 12) * 0.3 AS acceptance_length, 'measured' AS method FROM n")
    done: list[str] = []
    picture: list[tuple] = []

    def draw() -> None:
        picture.append(_get(server, f"/{db}.png", sql=sql))
        done.append("picture")

    worker = threading.Thread(target=draw)
    worker.start()
    _wait_for_drawing(server)
    status, _, _ = _get(server, f"/{db}/set_overview.json")
    done.append("page")
    worker.join(timeout=300)
    assert status == 200 and picture and picture[0][:2] == (200, "image/png")
    assert done == ["page", "picture"]


def _wait_for_drawing(server) -> None:
    """Until the server's picture worker (its child process) is using the CPU."""
    import time
    from pathlib import Path

    def worker_cpu() -> int | None:
        for task in Path(f"/proc/{server.process.pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                if b"spawn_main" not in Path(f"/proc/{child}/cmdline").read_bytes():
                    continue  # multiprocessing's resource tracker
                stat = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
                return int(stat[11]) + int(stat[12])  # utime + stime, in ticks
        return None

    first = None
    for _ in range(3000):
        now = worker_cpu()
        if now is not None and first is not None and now > first:
            return
        if first is None:
            first = now
        time.sleep(0.01)
    raise AssertionError("the picture worker never started drawing")
