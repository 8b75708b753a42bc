"""The batch's answer lines written by template (:mod:`registry_db.resolve.answer_json`) are the
bytes the contract's encoder writes for the same answers: generated resolutions and refusals,
unicode and escapes, floats such as 0.1 + 0.2, NaN and infinities, ids of every JSON type; and
a resolution written as text first (an ``AnswerText``, as a batch's hits are) is the same line."""

from __future__ import annotations

import json
import math
import random

from registry_db.model import Counts, Refusal, RefusalReason, Uncertainty
from registry_db.resolve import answer_json
from registry_db.resolve.answer_json import ENCODER, AnswerText, answer_line, resolution_body
from registry_db.resolve.plan import Fallback, HardwareMismatch, Resolution

TEXTS = ["", "b300", "é", "日本語", "😀", "a\"b", "back\\slash", "tab\tnew\nline", "\x01\x1f",
         "\u2028\u2029", "\x7f", "</script>", "a" * 300]
FLOATS = [0.1 + 0.2, 1.0, 2.78, 1e-300, 5e-324, 1.7976931348623157e308, 1e16, 123456789.125,
          -0.0, 0.0, 3.0, 2.5]
ODD = [math.nan, math.inf, -math.inf, 3, True]  # NaN, Infinity, an int, a bool: encoder's way
IDS = [None, 0, -1, 12345678901234567890, 1.5, 0.1 + 0.2, "line-1", "é😀\"", True, False,
       [1, "a", None], {"k": ["v", 2.5]}, {}, [], math.nan]


def _plain(answer, ident):
    out = answer.to_json()
    return ENCODER.encode(out if ident is None else {"id": ident, **out})


def _templated(answer) -> bool:
    try:
        return answer_json._resolution(answer) is not None
    except TypeError:
        return False


def _text(rng):
    return rng.choice(TEXTS) + rng.choice(TEXTS)


def _answer(rng: random.Random):
    if rng.random() < 0.25:
        return Refusal(rng.choice(list(RefusalReason)), _text(rng))
    pick = (lambda: rng.choice(FLOATS + ODD)) if rng.random() < 0.1 else (
        lambda: rng.choice(FLOATS) * rng.random())
    k = rng.randint(1, 8)
    return Resolution(
        pick(), pick(), k if rng.random() < 0.97 else rng.choice((True, 2.0)),
        tuple(pick() for _ in range(k)), rng.choice((True, False)),
        rng.choice(("registry", "workload", "scenario", "cli")),
        rng.choice((None, _text(rng))), rng.choice((None, _text(rng))),
        rng.choice((None, _text(rng))),
        rng.choice((None, Fallback(None, _text(rng)), Fallback(_text(rng), "coding"))),
        rng.choice((None, HardwareMismatch(_text(rng), _text(rng)))),
        tuple(_text(rng) for _ in range(rng.randint(0, 3))),
        rng.choice((None, 1, 17, 2**40, True, 2.0)),
        *_counted(rng, k if type(k) is int else 3, pick))


def _counted(rng: random.Random, k: int, pick) -> tuple:
    """The answer's uncertainty and counts: none (most stored profiles), or counts with and
    without per-position counts, now and then of a type only the encoder writes."""
    if rng.random() < 0.5:
        return None, None
    drafts = rng.choice((1, 12_000, 84142, 2**53))
    per = None if rng.random() < 0.4 else tuple(rng.randint(0, drafts) for _ in range(k))
    odd = rng.random() < 0.05  # a float count, a bool exact: the encoder's way
    counts = Counts(drafts if not odd else float(drafts), drafts * k, rng.randint(0, drafts), per)
    return Uncertainty(drafts, pick(), per is not None if not odd else 1), counts


def test_template_writes_the_encoders_bytes():
    rng = random.Random(5)
    answers = [_answer(rng) for _ in range(20_000)]
    idents = [rng.choice(IDS) for _ in answers]
    templated = [answer_line(a, i) for a, i in zip(answers, idents)]
    assert templated == [_plain(a, i) for a, i in zip(answers, idents)]
    # The generated answers reach both ways: the template and the encoder's fallback.
    assert any("NaN" in line or "Infinity" in line for line in templated)
    assert sum(_templated(a) for a in answers if type(a) is Resolution) > 7_000
    # ... with and without counts, per-position counts included.
    written = [line for a, line in zip(answers, templated)
               if type(a) is Resolution and _templated(a)]
    assert any('"accepted_per_position"' in line for line in written)
    assert any('"uncertainty": null' in line for line in written)
    assert all(json.loads(line) is not None for line in templated if "NaN" not in line)


def test_memo_writes_the_same_bytes_for_shared_answers():
    """A batch's identical runs share one answer object; with the memo each is written once
    and every line, whatever its id, has the bytes it has without."""
    rng = random.Random(7)
    answers = [_answer(rng) for _ in range(2_000)]
    picked = [rng.choice(answers) for _ in range(10_000)]
    idents = [rng.choice(IDS) for _ in picked]
    memo: dict[int, str] = {}
    lines = [answer_line(a, i, memo) for a, i in zip(picked, idents)]
    assert lines == [_plain(a, i) for a, i in zip(picked, idents)]
    assert 0 < len(memo) <= len(answers)


def test_template_follows_to_json_keys():
    """The template writes the keys ``Resolution.to_json`` has, in its order (else it is off)."""
    assert answer_json._TEMPLATE_OK
    r = Resolution(2.5, 0.5, 3, (1.0, 0.5, 0.0), True, "registry", "s", "p", None)
    assert list(json.loads(answer_line(r))) == list(r.to_json())


def test_a_resolution_written_first_is_the_same_line():
    """What :meth:`~registry_db.resolve.finish.Answers.written` does with a hit's fields: the
    template's text as an ``AnswerText``, written as the line of the Resolution they make."""
    rng = random.Random(9)
    done = 0
    for _ in range(5_000):
        answer = _answer(rng)
        if type(answer) is not Resolution:
            continue
        fields = [getattr(answer, f) for f in Resolution.__dataclass_fields__]
        try:
            body = resolution_body(*fields)
        except TypeError:
            body = None
        if body is None:
            continue
        done += 1
        ident = rng.choice(IDS)
        assert answer_line(AnswerText(body), ident) == _plain(answer, ident)
    assert done > 2_000
