"""An answer as its JSON line, written without building the answer's dict (``--batch``).

The contract's bytes are what ``json.JSONEncoder(ensure_ascii=False).encode`` makes of
``{"id": ID, **answer.to_json()}`` (the ``id`` only when the line has one). For the two shapes
nearly every line has, a :class:`~registry_db.resolve.answer.Resolution` and a
:class:`~registry_db.model.Refusal`, :func:`answer_line` writes the same text from the answer's
fields: strings through the encoder's own string function, floats by ``float.__repr__`` (what
the encoder uses for a finite float), in the keys' order of ``to_json``. Anything the template
does not cover exactly (NaN or an infinity, an int where a float is expected, a type it does not
know, a ``to_json`` whose keys changed) goes through the encoder, so the bytes stay the
encoder's. ``tests/unit/test_batch_json.py`` compares both ways over generated answers; why the
template is worth its code is in docs/decisions.md (Resolving).

:func:`resolution_body` is the template itself, from a resolution's fields: the batch writes
its registry hits with it from the lookup's rows without a Resolution first
(:meth:`~registry_db.resolve.finish.Answers.written`, an :class:`AnswerText`), which
:func:`answer_line` writes as it is. It lives with the resolver for that; the command's writing
(``--emit``, stdout) is :mod:`registry_db.cli.batch_json`.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any

from registry_db.model import Counts, Refusal, Uncertainty
from registry_db.resolve.answer import Fallback, HardwareMismatch, Resolution

__all__ = ["ENCODER", "AnswerText", "answer_line", "resolution_body"]

#: The contract's encoder: the bytes every answer line must have.
ENCODER = json.JSONEncoder(ensure_ascii=False)

_KEYS = ["acceptance_length", "acceptance_rate", "num_spec_tokens", "per_position_rates",
         "rates_derived", "layer", "profile_set", "profile", "revision", "source", "uncertainty",
         "counts", "fallback",
         "hardware_mismatch", "warnings"]
#: The template writes exactly these keys; should ``Resolution.to_json`` ever say otherwise,
#: every answer takes the encoder's way until the template is brought in line.
_TEMPLATE_OK = list(Resolution(1.0, 0.0, 1, (0.0,), True, "registry", None, None, None).to_json()
                    ) == _KEYS
_BOOL = {True: "true", False: "false"}
_repr = float.__repr__


def _text(value: Any) -> str:
    # A str subclass (the layer is a StrEnum) is written as its text, as the encoder does.
    return "null" if value is None else encode_basestring(value)


class AnswerText(str):
    """A resolution already written: its JSON object's text after the opening brace (what
    :func:`resolution_body` writes), for a caller that only writes answers."""

    __slots__ = ()


def _resolution(r: Resolution) -> str | None:
    """``r`` as the encoder writes ``r.to_json()``, or None where the template is not exact."""
    return resolution_body(r.acceptance_length, r.acceptance_rate, r.num_spec_tokens,
                           r.per_position_rates, r.rates_derived, r.layer, r.profile_set,
                           r.profile, r.source, r.fallback, r.hardware_mismatch, r.warnings,
                           r.revision, r.uncertainty, r.counts)


def resolution_body(acceptance_length: float, acceptance_rate: float, k: int,
                    per_position_rates: tuple[float, ...], rates_derived: bool, layer: str,
                    profile_set: str | None, profile: str | None, source: str | None,
                    fb: Fallback | None, hw: HardwareMismatch | None, warnings: tuple[str, ...],
                    revision: int | None, u: Uncertainty | None, c: Counts | None
                    ) -> str | None:
    """The :class:`~registry_db.resolve.answer.Resolution` of these fields (its fields' order)
    as the encoder writes its ``to_json()``, after the opening brace; None where the template
    is not exact. May raise TypeError for a field of a type it does not write."""
    if not _TEMPLATE_OK or type(k) is not int or type(rates_derived) is not bool or (
            revision is not None and type(revision) is not int):
        return None
    al, rate = _repr(acceptance_length), _repr(acceptance_rate)
    rates = ", ".join(map(_repr, per_position_rates))
    if "n" in al or "n" in rate or "n" in rates:  # nan, inf: the encoder writes NaN, Infinity
        return None
    if fb is None:
        fallback = "null"
    elif type(fb) is Fallback:
        fallback = f'{{"replaced": {_text(fb.replaced)}, "category": {_text(fb.category)}}}'
    else:
        return None
    if hw is None:
        mismatch = "null"
    elif type(hw) is HardwareMismatch:
        mismatch = (f'{{"measured_on": {_text(hw.measured_on)}, '
                    f'"run_on": {_text(hw.run_on)}}}')
    else:
        return None
    uncertainty, counts = _uncertainty(u), _counts(c)
    if uncertainty is None or counts is None:
        return None
    esc = encode_basestring
    return (f'"acceptance_length": {al}, "acceptance_rate": {rate}, '
            f'"num_spec_tokens": {int.__repr__(k)}, '
            f'"per_position_rates": [{rates}], "rates_derived": {_BOOL[rates_derived]}, '
            f'"layer": {esc(layer)}, '
            f'"profile_set": {"null" if profile_set is None else esc(profile_set)}, '
            f'"profile": {"null" if profile is None else esc(profile)}, '
            f'"revision": {"null" if revision is None else int.__repr__(revision)}, '
            f'"source": {"null" if source is None else esc(source)}, '
            f'"uncertainty": {uncertainty}, "counts": {counts}, '
            f'"fallback": {fallback}, "hardware_mismatch": {mismatch}, '
            f'"warnings": [{", ".join(map(esc, warnings)) if warnings else ""}]}}')


def _uncertainty(u: Any) -> str | None:
    """``u.to_json()`` as the encoder writes it (``null`` for None), or None where not exact."""
    if u is None:
        return "null"
    if type(u) is not Uncertainty or type(u.drafts) is not int or type(u.exact) is not bool \
            or type(u.stderr) is not float:
        return None
    stderr = _repr(u.stderr)
    if "n" in stderr:  # nan, inf
        return None
    return (f'{{"drafts": {int.__repr__(u.drafts)}, "stderr": {stderr}, '
            f'"exact": {_BOOL[u.exact]}}}')


def _counts(c: Any) -> str | None:
    """``c.to_json()`` as the encoder writes it (``null`` for None), or None where not exact."""
    if c is None:
        return "null"
    per = c.accepted_per_position if type(c) is Counts else ()
    if type(c) is not Counts or not all(type(n) is int for n in (
            c.drafts, c.draft_tokens, c.accepted_tokens, *(per or ()))):
        return None
    text = (f'{{"drafts": {int.__repr__(c.drafts)}, '
            f'"draft_tokens": {int.__repr__(c.draft_tokens)}, '
            f'"accepted_tokens": {int.__repr__(c.accepted_tokens)}')
    if per is None:
        return text + "}"
    return text + f', "accepted_per_position": [{", ".join(map(int.__repr__, per))}]}}'


def answer_line(answer: Any, ident: Any = None,
                memo: dict[int, tuple[Any, str]] | None = None) -> str:
    """The answer's JSON line (no newline), ``ident`` first when it is not None: the same text
    as ``ENCODER.encode({"id": ident, **answer.to_json()})`` (a Resolution, a Refusal, or any
    answer with ``to_json()``); an :class:`AnswerText` is that text already.

    ``memo`` keeps each answer's text by the answer's identity, for a batch whose identical
    runs share one answer object: each is written once. It holds the answer too, so that no
    identity in it is reused by another object while it lasts.
    """
    if type(answer) is AnswerText:
        return "{" + answer if ident is None else f'{{"id": {ENCODER.encode(ident)}, {answer}'
    found = None if memo is None else memo.get(id(answer))
    body = None if found is None else found[1]
    if body is None:
        body = _body(answer)
        if body is None:
            out = answer.to_json()
            return ENCODER.encode(out if ident is None else {"id": ident, **out})
        if memo is not None:
            memo[id(answer)] = (answer, body)
    if ident is None:
        return "{" + body
    return f'{{"id": {ENCODER.encode(ident)}, {body}'


def _body(answer: Resolution | Refusal) -> str | None:
    """The answer's line after its opening brace and id, or None where the template is not
    exact (the encoder's way then)."""
    try:
        if type(answer) is Resolution:
            return _resolution(answer)
        if type(answer) is Refusal:
            return (f'"refused": {{"reason": {encode_basestring(answer.reason)}, '
                    f'"message": {encode_basestring(answer.message)}}}}}')
    except TypeError:  # a field of a type the template does not write: the encoder's way
        pass
    return None
