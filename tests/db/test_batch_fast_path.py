"""A ``--batch`` answers byte for byte the same whichever way it goes: lines of the common shape
read by :func:`~registry_db.inputs.run.check_object` or the plain way, on PostgreSQL the
registry layer decided by the set-based ``registry_resolve_many`` (migration 0013) or by the
lookup statement and Python, as on SQLite, and registry hits written straight from the lookup's
rows (``text``: :meth:`~registry_db.resolve.finish.Answers.written`, what the command does) or
as resolutions first. The batch is varied: hits, fallbacks, conflicts,
misses, every refusal, a chip on another profile's, runs as of four times of a history, stated
values and pins, runs in several sets, deployments, repeated lines and lines that are no
request."""

from __future__ import annotations

import json
import random
from typing import Any

from registry_db.cli.batch_json import answer_line
from registry_db.inputs.request import parse_line
from registry_db.model import Refusal
from registry_db.resolve import plan
from registry_db.resolve.answer import Resolution
from registry_db.resolve.answer_json import AnswerText
from registry_db.resolve.batch import answer_lines
from tests.helpers import differential_history, differential_runs, run_cli

#: Lines that are no request, or break a rule of a term or a stated value (each read both ways).
ODD = ['{bad', '[]', '{}', '""', '{"model": "model-a"}',
       '{"model": "model-a", "method": "mtp", "k": true, "thinking": "on", "category": "chat"}',
       '{"model": "model-a", "method": "mtp", "k": 3.0, "thinking": "on", "category": "chat"}',
       '{"model": "model-a", "method": "mtp", "k": "3", "thinking": "on", "category": "chat"}',
       '{"model": "model-a", "method": "mtp", "k": 99, "thinking": "on", "category": "chat"}',
       '{"model": "model-a", "method": "mtp", "k": 1, "thinking": "maybe", "category": "chat"}',
       '{"model": "model-a", "method": "mtp", "k": 1, "thinking": "on", "category": "Chat!"}',
       '{"model": "model-a", "method": "mtp", "k": 1, "k": 2, "thinking": "on"}',
       '{"model": "model-a", "method": "mtp", "k": 1, "thinking": "on", "categry": "chat"}',
       '{"model": "", "method": "mtp", "k": 1, "thinking": "on", "category": "chat"}',
       '{"model": "model-a\\u0000", "method": "mtp", "k": 1, "thinking": "on"}',
       '{"model": "model-\\u0061", "method": "mtp", "k": 1, "thinking": "on", "category": "chat"}',
       '{"model": "model-a", "method": "mtp", "k": 1, "sets": [], "category": "chat"}',
       '{"model": "model-a", "method": "mtp", "k": 1, "sets": ["alpha", 3]}',
       '{"model": "model-a", "method": "mtp", "k": 1, "as_of": "yesterday"}',
       '{"model": "model-a", "method": "mtp", "k": 1, "pin": "chat"}',
       '{"model": "model-a", "method": "mtp", "k": 1, "pin": {"fallback_category": 7}}',
       '{"model": "model-a", "method": "mtp", "k": 2, "cli": {"num_spec_tokens": 2, '
       '"acceptance_length": 9.5}}',
       '{"model": "model-a", "method": "mtp", "k": 2, "hardware": ""}',
       '{"model": "model-a", "method": "mtp", "k": 2, "deployment": null, "thinking": "on", '
       '"category": "chat", "id": [1, {"x": null}]}',
       '   ', '']


def _line(run: dict[str, Any], i: int, rng: random.Random) -> str:
    line: dict[str, Any] = {"id": i, "model": run["model"], "method": run["method"],
                            "k": run["k"]}
    for key in ("thinking", "category", "hardware"):
        if run[key] is not None or rng.random() < 0.2:  # null is "not given" too
            line[key] = run[key]
    if run["fallback"] is not None:
        line["pin"] = {"fallback_category": run["fallback"]}
    if run["set"] is not None:
        line["sets"] = [run["set"]] if rng.random() < 0.8 else [run["set"], "alpha"]
    if run["sets"] is not None:  # more sets beside it (or alone)
        line["sets"] = list(dict.fromkeys(line.get("sets", []) + list(run["sets"])))
    if run["as_of"] is not None:
        line["as_of"] = run["as_of"].isoformat()
    roll = rng.random()
    if roll < 0.03:  # a stated value wins over the registry
        line["acceptance"] = {"num_spec_tokens": run["k"], "acceptance_length": 1.5}
    elif roll < 0.05:  # a value stated for another K
        line["cli"] = {"num_spec_tokens": run["k"] + 1, "acceptance_rate": 0.5}
    elif roll < 0.07:  # the scenario names a set
        line["pin"] = {"profiles": rng.choice(("alpha", "beta", "nope")),
                       "fallback_category": run["fallback"]}
    elif roll < 0.09:  # a deployment's pools state the method and K
        del line["method"], line["k"]
        line["deployment"] = {"pools": [
            {"name": "prefill"},
            {"name": "decode", "engine": {"speculative": {"method": run["method"],
                                                          "num_spec_tokens": run["k"]}}}]}
    return json.dumps(line, ensure_ascii=rng.random() < 0.5)


def _batch(times, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    lines = [_line(run, i, rng) for i, run in enumerate(differential_runs(times, n, seed))]
    lines += ODD
    lines += rng.sample(lines, 200)  # repeated lines, answered from what the batch keeps
    rng.shuffle(lines)
    return lines


def _answers(engine, lines: list[str], fast: bool) -> list[tuple[int, str]]:
    return [(a.line, answer_line(a.answer, a.id)) for a in answer_lines(engine, lines, fast)]


def test_the_fast_path_answers_as_the_plain_one(db_url, engine, backend, tmp_path, monkeypatch):
    times = differential_history(db_url, engine, tmp_path)
    lines = _batch(times, 3000, seed=5 if backend == "sqlite" else 6)
    monkeypatch.setattr(plan, "BY_FUNCTION", True)
    fast = _answers(engine, lines, fast=True)
    # The plain way: every line read by the generic checks, and on PostgreSQL the registry
    # layer decided by the lookup statement and Python instead of registry_resolve_many.
    monkeypatch.setattr(plan, "BY_FUNCTION", False)
    plain = _answers(engine, lines, fast=False)
    assert fast == plain
    # The batch reaches what it is meant to: every refusal and the resolved answers' notes.
    said = "\n".join(text for _, text in fast)
    for reason in ("conflict", "no_match", "fallback_no_match", "no_thinking", "no_category",
                   "unknown_set", "k_mismatch", "invalid_request", "invalid_value"):
        assert f'"reason": "{reason}"' in said, reason
    for note in ("used the fallback category", "acceptance is reused across hardware",
                 "\"layer\": \"workload\"", "\"layer\": \"scenario\"", "pool 'decode'"):
        assert note in said, note


def test_hits_written_from_their_rows_are_the_plain_answers(db_url, engine, backend, tmp_path,
                                                           monkeypatch):
    """The command's way: registry hits written as text without a Resolution first
    (``text``), the rest as objects; every line the same bytes, in the library and from
    ``registry resolve --batch`` (what the command keeps of repeated lines included). The
    lookup statement's path (PostgreSQL's function answers in rows, made objects)."""
    monkeypatch.setattr(plan, "BY_FUNCTION", False)
    times = differential_history(db_url, engine, tmp_path)
    rng = random.Random(8)
    runs = differential_runs(times, 5000, seed=7 if backend == "sqlite" else 9)
    lines = [_line(run, i, rng) for i, run in enumerate(runs)] + ODD
    lines += [line.replace('"id": ', '"id": "again-', 1).replace(", ", '", ', 1)
              if rng.random() < 0.5 else line for line in rng.sample(lines, 300)]
    rng.shuffle(lines)
    objects = list(answer_lines(engine, lines))
    plain = [(a.line, answer_line(a.answer, a.id)) for a in objects]
    written = list(answer_lines(engine, lines, text=True))
    assert [(a.line, answer_line(a.answer, a.id)) for a in written] == plain
    # A profile's answer takes the text's way (unless a pool asked the same run: pools are
    # put together from resolutions), with every note and number it writes.
    texts = [answer_line(a.answer, a.id) for a in written if type(a.answer) is AnswerText]
    hits = sum(type(a.answer) is Resolution and a.answer.profile is not None for a in objects)
    assert hits - 10 <= len(texts) <= hits and hits > 200
    said = "\n".join(texts)
    for part in ('"counts": {', '"accepted_per_position"', '"uncertainty": {', '"exact": true',
                 '"rates_derived": true', '"rates_derived": false', "used the fallback category",
                 "acceptance is reused across hardware", "is not measured (copied from",
                 "is not measured (literature)", '"warnings": []', '"id": "again-'):
        assert part in said, part
    # ... as of a time too.
    assert any(type(a.answer) is AnswerText and '"as_of"' in lines[a.line - 1]
               for a in written)
    src = tmp_path / "batch.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = run_cli("-d", db_url, "resolve", "--batch", str(src))
    assert out.stdout.splitlines() == [text for _, text in plain]


def test_fast_reading_gives_the_plain_run_or_leaves_the_line_to_it():
    """Each line reads to the same run (ids included) or the same refusal both ways."""
    rng = random.Random(3)
    runs = differential_runs([], 2000, seed=3)
    lines = [_line(dict(run, as_of=None), i, rng) for i, run in enumerate(runs)] + ODD
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fast, plain = parse_line(line, number), parse_line(line, number, fast=False)
        assert fast == plain and type(fast) is type(plain), line
        assert getattr(fast, "id", None) == getattr(plain, "id", None), line


def test_stated_values_of_equal_numbers_of_other_types_are_told_apart():
    """1, 1.0 and true are equal in Python, and so are 0.0 and -0.0: a value read once (the
    reading keeps what it read of a mapping) is not another's answer."""
    for key, values in (("acceptance_length", ("1", "1.0", "true", "2", "2.0")),
                        ("acceptance_rate", ("0.0", "-0.0", "0", "false"))):
        for value in values:
            line = ('{"model": "m", "method": "mtp", "k": 1, "acceptance": '
                    f'{{"num_spec_tokens": 1, "{key}": {value}}}}}')
            fast, plain = parse_line(line, 1), parse_line(line, 1, fast=False)
            assert fast == plain, line
            if type(fast) is not Refusal:
                got, want = fast.stated[1], plain.stated[1]
                assert repr(getattr(got, key)) == repr(getattr(want, key)), line
                assert type(getattr(got, key)) is type(getattr(want, key)), line
