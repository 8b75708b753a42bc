"""A streamed batch (issue 30.4, 27.11, 27.19, 28.3): answers come chunk by chunk, the first
before the input ends when a pipe's writer waits for it; all chunks read one snapshot; the
answers are byte for byte those of the whole input answered at once; a bad line (not UTF-8, a
surrogate id) is answered and named, and the rest are answered; a closed stdin, a terminated
backend and Ctrl-C end it with one line on stderr and the contract's exit code."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.cli.batch_json import ENCODER, answer_line
from registry_db.importing import write as importer
from registry_db.inputs.batch_stream import chunks
from registry_db.resolve.batch import Seen, answer_chunks
from registry_db.resolve.reading import reading
from tests.helpers import ROOT, SEED, run_cli

KEY = {"model": "deepseek-v4.1-flash", "method": "dspark", "k": 5, "thinking": "off",
       "category": "coding"}
LINE = json.dumps(KEY) + "\n"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}


class Batch:
    """``registry resolve --batch -`` as a real process on pipes: write a line, read its
    answer while the process waits for more."""

    def __init__(self, url: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "registry_db", "-d", url, *(args or ("resolve", "--batch",
                                                                        "-"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=ROOT, env=_env())

    def send(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() if isinstance(line, str) else line)
        self.proc.stdin.flush()

    def answer(self, timeout: float = 60) -> dict:
        """The next answer line: it must come while the input is still open."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no answer came before the input ended"
        return json.loads(self.proc.stdout.readline())

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out.decode(), err.decode()


def test_the_first_answer_comes_before_the_input_ends(backend, db_url, engine):
    importer.import_paths(engine, [SEED])
    batch = Batch(db_url)
    try:
        batch.send(LINE)
        first = batch.answer()
        assert first["acceptance_length"] == 4.07
        batch.send(json.dumps({"id": 2, **KEY, "k": 6}) + "\n")
        second = batch.answer()
        assert second["id"] == 2 and second["refused"]["reason"] == "no_match"
    finally:
        code, out, err = batch.finish()
    assert (code, out, err) == (0, "", "")


def _changed_seed(folder: Path) -> Path:
    folder.mkdir()
    src = (SEED / "inferencex-golden-al.yaml").read_text()
    assert src.count("acceptance_length: 4.07") == 1
    (folder / "inferencex-golden-al.yaml").write_text(
        src.replace("acceptance_length: 4.07", "acceptance_length: 4.5"))
    return folder


def test_an_import_committed_mid_batch_is_not_seen(backend, db_url, engine, tmp_path):
    """The chunks after an import's commit still read the state the batch began with."""
    importer.import_paths(engine, [SEED])
    batch = Batch(db_url)
    try:
        batch.send(LINE)
        assert batch.answer()["acceptance_length"] == 4.07
        result = run_cli("-d", db_url, "import", str(_changed_seed(tmp_path / "new")))
        assert result.exit_code == 0, result.stderr
        assert "updated" in result.stdout
        batch.send(LINE)
        assert batch.answer()["acceptance_length"] == 4.07  # the batch's snapshot
    finally:
        code, _, err = batch.finish()
    assert code == 0 and err == ""
    after = run_cli("-d", db_url, "resolve", "--batch", "-", input=LINE)
    assert json.loads(after.stdout)["acceptance_length"] == 4.5  # a new batch sees it


def _mixed_lines() -> list[str]:
    """Hits, misses, refusals, repeats, blank lines, bad lines, ids, as_of, deployments."""
    lines = []
    for i in range(60):
        k = 1 + i % 7
        lines.append(json.dumps({"id": i, **KEY, "k": k,
                                 "thinking": ("off", "on")[i % 2],
                                 "category": ("coding", "chat")[i % 3 == 0]}))
        if i % 5 == 0:
            lines.append(LINE.strip())  # the same run again
        if i % 11 == 0:
            lines.append("   ")
        if i % 13 == 0:
            lines.append('{"model": 1}')
        if i % 17 == 0:
            lines.append(json.dumps({**KEY, "as_of": "2001-01-01"}))
        if i % 19 == 0:
            lines.append(json.dumps({"id": [i], **{k: v for k, v in KEY.items()
                                                   if k not in ("method", "k")},
                                     "deployment": {"pools": [{"name": "d", "engine": {
                                         "speculative": {"method": "dspark",
                                                         "num_spec_tokens": 5}}}]}}))
        if i % 23 == 0:
            lines.append(json.dumps({**KEY, "model": "deepseek-v4.1-flsh"}))
    return lines


def _texts(url: str, pieces, seen=None) -> list[str]:
    with reading(url) as bind:
        return [a if type(a) is str else answer_line(a.answer, a.id)
                for answers in answer_chunks(bind, pieces, seen) for a in answers]


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_answers_kept_for_repeated_lines_equal_the_answers_read_again(backend, db_url, engine,
                                                                      size):
    """The batch's Seen (a line answered before is not read again), however small, even
    kept as text as the command keeps it, changes no byte."""
    importer.import_paths(engine, [SEED])
    lines = _mixed_lines() * 2
    whole = _texts(db_url, [lines], Seen(size=1))
    pieces = [lines[i:i + 7] for i in range(0, len(lines), 7)]
    assert _texts(db_url, pieces, Seen(size=size)) == whole
    as_text = Seen(keep=lambda a: answer_line(a.answer, a.id), size=size)
    assert _texts(db_url, pieces, as_text) == whole


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_chunked_answers_are_the_whole_inputs_byte_for_byte(backend, db_url, engine, size):
    importer.import_paths(engine, [SEED])
    lines = _mixed_lines()
    whole = _texts(db_url, [lines])  # every line in one chunk: the batch as it was answered
    pieces = [lines[i:i + size] for i in range(0, len(lines), size)]
    assert _texts(db_url, pieces) == whole
    # ... and the command's output, which reads its input in chunks as it comes.
    result = run_cli("-d", db_url, "resolve", "--batch", "-", input="\n".join(lines) + "\n")
    assert result.stdout == "".join(t + "\n" for t in whole)
    # The encoder's bytes, as the contract says.
    assert result.stdout.splitlines()[0] == ENCODER.encode(json.loads(whole[0]))


def test_the_reader_splits_lines_only_at_newline_across_reads(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\xef\xbb\xbfa\r\n\xe2\x80\xa8b\n\nc")
    with open(path, "rb") as fh:
        got = [line for chunk in chunks(fh, size=2) for line in chunk]
    assert got == ["a\r", "\u2028b", "", "c"]


def _batch_bytes(url: str, data: bytes, *args: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "registry_db", "-d", url, *args],
                          input=data, capture_output=True, cwd=ROOT, env=_env(), timeout=120)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_a_line_that_is_not_utf8_is_answered_and_named_the_rest_answered(backend, db_url,
                                                                        engine):
    importer.import_paths(engine, [SEED])
    data = LINE.encode() + b'{"model": "caf\xe9"}\n' + LINE.encode()
    code, out, err = _batch_bytes(db_url, data, "resolve", "--batch", "-")
    answers = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and len(answers) == 3
    assert answers[0]["acceptance_length"] == answers[2]["acceptance_length"] == 4.07
    refused = answers[1]["refused"]
    assert refused["reason"] == "invalid_request"
    assert refused["message"].startswith("line 2: not UTF-8 text (byte 0xe9 at column 15)")
    assert "Traceback" not in err and "line 2" in err


def test_a_byte_order_mark_at_the_start_is_not_a_bad_line(backend, db_url, engine):
    importer.import_paths(engine, [SEED])
    code, out, err = _batch_bytes(db_url, b"\xef\xbb\xbf" + LINE.encode() * 2,
                                  "resolve", "--batch", "-")
    assert (code, err) == (0, "")
    assert [json.loads(line)["acceptance_length"] for line in out.splitlines()] == [4.07, 4.07]


def test_check_batch_answers_a_non_utf8_line_and_the_rest(backend, db_url, engine):
    importer.import_paths(engine, [SEED])
    counts = {"drafts": 1000, "draft_tokens": 5000, "accepted_tokens": 3070}
    good = json.dumps({**KEY, "counts": counts}).encode() + b"\n"
    code, out, err = _batch_bytes(db_url, b"\xef\xbb\xbf" + good + b"\xff\n" + good,
                                  "check", "--batch", "-", "--json")
    answers = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and len(answers) == 3
    assert answers[0]["verdict"] == answers[2]["verdict"] == "consistent"
    assert answers[1]["refused"]["message"].startswith("line 2: not UTF-8 text")
    assert "line 2" in err and "Traceback" not in err


def test_a_surrogate_escape_in_an_id_does_not_end_the_batch(backend, db_url, engine):
    importer.import_paths(engine, [SEED])
    bad = '{"id": "\\ud800", "model": "deepseek-v4.1-flash", "method": "dspark", "k": 5}\n'
    result = run_cli("-d", db_url, "resolve", "--batch", "-", input=LINE + bad + LINE)
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.exit_code == 1 and len(answers) == 3
    assert "id" not in answers[1]  # not echoed: it cannot be written as UTF-8
    assert answers[1]["refused"]["reason"] == "invalid_request"
    assert answers[2]["acceptance_length"] == 4.07


def test_invalid_lines_are_counted_and_named_on_stderr(backend, db_url, engine):
    importer.import_paths(engine, [SEED])
    lines = [LINE, *["{bad\n"] * 7, LINE]
    result = run_cli("-d", db_url, "resolve", "--batch", "-", input="".join(lines))
    assert result.exit_code == 1
    assert result.stderr == ("7 line(s) were no request (answered invalid_request): "
                             "line 2, 3, 4, 5, 6 and 2 more\n")
    clean = run_cli("-d", db_url, "resolve", "--batch", "-", input=LINE)
    assert (clean.exit_code, clean.stderr) == (0, "")


@pytest.mark.parametrize("command", [("resolve", "--batch", "-"), ("check", "--batch", "-")])
def test_batch_from_a_closed_stdin_is_one_line(backend, db_url, command):
    done = subprocess.run(["bash", "-c", 'exec "$@" 0<&-', "-", sys.executable, "-m",
                           "registry_db", "-d", db_url, *command],
                          capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    # Reported as an unreadable batch file is: the finding, then the count.
    assert done.stderr.splitlines() == [
        "-:1:1: (document): cannot read the batch: standard input is closed",
        "1 error(s), 0 warning(s)"]


def _batch_backend_pid(admin, database: str) -> int:
    for _ in range(600):
        pid = admin.execute(text(
            "SELECT pid FROM pg_stat_activity WHERE datname = :d AND pid <> pg_backend_pid() "
            "AND state = 'idle in transaction'"), {"d": database}).scalar()
        admin.rollback()
        if pid is not None:
            return int(pid)
        time.sleep(0.05)
    raise AssertionError("the batch holds no transaction")


@pytest.mark.only_backend("postgresql")
def test_a_terminated_backend_mid_batch_is_one_line_exit_3(backend, db_url, engine):
    importer.import_paths(engine, [SEED])
    batch = Batch(db_url)
    admin = store.make_engine(db_url)
    try:
        batch.send(LINE)
        batch.answer()
        with admin.connect() as conn:
            pid = _batch_backend_pid(conn, engine.url.database)
            conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            conn.commit()
        batch.send(LINE)
    finally:
        admin.dispose()
        code, out, err = batch.finish()
    assert code == 3, err
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("Error: ")


def test_ctrl_c_mid_batch_is_exit_130_and_one_line(backend, db_url, engine):
    importer.import_paths(engine, [SEED])
    batch = Batch(db_url)
    try:
        batch.send(LINE)
        batch.answer()  # the snapshot is held now, waiting for more input
        batch.proc.send_signal(signal.SIGINT)
    finally:
        code, out, err = batch.finish()
    assert (code, out, err) == (130, "", "interrupted\n")


@pytest.mark.only_backend("postgresql")
def test_ctrl_c_while_the_server_runs_a_batch_query_cancels_it(backend, db_url, engine):
    """Ctrl-C while a PostgreSQL batch's statement is running (27.19): exit 130, one line, and
    the statement does not go on on the server. The statement is held on a lock the test
    takes, so the signal lands while it runs, whatever the machine's speed."""
    importer.import_paths(engine, [SEED])
    batch = Batch(db_url)
    admin = store.make_engine(db_url)
    database = engine.url.database
    try:
        with admin.connect() as locker, admin.connect() as watcher:
            # The batch holds its snapshot before its first line, and no lock on profiles yet
            # (a first answer would take one until the batch ends).
            pid = _batch_backend_pid(watcher, database)
            locker.execute(text("LOCK TABLE profiles IN ACCESS EXCLUSIVE MODE"))
            batch.send(LINE)
            waits = text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :p "
                         "AND state = 'active'")
            for _ in range(600):
                waiting = watcher.execute(waits, {"p": pid}).scalar()
                watcher.rollback()
                if waiting == "Lock":
                    break
                time.sleep(0.05)
            assert waiting == "Lock", "the batch's statement never waited on the lock"
            batch.proc.send_signal(signal.SIGINT)
            code, out, err = batch.finish()
            still = watcher.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p "
                                         "AND state = 'active'"), {"p": pid}).scalar()
            watcher.rollback()
            locker.rollback()
    finally:
        admin.dispose()
    assert (code, err) == (130, "interrupted\n")
    assert still == 0
    assert [json.loads(line)["acceptance_length"] for line in out.splitlines()] == []


@pytest.mark.slow
def test_a_batch_file_shows_a_bar_on_a_terminal_and_none_in_a_pipe(backend, db_url, engine,
                                                                   tmp_path):
    from tests.helpers import run_in_terminal

    importer.import_paths(engine, [SEED])
    path = tmp_path / "runs.jsonl"
    path.write_text(LINE * 25_000)  # more than one chunk
    code, out, err = run_in_terminal("-d", db_url, "resolve", "--batch", str(path),
                                     stdout_tty=False, stderr_tty=True)
    assert code == 0 and out.count("\n") == 25_000
    assert "resolving" in err and "100%" in err, err
    code, out, err = run_in_terminal("-d", db_url, "resolve", "--batch", str(path),
                                     stdout_tty=False, stderr_tty=False)
    assert (code, err) == (0, "") and out.count("\n") == 25_000
