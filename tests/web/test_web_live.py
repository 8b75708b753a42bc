"""``registry serve`` on a registry that changes while it serves: every request reads one
snapshot of the registry as it stands when the request arrives, so an import is seen on every
page at the next request (no HTTP 500, no stale rows); the state heads every page; and serving
writes nothing, next to the file or in it."""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from registry_db.analyze import web
from registry_db.analyze.readable import READABLE_DIGITS
from registry_db.store import catalog
from tests.helpers import SEED, Server, free_port, run_cli, web_sets


def _get(server, path: str, **params: str) -> tuple[int, bytes]:
    url = f"{server.url}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture()
def live(registry_file, tmp_path):
    """A server on a copy of the web registry, which the test then writes."""
    path = tmp_path / "live.db"
    shutil.copy(registry_file, path)
    running = Server(path, free_port())
    try:
        running.wait()
        yield running
    finally:
        running.stop()


def _pages(db: str) -> list[tuple[str, dict[str, str]]]:
    """Every view's page and every canned query's, with a form that answers."""
    pages: list[tuple[str, dict[str, str]]] = [(f"/{db}/{v}", {"_size": "max"})
                                               for v in sorted(catalog.VIEWS)]
    forms = {"resolve": {"model": "model-a", "method": "mtp", "k": "2", "thinking": "on",
                         "category": "coding", "fallback": "chat"},
             "coverage": {"model": "model-a"}, "set_history": {"set": "delta"},
             "uncertainty": {"model": "model-a"}}
    for q in web.canned_queries():
        form = {**dict.fromkeys(q.params, ""), **forms.get(q.name, {})}
        pages.append((f"/{db}/{q.name}", form))
    return pages


def _import_delta(path: Path | str, folder: Path, seed: int = 8) -> None:
    """Set delta (alpha's content of another seed) into the registry at ``path``."""
    folder.mkdir(exist_ok=True)
    text = web_sets(seed)["alpha"].replace("name: alpha", "name: delta")
    (folder / "delta.yaml").write_text(text, encoding="utf-8")
    result = run_cli("-d", str(path), "import", str(folder))
    assert result.exit_code == 0, result.stderr


def test_an_import_while_serving_is_seen_on_every_page_at_the_next_request(live, tmp_path):
    db = live.path.stem
    for path, form in _pages(db):
        assert _get(live, path, **form)[0] == 200, path
    before = json.loads(_get(live, f"/{db}/set_revisions.json", _shape="array")[1])
    assert "delta" not in {r["profile_set"] for r in before}
    _import_delta(live.path, tmp_path / "sets")
    for path, form in _pages(db):
        status, body = _get(live, path, **form)
        assert status == 200, (path, body[:300])
        page = html.unescape(body.decode())
        # The state line of every page names the import just made.
        assert "delta revision 1 (added)" in page, path
    after = json.loads(_get(live, f"/{db}/set_revisions.json", _shape="array")[1])
    assert {r["profile_set"] for r in after} == {r["profile_set"] for r in before} | {"delta"}
    (history,) = json.loads(_get(live, f"/{db}/set_history.json", _shape="array",
                                 set="delta")[1])
    assert (history["revision"], history["action"]) == (1, "added")
    # An update: the resolve form answers from the new revision, as the command line does.
    _import_delta(live.path, tmp_path / "sets", seed=9)
    key = json.loads(_get(live, f"/{db}/acceptance_profiles.json", _shape="array",
                          profile_set="delta", _size="1")[1])[0]
    form = {"model": key["model"], "method": key["speculative_method"],
            "k": str(key["num_spec_tokens"]), "thinking": key["thinking"],
            "category": key["category"], "set": "delta"}
    (answer,) = json.loads(_get(live, f"/{db}/resolve.json", _shape="array", **form)[1])
    cli = run_cli("-d", str(live.path), "resolve", "--model", form["model"], "--method",
                  form["method"], "--k", form["k"], "--thinking", form["thinking"],
                  "--category", form["category"], "--set", "delta", "--json")
    theirs = json.loads(cli.stdout)
    assert (answer["revision"], answer["acceptance_length"]) == (
        theirs["revision"], theirs["acceptance_length"]) and answer["revision"] == 2


def test_pages_asked_for_during_imports_never_fail(live, tmp_path):
    """Requests while importers write: each page is whole (200), never a torn read."""
    db = live.path.stem
    folder = tmp_path / "sets"
    folder.mkdir()
    for seed in (8, 9, 10):
        (folder / "delta.yaml").write_text(
            web_sets(seed)["alpha"].replace("name: alpha", "name: delta"), encoding="utf-8")
        importer = subprocess.Popen(
            [sys.executable, "-m", "registry_db", "-d", str(live.path), "import", str(folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        asked = 0
        while importer.poll() is None or asked < 3:
            for path, form in _pages(db)[:4]:
                status, body = _get(live, path, **form)
                assert status == 200, (path, body[:300])
            asked += 1
        assert importer.wait() == 0
    status, body = _get(live, f"/{db}/set_history.json", _shape="array", set="delta")
    assert [r["revision"] for r in json.loads(body)] == [3, 2, 1]


def test_serving_writes_nothing_in_the_file_or_beside_it(live):
    db = live.path.stem
    before = hashlib.sha256(live.path.read_bytes()).hexdigest()
    for path, form in _pages(db):
        assert _get(live, path, **form)[0] == 200
    assert _get(live, f"/{db}/acceptance_profiles.png")[0] == 200
    assert sorted(p.name for p in live.path.parent.iterdir() if p.name.startswith("live.db")) \
        == ["live.db"]
    assert hashlib.sha256(live.path.read_bytes()).hexdigest() == before


class _Cells(HTMLParser):
    """The text of every table cell of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "td":
            self._depth += 1
            self.cells.append("")

    def handle_endtag(self, tag):
        if tag == "td":
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.cells[-1] += data


_NUMBER = re.compile(r"-?\d+\.(\d+)")


def _too_precise(cell: str) -> bool:
    text = cell.strip()
    parts = text[1:-1].split(",") if text.startswith("[") and text.endswith("]") else [text]
    return any((m := _NUMBER.fullmatch(p.strip())) and len(m.group(1)) > READABLE_DIGITS
               for p in parts)


def test_no_page_shows_more_digits_than_the_command_lines_tables(tmp_path):
    """AL 4.07 at K 5 (the seed) gives rate 0.6140000000000001 and derived rates
    [1.0,1.0,1.0,0.0700000000000003,0.0]: shown as 0.614 and [1.0, 1.0, 1.0, 0.07, 0.0]; the
    JSON keeps every digit."""
    path = tmp_path / "seed.db"
    assert run_cli("-d", str(path), "import", str(SEED)).exit_code == 0
    running = Server(path, free_port())
    try:
        running.wait()
        db = path.stem
        key = {"model": "deepseek-v4.1-flash", "method": "dspark", "k": "5",
               "thinking": "off", "category": "coding"}
        pages = [(f"/{db}/{v}", {"_size": "max"}) for v in sorted(catalog.VIEWS)]
        pages += [(f"/{db}/resolve", key), (f"/{db}/coverage", {"model": key["model"]}),
                  (f"/{db}/uncertainty", {"model": ""})]
        seen = 0
        for page, form in pages:
            status, body = _get(running, page, **form)
            assert status == 200
            parser = _Cells()
            parser.feed(body.decode())
            seen += len(parser.cells)
            assert [c for c in parser.cells if _too_precise(c)] == [], page
        assert seen > 100
        status, body = _get(running, f"/{db}/resolve", **key)
        shown = html.unescape(body.decode())
        assert "0.614" in shown and "[1.0, 1.0, 1.0, 0.07, 0.0]" in shown
        (answer,) = json.loads(_get(running, f"/{db}/resolve.json", _shape="array", **key)[1])
        assert answer["acceptance_rate"] == (4.07 - 1) / 5  # every digit
        assert answer["acceptance_rate"] != round(answer["acceptance_rate"], READABLE_DIGITS)
    finally:
        running.stop()


@pytest.mark.postgres
def test_a_postgresql_registry_is_served_from_copies_refreshed_after_an_import(
        pg_session_url, tmp_path):
    """Datasette reads SQLite only: each state of the PostgreSQL registry is copied into a
    private SQLite file at the first request after it, and the copy's time heads every page."""
    import os
    import time

    url = pg_session_url
    sets = tmp_path / "first"
    sets.mkdir()
    for name, content in web_sets(7).items():
        (sets / f"{name}.yaml").write_text(content, encoding="utf-8")
    assert run_cli("-d", url, "import", str(sets)).exit_code == 0
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "registry_db", "-d", url, "serve", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})

    class At:
        url = f"http://127.0.0.1:{port}"

    try:
        for _ in range(600):
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                urllib.request.urlopen(f"{At.url}/-/versions.json", timeout=5).close()
                break
            except OSError:
                time.sleep(0.1)
        db = url.rsplit("/", 1)[1].split("?")[0]
        status, body = _get(At, f"/{db}/set_revisions")
        page = html.unescape(body.decode())
        assert status == 200 and "(a copy of the PostgreSQL registry " in page
        _import_delta(url, tmp_path / "second")
        for path, form in _pages(db):
            status, body = _get(At, path, **form)
            assert status == 200, (path, body[:300])
            assert "delta revision 1 (added)" in html.unescape(body.decode()), path
        key = {"model": "model-a", "method": "mtp", "k": "2", "thinking": "on",
               "category": "coding", "fallback": "chat"}
        (answer,) = json.loads(_get(At, f"/{db}/resolve.json", _shape="array", **key)[1])
        cli = json.loads(run_cli("-d", url, "resolve", "--model", "model-a", "--method", "mtp",
                                 "--k", "2", "--thinking", "on", "--category", "coding",
                                 "--fallback-category", "chat", "--json").stdout or "{}")
        if "refused" in cli:
            assert answer["answer"] == cli["refused"]["reason"]
        else:
            assert (answer["profile_set"], answer["acceptance_length"]) == (
                cli["profile_set"], cli["acceptance_length"])
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
