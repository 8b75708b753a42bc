"""A batch's edges, on SQLite and PostgreSQL: stderr names the lines the answers name (blank
lines counted), a line past the cap is refused without being held, what a batch keeps is bounded
in bytes, and a reader that goes away (``| head -1``) ends ``resolve --batch`` quietly, as it
ends a listing."""

from __future__ import annotations

import io
import json
import os
import re
import select
import subprocess
import sys
import tracemalloc

import pytest

from registry_db.cli.batch_json import answer_line
from registry_db.inputs.batch_stream import CHUNK, CHUNK_BYTES, MAX_LINE, chunks
from registry_db.resolve.batch import SEEN, SEEN_BYTES, Seen, answer_chunks
from registry_db.resolve.reading import reading
from tests.helpers import ROOT, run_cli

KEY = {"model": "deepseek-v4.1-flash", "method": "dspark", "k": 5, "thinking": "off",
       "category": "coding"}
LINE = json.dumps(KEY)
COUNTS = {"drafts": 1000, "draft_tokens": 5000, "accepted_tokens": 3070}
CHECKED = json.dumps({**KEY, "counts": COUNTS})
DRIFTED = json.dumps({**KEY, "counts": {**COUNTS, "accepted_tokens": 1000}})




def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}


# --- line numbers ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", [("resolve", "--batch", "-"),
                                     ("check", "--batch", "-", "--json")])
def test_stderr_names_the_lines_the_answers_name(seeded, command):
    good = LINE if command[0] == "resolve" else CHECKED
    text = "\n".join([good, "", "{bad", "   ", good, "[]"]) + "\n"
    result = run_cli("-d", seeded, *command, input=text)
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    named = [re.match(r"line (\d+):", a["refused"]["message"]).group(1)
             for a in answers if "refused" in a]
    assert result.exit_code == 1 and len(answers) == 4
    assert named == ["3", "6"]  # the input's lines, blank lines counted
    assert result.stderr == ("2 line(s) were no request (answered invalid_request): "
                             "line 3, 6\n")


def test_check_text_names_each_answer_by_its_input_line(seeded):
    text = "\n".join(["", CHECKED, "", "{bad"]) + "\n"
    result = run_cli("-d", seeded, "check", "--batch", "-", input=text)
    assert [line.split(":", 1)[0] for line in result.stdout.splitlines()] == ["2", "4"]
    assert result.stderr.endswith("line 4\n")


# --- the line cap and bytes -----------------------------------------------------------------

def test_a_line_past_the_cap_is_refused_and_the_rest_read():
    data = b"a" * MAX_LINE + b"\n" + b"b" * (MAX_LINE + 1) + b"\nc\n" + b"d" * (3 * MAX_LINE)
    got = [line for chunk in chunks(io.BytesIO(data)) for line in chunk]
    assert got[0] == "a" * MAX_LINE and got[2] == "c"  # at the cap: a line
    assert [got[1].reason, got[1].message] == [
        "invalid_request", f"line 2: the line is {MAX_LINE + 1:,} bytes long; a request is "
        f"at most {MAX_LINE:,} bytes (one JSON object on one line)"]
    assert got[3].message.startswith(f"line 4: the line is {3 * MAX_LINE:,} bytes long")


def test_a_long_line_is_not_held_while_it_is_read():
    """A 24 MiB line is counted and dropped as it comes: reading it never holds it."""
    data = b"x" * (24 << 20) + b"\n" + LINE.encode() + b"\n"
    stream = io.BufferedReader(io.BytesIO(data))
    tracemalloc.start()
    try:
        got = [line for chunk in chunks(stream) for line in chunk]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got[1] == LINE and got[0].message.startswith("line 1: the line is 25,165,824 bytes")
    assert peak < 2 * MAX_LINE + (1 << 20)


def test_chunks_end_at_the_byte_bound_and_change_no_line():
    lines = [f'{{"id": {i}, "pad": "{"p" * (i % 50)}"}}' for i in range(500)]
    data = ("\n".join(lines) + "\n").encode()
    plain = [line for chunk in chunks(io.BytesIO(data)) for line in chunk]
    small = list(chunks(io.BytesIO(data), limit=1000))
    assert [line for chunk in small for line in chunk] == plain == lines
    # Each chunk ends at the first line that takes it to the bound.
    assert all(sum(map(len, c[:-1])) < 1000 for c in small) and len(small) > 10


def test_what_seen_keeps_is_bounded_in_bytes():
    seen = Seen(keep=lambda a: a, limit=10_000)
    for i in range(1000):
        seen.put(f"{i:04d}" + "x" * 400, "y" * 500)
    assert seen.held <= 10_000
    assert seen.held == sum(Seen.cost(k, v) for k, v in seen.lines.items())
    assert 5 <= len(seen.lines) <= 10_000 // 900
    assert seen.get("0999" + "x" * 400) == "y" * 500 and seen.get("0000" + "x" * 400) is None
    huge = Seen(keep=lambda a: a, limit=100)
    assert huge.put("a" * 200, "b") == "b" and not huge.lines and huge.held == 0


def test_a_byte_bounded_seen_answers_as_the_plain_batch(seeded):
    """The fast path (answers kept for repeated lines) equals reading every line again."""
    lines = [json.dumps({"id": "i" * (i % 7) * 300, **KEY, "k": 3 + i % 4}) for i in range(40)]
    lines = lines * 3

    def texts(seen: Seen) -> list[str]:
        with reading(seeded) as bind:
            return [a if type(a) is str else answer_line(a.answer, a.id)
                    for answers in answer_chunks(bind, [lines[i:i + 9]
                                                        for i in range(0, len(lines), 9)], seen)
                    for a in answers]

    plain = texts(Seen(size=1))
    assert texts(Seen(keep=lambda a: answer_line(a.answer, a.id), limit=5000)) == plain
    assert texts(Seen(limit=3000)) == plain


def test_the_docs_state_the_batch_bounds_the_code_has():
    docs = (ROOT / "docs" / "resolving.md").read_text()
    for figure in (f"{CHUNK:,} lines", f"{CHUNK_BYTES >> 20} MiB", f"{MAX_LINE >> 20} MiB",
                   f"{SEEN:,} distinct lines", f"{SEEN_BYTES >> 20} MiB"):
        assert figure in docs


# --- a reader that goes away ----------------------------------------------------------------

class Piped:
    """``registry COMMAND --batch -`` as a real process on pipes."""

    def __init__(self, url: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "registry_db", "-d", url, *args, "--batch", "-"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=ROOT, env=_env())

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def first_answer_then_close(self) -> bytes:
        """Read one answer, then close the reading end, as ``head -1`` does."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        assert ready, "no answer came"
        first = self.proc.stdout.readline()
        self.proc.stdout.close()
        return first

    def finish(self) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        err = self.proc.stderr.read().decode()
        return self.proc.wait(timeout=120), err


def test_resolve_batch_into_a_closed_pipe_ends_quietly(seeded):
    batch = Piped(seeded, "resolve")
    batch.send(LINE)
    assert json.loads(batch.first_answer_then_close())["acceptance_length"] == 4.07
    batch.send(LINE.replace("5", "4"))  # answered into the closed pipe
    assert batch.finish() == (0, "")


def test_resolve_batch_piped_into_head(seeded, tmp_path):
    """The issue's own command: more chunks of answers than a pipe holds, and ``head -1``."""
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps({"id": i, **KEY}) + "\n" for i in range(CHUNK + 10)))
    done = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "$@" | head -1', "-", sys.executable, "-m",
         "registry_db", "-d", seeded, "resolve", "--batch", str(path)],
        capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["id"] == 0


def test_check_batch_into_a_closed_pipe_still_checks_every_line(seeded):
    """A CI gate's exit code is every line's verdict, whoever reads the output."""
    batch = Piped(seeded, "check", "--json")
    batch.send(CHECKED)
    assert json.loads(batch.first_answer_then_close())["verdict"] == "consistent"
    batch.send(CHECKED)
    assert batch.finish() == (0, "")
    batch = Piped(seeded, "check", "--json")
    batch.send(CHECKED)
    batch.first_answer_then_close()
    batch.send(DRIFTED)  # checked, though nobody reads its answer
    assert batch.finish() == (1, "")
