"""AL, the acceptance rate and per-position rates: converting between them, exactly.

The spec names three quantities. The mean acceptance length AL is canonical; the acceptance rate
is ``(AL − 1) / K``; the per-position rates p₁..p_K are unconditional probabilities that the
first i drafts are all accepted, summing to ``AL − 1``. When the data states no per-position
rates, a consumer derives them with the minimum-variance schedule, which is vLLM v0.31.0's
``_acceptance_length_to_rates`` (vllm/config/speculative.py:557-564). It is computed here with
the very same float operations, and nothing in this module rounds, so that a simulator fed these
rates reproduces the engines that force a published AL.

:func:`complete` applies the contract's rule: of the three quantities, the one that was stated
(or stored) is reported exactly as stated, and the others are derived from it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def min_variance_rates(al: float, k: int) -> list[float]:
    """The minimum-variance schedule: ``[1.0] * floor(AL − 1) + [frac(AL − 1)] + [0.0] * rest``,
    truncated to K.

    The expression is vLLM's own, so that the floats match bit for bit::

        >>> min_variance_rates(2.5, 3)
        [1.0, 0.5, 0.0]
        >>> min_variance_rates(4.0, 3)
        [1.0, 1.0, 1.0]
    """
    expected = al - 1
    full = math.floor(expected)
    frac = expected - full
    return ([1.0] * full + [frac] + [0.0] * (k - full - 1))[:k]


def rate_from_al(al: float, k: int) -> float:
    """The acceptance rate ``(AL − 1) / K``."""
    return (al - 1) / k


def al_from_rate(rate: float, k: int) -> float:
    """AL from the acceptance rate: ``1 + rate · K``."""
    return 1 + rate * k


def al_from_rates(rates: Sequence[float]) -> float:
    """AL from per-position rates: ``1 + Σ p_i``.

    The sum is :func:`math.fsum`, the correctly rounded one, so that the answer does not depend
    on the order in which a caller happened to add the rates.
    """
    return 1 + math.fsum(rates)


def complete(k: int, *, acceptance_length: float | None = None,
             acceptance_rate: float | None = None,
             per_position_rates: Sequence[float] | None = None,
             ) -> tuple[float, float, tuple[float, ...], bool]:
    """``(AL, rate, rates, rates_derived)`` from whichever of them is stated.

    - AL stated: AL as stated, the rate from it; rates as stated, else the schedule from AL.
    - The rate stated: the rate as stated, AL ``= 1 + rate · K``; rates as stated, else derived.
    - Rates alone: rates as stated, AL ``= 1 + Σ rates``, the rate from that AL.

    The caller has validated the value (at most one of AL and the rate, rates that agree with
    it); stating nothing at all is a :class:`ValueError`.
    """
    # Integers (``acceptance_length: 3``) become floats, which they equal exactly, so that every
    # answer carries one type.
    if acceptance_length is not None:
        al = float(acceptance_length)
        rate = rate_from_al(al, k)
    elif acceptance_rate is not None:
        rate = float(acceptance_rate)
        al = al_from_rate(rate, k)
    elif per_position_rates is not None:
        al = al_from_rates(per_position_rates)
        rate = rate_from_al(al, k)
    else:
        raise ValueError("no acceptance stated: give an AL, an acceptance rate or rates")
    if per_position_rates is not None:
        return al, rate, tuple(float(r) for r in per_position_rates), False
    return al, rate, tuple(min_variance_rates(al, k)), True
