"""A PostgreSQL batch overlaps its ``registry_resolve_many`` calls with its own work (issue 43,
:mod:`registry_db.resolve.overlap`): the answers are byte for byte those of one call per chunk
waited for, on the command line's connection and on an engine's, with parts small enough that
every chunk takes several calls, over a batch whose planning reads the database meanwhile (runs
as of a time naming sets) and whose refusals say what is stored; each part's call is sent from
one other thread before the part before it is finished, and a chunk is answered whole before
the next is read. SQLite's batch is not split."""

from __future__ import annotations

import json
import random
import threading

import pytest

from registry_db.cli.batch_json import answer_line
from registry_db.resolve import batch, overlap, plan
from registry_db.resolve.batch import Seen, answer_chunks
from registry_db.resolve.reading import reading
from tests.helpers import differential_history, differential_runs, run_cli


def _batch(times, n: int, seed: int) -> list[str]:
    """Lines of the differential grid (hits, fallbacks, conflicts, misses, unknown sets, runs
    as of four times, in several sets), a few that are no request, and repeats."""
    rng = random.Random(seed)
    lines = []
    for i, run in enumerate(differential_runs(times, n, seed)):
        line = {"id": i, "model": run["model"], "method": run["method"], "k": run["k"],
                "thinking": run["thinking"], "category": run["category"],
                "hardware": run["hardware"]}
        if run["fallback"] is not None:
            line["pin"] = {"fallback_category": run["fallback"]}
        sets = ([run["set"]] if run["set"] is not None else []) + list(run["sets"] or ())
        if sets:
            line["sets"] = list(dict.fromkeys(sets))
        if run["as_of"] is not None:
            line["as_of"] = run["as_of"].isoformat()
        lines.append(json.dumps(line))
    lines += ["{bad", "[]", "", '{"model": "model-a"}']
    lines += rng.sample(lines, 100)  # repeated lines, answered from what the batch keeps
    rng.shuffle(lines)
    return lines


def _texts(bind, chunks, ahead: bool = False) -> list[str]:
    """Every answer's text, as the command writes it (what Seen keeps is that text)."""
    seen = Seen(keep=lambda a: answer_line(a.answer, a.id))
    return [a if type(a) is str else answer_line(a.answer, a.id)
            for answers in answer_chunks(bind, chunks, seen, ahead=ahead) for a in answers]


@pytest.mark.only_backend("postgresql")
def test_overlapped_calls_answer_byte_for_byte(db_url, engine, backend, tmp_path, monkeypatch):
    times = differential_history(db_url, engine, tmp_path)
    lines = _batch(times, 3000, seed=8)
    assert any('"as_of"' in line and '"sets"' in line for line in lines)  # read meanwhile
    chunks = [lines[i:i + 1000] for i in range(0, len(lines), 1000)]
    monkeypatch.setattr(plan, "BY_FUNCTION", True)
    monkeypatch.setattr(overlap, "PART", 97)  # ten parts and a short one per chunk
    monkeypatch.setattr(overlap, "PART_AHEAD", 97)
    on_main: list[bool] = []
    real = overlap._rows

    def rows(conn, plans):
        on_main.append(threading.current_thread() is threading.main_thread())
        return real(conn, plans)

    monkeypatch.setattr(overlap, "_rows", rows)
    with reading(db_url) as reader:
        overlapped = _texts(reader, chunks)
        read_ahead = _texts(reader, chunks, ahead=True)
    by_engine = _texts(engine, chunks, ahead=True)
    command = run_cli("-d", db_url, "resolve", "--batch", "-", input="\n".join(lines) + "\n")
    path = tmp_path / "batch.jsonl"
    path.write_text("\n".join(lines) + "\n")
    from_file = run_cli("-d", db_url, "resolve", "--batch", str(path))  # read ahead
    assert len(on_main) >= 3 * 3 * 10 and not any(on_main)

    monkeypatch.setattr(batch, "OVERLAP", False)
    with reading(db_url) as reader:
        waited = _texts(reader, chunks)
    assert overlapped == waited
    assert read_ahead == waited
    assert by_engine == waited
    plain = run_cli("-d", db_url, "resolve", "--batch", "-", input="\n".join(lines) + "\n")
    assert (command.exit_code, command.stdout, command.stderr) == (
        plain.exit_code, plain.stdout, plain.stderr)
    assert (from_file.exit_code, from_file.stdout, from_file.stderr) == (
        plain.exit_code, plain.stdout, plain.stderr)
    said = "\n".join(waited)
    for reason in ("conflict", "no_match", "fallback_no_match", "unknown_set", "no_thinking",
                   "invalid_request"):
        assert f'"reason": "{reason}"' in said, reason
    assert "; stored for " in said and "; nothing is stored for " in said  # what is stored


@pytest.mark.only_backend("postgresql")
def test_a_part_is_sent_before_the_one_before_it_is_finished(db_url, engine, backend,
                                                             tmp_path, monkeypatch):
    times = differential_history(db_url, engine, tmp_path)
    lines = _batch(times, 400, seed=9)
    monkeypatch.setattr(plan, "BY_FUNCTION", True)
    monkeypatch.setattr(overlap, "PART", 100)
    monkeypatch.setattr(overlap, "PART_AHEAD", 100)
    events: list[str] = []
    call, finish = overlap.Overlap._call, overlap._finish

    def called(self, ask):
        events.append("call")
        return call(self, ask)

    def finished(part, got):
        events.append("finish")
        return finish(part, got)

    def chunk_read(chunks):
        for chunk in chunks:
            events.append("read")
            yield chunk

    monkeypatch.setattr(overlap.Overlap, "_call", called)
    monkeypatch.setattr(overlap, "_finish", finished)
    two = [lines[:300], lines[300:]]
    with reading(db_url) as reader:
        waited = _texts(reader, chunk_read(two))
        # Each chunk: the next part's call goes out before a part is finished, and every
        # part is finished (its answers in hand) before the next chunk is read.
        first = events[1:events.index("read", 1)]
        assert first == ["call", "call", "finish", "call", "finish", "finish"]
        assert events[0] == "read" and events.count("read") == 2
        assert events[-1] == "finish" and events.count("call") == events.count("finish")
        # Ahead (an input that never waits): the next chunk is read and its first part sent
        # before the last part of the chunk before is finished; the answers are the same.
        events.clear()
        assert _texts(reader, chunk_read(two), ahead=True) == waited
    assert events[:9] == ["read", "call", "call", "finish", "call", "finish", "read", "call",
                          "finish"]


def test_sqlite_and_a_switched_off_batch_are_not_split(db_url, engine, backend):
    with reading(db_url) as reader, overlap.overlap(reader) as beside:
        assert (beside is None) is (backend == "sqlite")
    with reading(db_url) as reader, overlap.overlap(reader, on=False) as beside:
        assert beside is None
