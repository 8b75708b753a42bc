"""The readers and checks that several inputs' schemas share: per-position rates, AL within
[1, K + 1], K's range, a category's shape, a thinking mode, and how far rates sum from what AL
implies.

Each is written once, with its one message, and used as a row's ``content`` or ``checks`` in
the tables of :mod:`registry_db.inputs.profile_set` and :mod:`registry_db.inputs.inline`
(the spec states the same rules for a profile and an inline value).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from registry_db.inputs.schema import (
    Check,
    Checker,
    category_problem,
    join,
    k_problem,
    thinking_problem,
)
from registry_db.model import CATEGORY_RE, MAX_K, THINKING_MODES
from registry_db.yaml.nodes import pos

__all__ = ["AL_RANGE", "K_RANGE", "RATES_SHAPE", "THINKING", "al_in_range", "al_problem",
           "category_check", "count_check", "negative_message", "rates", "rates_sum_off"]


def rates(ck: Checker, seq: list, m: dict, sub: str, got: dict) -> tuple[float, ...] | None:
    """``per_position_rates``: K numbers in [0, 1], non-increasing (spec: Profiles).

    Returns the rates only when all of that holds; the sum against AL is the caller's rule.
    """
    key = "per_position_rates"
    k = got.get("num_spec_tokens")
    values = ck.numbers(seq, sub, key)
    good = values is not None
    if k is not None and len(seq) != k:
        ck.error(pos(m, key), sub, "rates_count",
                 f"{key} has {len(seq)} entries but num_spec_tokens is {k}; give one rate "
                 "per speculative position")
        good = False
    if values is None:
        return None
    for i, r in enumerate(values):
        if not 0.0 <= r <= 1.0:
            ck.error(pos(seq, i), join(sub, i), "rate_out_of_range",
                     f"rate {r!r} lies outside [0, 1]; each is a probability")
            good = False
    for i in range(1, len(values)):
        if values[i] > values[i - 1]:
            ck.error(pos(seq, i), join(sub, i), "rates_rise",
                     f"rate {values[i]!r} at position {i + 1} is above the "
                     f"{values[i - 1]!r} before it; rates never rise, since p_i is the "
                     "chance that the first i drafts are all accepted")
            good = False
    return tuple(values) if good else None


#: What :func:`rates` reads, as JSON Schema can say it (K entries and never rising it cannot).
RATES_SHAPE = {"items": {"type": "number", "minimum": 0, "maximum": 1}, "minItems": 1,
               "maxItems": MAX_K}


def rates_sum_off(rates: Iterable[float], expected: float, tolerance: float) -> float | None:
    """How far the rates' sum lies from ``expected``, or None when it is within ``tolerance``."""
    total = math.fsum(rates)
    # A hair of slack so that a sum exactly 0.01 away, after float rounding, still passes.
    if abs(total - expected) <= tolerance + 1e-9:
        return None
    return total


def al_problem(al: float, k: int) -> str | None:
    """The message for an AL outside [1, K + 1], or None (every input that holds an AL)."""
    if 1 <= al <= k + 1:
        return None
    return (f"acceptance_length {al!r} lies outside [1, {k + 1}] for K = {k}; AL counts the "
            "bonus token, so it is at least 1 and at most K + 1")


def al_in_range(al: float, got: dict) -> str | None:
    """AL in [1, K + 1] for the K read before it (profiles and inline values alike)."""
    k = got.get("num_spec_tokens")
    return None if k is None else al_problem(al, k)


def negative_message(key: str, value: int) -> str:
    """The message for a count below 0."""
    return f"{key} is {value}; a count is not negative"


def count_check(key: str) -> Check:
    """``negative_count`` for a field holding a count (prompts, tp, counts.drafts, ...)."""
    return Check("negative_count", lambda v, got: None if v >= 0 else negative_message(key, v),
                 {"minimum": 0})


#: ``num_spec_tokens`` of a profile or an inline value: K in [1, MAX_K].
K_RANGE = Check("bad_k", lambda k, got: k_problem("num_spec_tokens", k),
                {"minimum": 1, "maximum": MAX_K})
#: JSON Schema holds AL within [1, MAX_K + 1]; K + 1 for the K beside it is beyond it.
AL_RANGE = Check("al_out_of_range", al_in_range, {"minimum": 1, "maximum": MAX_K + 1})
#: ``thinking`` of a profile or a workload file: one of the thinking modes.
THINKING = Check("bad_thinking", lambda v, got: thinking_problem(v),
                 {"enum": list(THINKING_MODES)})


def category_check(label: str) -> Check:
    """``bad_category`` for a field holding a category, its message naming ``label``."""
    return Check("bad_category", lambda v, got: category_problem(label, v),
                 {"pattern": CATEGORY_RE.pattern})
