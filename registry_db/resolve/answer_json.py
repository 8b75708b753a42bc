"""A ``--batch`` answer as its JSON line, written without building the answer's dict.

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
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from json.encoder import encode_basestring
from typing import Any

from registry_db.model import Counts, Refusal, Uncertainty
from registry_db.resolve.answer import Fallback, HardwareMismatch, Resolution

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


def _resolution(r: Resolution) -> str | None:
    """``r`` as the encoder writes ``r.to_json()``, or None where the template is not exact."""
    k = r.num_spec_tokens
    revision = r.revision
    if type(k) is not int or type(r.rates_derived) is not bool or (
            revision is not None and type(revision) is not int):
        return None
    al, rate = _repr(r.acceptance_length), _repr(r.acceptance_rate)
    rates = ", ".join(map(_repr, r.per_position_rates))
    if "n" in al or "n" in rate or "n" in rates:  # nan, inf: the encoder writes NaN, Infinity
        return None
    fb, hw = r.fallback, r.hardware_mismatch
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
    uncertainty, counts = _uncertainty(r.uncertainty), _counts(r.counts)
    if uncertainty is None or counts is None:
        return None
    esc, ps, label, source = encode_basestring, r.profile_set, r.profile, r.source
    return (f'"acceptance_length": {al}, "acceptance_rate": {rate}, '
            f'"num_spec_tokens": {int.__repr__(k)}, '
            f'"per_position_rates": [{rates}], "rates_derived": {_BOOL[r.rates_derived]}, '
            f'"layer": {esc(r.layer)}, '
            f'"profile_set": {"null" if ps is None else esc(ps)}, '
            f'"profile": {"null" if label is None else esc(label)}, '
            f'"revision": {"null" if revision is None else int.__repr__(revision)}, '
            f'"source": {"null" if source is None else esc(source)}, '
            f'"uncertainty": {uncertainty}, "counts": {counts}, '
            f'"fallback": {fallback}, "hardware_mismatch": {mismatch}, '
            f'"warnings": [{", ".join(map(esc, r.warnings)) if r.warnings else ""}]}}')


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
    answer with ``to_json()``).

    ``memo`` keeps each answer's text by the answer's identity, for a batch whose identical
    runs share one answer object: each is written once. It holds the answer too, so that no
    identity in it is reused by another object while it lasts.
    """
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
        if type(answer) is Resolution and _TEMPLATE_OK:
            return _resolution(answer)
        if type(answer) is Refusal:
            return (f'"refused": {{"reason": {encode_basestring(answer.reason)}, '
                    f'"message": {encode_basestring(answer.message)}}}}}')
    except TypeError:  # a field of a type the template does not write: the encoder's way
        pass
    return None


def emit_object(answer: Any, engine: str, allow_inexact: bool = False,
                ) -> tuple[dict[str, Any] | None, tuple[str, ...], Refusal | None]:
    """What ``--batch --emit ENGINE`` adds to an answer: for a resolution, the engine's knobs
    as text by name (what ``--emit`` prints for the run); for a deployment's answer, those of
    each speculating pool, by pool name; None for a refusal (or a check). And the settings'
    warnings (a value some path of the engine cannot take), for stderr. When the engine would
    not realise the answer exactly (and ``allow_inexact`` is not given), no knobs but the
    refusal (``inexact_handoff``) that answers the line instead, as ``--emit`` refuses the run."""
    from registry_db.errors import ResolutionRefused
    from registry_db.resolve.deployment import DeploymentAnswer
    from registry_db.resolve.engines import engine_settings

    pool = ""
    try:
        if type(answer) is Resolution:
            settings = engine_settings(answer, engine, allow_inexact=allow_inexact)
            return settings.knobs(), settings.warnings, None
        if type(answer) is DeploymentAnswer:
            pools = []
            for name, r in answer.pools:
                pool = f"pool {name!r}: "
                pools.append((name, engine_settings(r, engine, allow_inexact=allow_inexact)))
            return ({name: s.knobs() for name, s in pools},
                    tuple(f"pool {name}: {w}" for name, s in pools for w in s.warnings), None)
    except ResolutionRefused as refused:
        return None, (), Refusal(refused.reason, pool + refused.message)
    return None, (), None


def with_emit(line: str, emit: dict[str, Any] | None) -> str:
    """An answer's JSON line (:func:`answer_line`) with ``"emit": EMIT`` as its last key: the
    same text as the encoder's of the answer's object with that key added (None: unchanged)."""
    if emit is None:
        return line
    return f'{line[:-1]}, "emit": {ENCODER.encode(emit)}}}'


def write_answers(lines: list[str]) -> bool:
    """Write a chunk's answer lines to stdout and flush them (a pipe's writer may wait for them
    before it writes more); False when the reader has gone (``| head -1``): nothing more is
    written, stdout then leads nowhere, and the caller ends the batch quietly, as a listing's
    command does when its reader goes."""
    try:
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # What is still buffered, and the interpreter's last flush, go nowhere instead of
        # failing again on the closed pipe.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return False
    return True
