"""Fetching an http(s) input: one deadline for the whole fetch, redirects only to http(s), and
no secret of the URL in a message or in the recorded source. Local servers on 127.0.0.1 only;
every loop is bounded."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_db.errors import InvalidInput
from registry_db.model import Sampling
from registry_db.sources.counters import common as counters
from registry_db.sources.counters.common import Facts, read_input, redact
from registry_db.sources.counters.vllm import read_vllm_metrics
from tests.helpers import run_cli as run
from tests.helpers import vllm_scrape

BODY = vllm_scrape({0: (10, 30, 15, (7, 5, 3))}).encode()
FACTS = Facts(model="m", method="eagle3", k=3, thinking="off", category="coding",
              hardware="b300", engine_image="i", sampling=Sampling(temperature=0.0))


@pytest.fixture
def server() -> Iterator[tuple[str, threading.Event]]:
    """/drip sends a byte every 0.05 s for at most 200 bytes (bounded), /ftp and /file
    redirect away from http, /hop redirects to /metrics, /metrics answers a scrape, /login
    refuses; the event stops a drip early."""
    done = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            path = self.path.split("?", 1)[0]
            if path == "/drip":
                self.send_response(200)
                self.send_header("Content-Length", "200")
                self.end_headers()
                for _ in range(200):
                    if done.is_set():
                        return
                    try:
                        self.wfile.write(b"#")
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(0.05)
            elif path in ("/ftp", "/file", "/hop"):
                target = {"/ftp": "ftp://127.0.0.1/metrics", "/file": "file:///etc/passwd",
                          "/hop": "/metrics"}[path]
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/metrics":
                self.send_response(200)
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()
                self.wfile.write(BODY)
            else:
                self.send_error(401, "Unauthorized")

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", done
    done.set()
    httpd.shutdown()
    httpd.server_close()


def refusal(location: str) -> str:
    with pytest.raises(InvalidInput) as exc:
        read_input(location)
    (finding,) = exc.value.findings
    assert finding.code == "fetch_failed"
    return finding.message


def test_a_server_dripping_bytes_is_cut_at_the_deadline_for_the_whole_fetch(server,
                                                                             monkeypatch):
    base, done = server
    # each byte comes well within the per-read timeout; the whole body would take 10 s
    monkeypatch.setattr(counters, "FETCH_TIMEOUT", 0.5)
    started = time.monotonic()
    message = refusal(f"{base}/drip")
    took = time.monotonic() - started
    done.set()
    assert "within 0.5 s" in message and "whole fetch" in message
    assert took < 5, took  # a bound far from the limit: the drip alone would take 10 s


@pytest.mark.parametrize("path, target", [("/ftp", "ftp://127.0.0.1/metrics"),
                                          ("/file", "file:///etc/passwd")])
def test_a_redirect_away_from_http_is_refused(server, path, target):
    base, _ = server
    message = refusal(f"{base}{path}")
    assert "only http:// and https:// are followed" in message or "redirect" in message
    if path == "/ftp":
        assert message == (f"the server redirected to {target}; only http:// and https:// are "
                           "followed")


def test_a_redirect_to_http_is_followed(server):
    base, _ = server
    assert read_input(f"{base}/hop").encode() == BODY


def test_secrets_leave_the_url_before_it_is_shown_or_stored(server):
    base, _ = server
    host = base.removeprefix("http://")
    url = f"http://scraper:hunter2@{host}/metrics?password=s3cret&match[]=up&api_token=tok9"
    result = read_vllm_metrics(url, None, FACTS)
    source = result.sets[0].profiles[0].provenance.source
    text = result.texts[0]
    for secret in ("hunter2", "s3cret", "tok9", "scraper"):
        assert secret not in source and secret not in text
    assert source == f"vLLM /metrics: {base}/metrics?password=REDACTED&match[]=up&" \
                     "api_token=REDACTED"


def test_secrets_leave_every_message(server):
    base, _ = server
    host = base.removeprefix("http://")
    result = run("ingest", "vllm-metrics", f"http://scraper:hunter2@{host}/login?token=tok9",
                 "--model", "m", "--method", "eagle3", "--k", "3", "--thinking", "off",
                 "--category", "coding", "--hardware", "b300", "--engine-image", "i",
                 "--temperature", "0")
    assert result.exit_code == 1
    assert "hunter2" not in result.stderr and "tok9" not in result.stderr
    assert result.stderr.startswith(f"{base}/login?token=REDACTED: (document): the server "
                                    "answered HTTP 401")
    down = run("check", "http://scraper:hunter2@127.0.0.1:1/m?password=pw1", "--k", "3")
    assert "hunter2" not in down.stderr and "pw1" not in down.stderr


@pytest.mark.parametrize("url, shown", [
    ("http://u:p@h/m", "http://h/m"),
    ("https://TOKEN@h:8443/m?key=k&x=1", "https://h:8443/m?key=REDACTED&x=1"),
    ("http://h/m?X-Amz-Signature=abc&session-token=t", "http://h/m?X-Amz-Signature=REDACTED&"
     "session-token=REDACTED"),
    ("http://h/m?match[]=up", "http://h/m?match[]=up"),
])
def test_redact(url, shown):
    assert redact(url) == shown


def test_a_local_path_is_named_as_given():
    assert counters.label(str(Path("a") / "b.prom")) == str(Path("a") / "b.prom")
