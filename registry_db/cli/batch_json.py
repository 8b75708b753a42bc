"""What ``--batch`` writes: each answer's JSON line (:mod:`registry_db.resolve.answer_json`, the
contract's bytes by template), with ``--emit`` the engine's settings added, and the chunk's
lines to stdout."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from registry_db.model import Refusal
from registry_db.resolve.answer import Resolution
from registry_db.resolve.answer_json import ENCODER, answer_line

__all__ = ["ENCODER", "answer_line", "emit_object", "with_emit", "write_answers"]


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
