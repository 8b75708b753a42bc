"""AL ↔ rate ↔ per-position rates: exact conversions and vLLM's minimum-variance schedule."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry_db.resolve.rates import (
    al_from_rate,
    al_from_rates,
    complete,
    min_variance_rates,
    rate_from_al,
)


def vllm_acceptance_length_to_rates(acceptance_length: float, k: int) -> list[float]:
    """vLLM v0.31.0 vllm/config/speculative.py:557-564, transcribed as the oracle."""
    expected_accepted = acceptance_length - 1
    full = math.floor(expected_accepted)
    frac = expected_accepted - full
    rates = [1.0] * full + [frac] + [0.0] * (k - full - 1)
    return rates[:k]


@st.composite
def al_and_k(draw):
    k = draw(st.integers(min_value=1, max_value=16))
    al = draw(st.floats(min_value=1.0, max_value=k + 1.0, allow_nan=False))
    return al, k


def test_seed_example_is_the_spec_expression_unrounded():
    """4.07 at K 5: three full positions and frac(3.07), not a rounded 0.07."""
    rates = min_variance_rates(4.07, 5)
    assert rates == [1.0, 1.0, 1.0, 4.07 - 1 - 3, 0.0]
    assert rates[3] != 0.07  # float subtraction, kept as is: 0.07000000000000028


@pytest.mark.parametrize("al,k,expected", [
    (1.0, 3, [0.0, 0.0, 0.0]),
    (2.5, 3, [1.0, 0.5, 0.0]),
    (4.0, 3, [1.0, 1.0, 1.0]),   # AL = K + 1: every draft accepted, the extra 0 truncated away
    (3.0, 3, [1.0, 1.0, 0.0]),
    (1.25, 1, [0.25]),
    (2.0, 1, [1.0]),
])
def test_min_variance_examples(al, k, expected):
    assert min_variance_rates(al, k) == expected


@given(al_and_k())
def test_min_variance_matches_vllm_bit_for_bit(case):
    al, k = case
    assert min_variance_rates(al, k) == vllm_acceptance_length_to_rates(al, k)


@given(al_and_k())
def test_min_variance_is_a_valid_schedule(case):
    al, k = case
    rates = min_variance_rates(al, k)
    assert len(rates) == k
    assert all(0.0 <= r <= 1.0 for r in rates)
    assert all(a >= b for a, b in zip(rates, rates[1:]))
    assert math.isclose(sum(rates), al - 1, abs_tol=1e-9)


def test_al_rate_conversions_are_the_plain_expressions():
    assert rate_from_al(4.07, 5) == (4.07 - 1) / 5
    assert al_from_rate(0.6, 3) == 1 + 0.6 * 3
    assert al_from_rates([1.0, 0.5, 0.25]) == 2.75
    assert rate_from_al(1.0, 4) == 0.0 and rate_from_al(5.0, 4) == 1.0
    assert al_from_rate(0.0, 4) == 1.0 and al_from_rate(1.0, 4) == 5.0


def test_al_from_rates_is_the_correctly_rounded_sum():
    rates = [0.9, 0.7, 0.6, 0.1]
    assert al_from_rates(rates) == 3.3  # fsum; a left-to-right sum gives 3.3000000000000003
    assert al_from_rates(rates) == al_from_rates(rates[::-1])


@given(al_and_k())
def test_al_rate_round_trip_is_close(case):
    al, k = case
    assert math.isclose(al_from_rate(rate_from_al(al, k), k), al, rel_tol=1e-12, abs_tol=1e-12)


def test_complete_al_stated():
    al, rate, rates, derived = complete(5, acceptance_length=4.07)
    assert (al, rate, rates, derived) == (4.07, (4.07 - 1) / 5, tuple(min_variance_rates(4.07, 5)),
                                          True)


def test_complete_rate_stated_keeps_the_rate_exactly():
    al, rate, rates, derived = complete(3, acceptance_rate=0.6)
    assert rate == 0.6
    assert al == 1 + 0.6 * 3
    assert rates == tuple(min_variance_rates(1 + 0.6 * 3, 3)) and derived


def test_complete_rates_alone_state_al():
    al, rate, rates, derived = complete(3, per_position_rates=[0.9, 0.7, 0.4])
    assert rates == (0.9, 0.7, 0.4) and not derived
    assert al == 1 + math.fsum([0.9, 0.7, 0.4])
    assert rate == (al - 1) / 3


def test_complete_al_and_rates_both_as_stated():
    # The rates sum to 2.0 and AL says 3.005: both agree within the spec's 0.01 and both are kept.
    al, rate, rates, derived = complete(3, acceptance_length=3.005,
                                        per_position_rates=[1.0, 0.6, 0.4])
    assert al == 3.005 and rates == (1.0, 0.6, 0.4) and not derived
    assert rate == (3.005 - 1) / 3


def test_complete_rate_and_rates_keep_both():
    al, rate, rates, derived = complete(2, acceptance_rate=0.75, per_position_rates=[1.0, 0.5])
    assert rate == 0.75 and al == 2.5 and rates == (1.0, 0.5) and not derived


def test_complete_integers_become_floats():
    al, rate, rates, _ = complete(2, acceptance_length=3)
    assert type(al) is float and al == 3.0
    assert all(type(r) is float for r in rates)


def test_complete_needs_a_quantity():
    with pytest.raises(ValueError, match="no acceptance stated"):
        complete(3)
