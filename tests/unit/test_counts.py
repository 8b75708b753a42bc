"""Counts on a profile, without a database: the uncertainty they give (a case computed by hand),
the drift z, the content hash, and reading them (each rule has its file in tests/data/invalid;
these are the cases a file cannot show, and the round trip through the file format)."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_db.inputs.counts import COUNTS
from registry_db.inputs.profile_set import check_profile_set
from registry_db.inputs.schema import Checker
from registry_db.model import (
    COUNT_LIMIT,
    Counts,
    Profile,
    ProfileSet,
    Provenance,
    Sampling,
    z_score,
)
from registry_db.yaml.load import load_yaml
from registry_db.yaml.render import render_set

#: Four steps at K = 3 that accepted X = 0, 1, 3 and 2 drafts: D = 4, A = 6; a_i counts the
#: steps with X >= i: a = (3, 2, 1). By hand: mean 1.5, E[X^2] = (0 + 1 + 9 + 4) / 4 = 3.5, so
#: Var X = 3.5 - 2.25 = 1.25 and stderr = sqrt(1.25 / 4); the bound is 1.5 (3 - 1.5) = 2.25,
#: stderr sqrt(2.25 / 4) = 0.75.
SMALL = Counts(drafts=4, draft_tokens=12, accepted_tokens=6, accepted_per_position=(3, 2, 1))
SMALL_EXACT = math.sqrt(1.25 / 4)
SMALL_BOUND = 0.75

#: The contract's example (K = 3).
EXAMPLE = Counts(84142, 252426, 126838, (70000, 40000, 16838))


def _by_hand(c: Counts, k: int) -> tuple[float, float]:
    """The exact and the bounding stderr in exact rational arithmetic, then one square root."""
    d, mu = c.drafts, Fraction(c.accepted_tokens, c.drafts)
    assert c.accepted_per_position is not None
    second = Fraction(sum((2 * i - 1) * a for i, a in enumerate(c.accepted_per_position, 1)), d)
    return (math.sqrt((second - mu * mu) / d), math.sqrt(mu * (k - mu) / d))


def test_the_uncertainty_matches_a_case_computed_by_hand():
    u = SMALL.uncertainty(3)
    assert (u.drafts, u.exact) == (4, True)
    assert abs(u.stderr - SMALL_EXACT) < 1e-12
    bound = replace(SMALL, accepted_per_position=None).uncertainty(3)
    assert (bound.drafts, bound.exact, bound.stderr) == (4, False, SMALL_BOUND)
    assert bound.to_json() == {"drafts": 4, "stderr": 0.75, "exact": False}
    exact, most = _by_hand(EXAMPLE, 3)
    assert abs(EXAMPLE.uncertainty(3).stderr - exact) < 1e-12
    assert abs(replace(EXAMPLE, accepted_per_position=None).uncertainty(3).stderr - most) < 1e-12
    # The bound is the largest variance the totals allow, so never below the exact figure.
    assert most >= exact


def test_z_is_the_difference_over_the_combined_stderr():
    assert z_score(2.0, 0.3, 2.5, 0.4) == 0.5 / 0.5
    assert z_score(2.5, 0.4, 2.0, 0.3) == -1.0
    assert z_score(2.0, 0.0, 2.5, 0.0) is None  # no spread to measure the move by


def test_counts_join_the_content_hash_only_when_known():
    base = Profile("m", "mtp", 3, "on", "coding", 2.5, "assumed", rationale="r")
    old = ProfileSet("s", (), (base,)).content_hash()
    with_counts = ProfileSet("s", (), (replace(base, counts=SMALL),)).content_hash()
    assert with_counts != old
    assert "counts" not in base.canonical()
    # The hash this set had before counts existed (model.py of 97e281b, the commit before
    # Counts): a registry imported then stays `unchanged` on re-import.
    assert old == "43d083afb6b1ab9a1df11e766c874d5b70112125fe1440c9afcc09a10d21290b"


def _read(doc: dict, outer: dict | None = None) -> tuple[Counts | None, list[str]]:
    ck = Checker("x.json")
    got = COUNTS.load(ck, doc, "counts", outer=outer)
    return got, [f.code for f in ck.findings]


def test_counts_without_a_profile_skip_the_rules_that_need_one():
    """A ``registry check --batch`` line's counts come with no AL or rates: only their own
    rules (and K's, when given) apply."""
    doc = {"drafts": 4, "draft_tokens": 12, "accepted_tokens": 6,
           "accepted_per_position": [3, 2, 1]}
    assert _read(doc) == (SMALL, [])
    assert _read(doc, {"num_spec_tokens": 2})[1] == ["drafted_above_k", "positions_count"]
    assert _read({**doc, "accepted_tokens": True})[1] == ["wrong_type"]
    assert _read({**doc, "drafts": "4"})[1] == ["wrong_type"]
    assert _read({**doc, "draft_tokens": 12.0})[1] == ["wrong_type"]


def test_counts_take_64_bit_values_up_to_the_limit():
    ok = {"drafts": COUNT_LIMIT, "draft_tokens": COUNT_LIMIT, "accepted_tokens": COUNT_LIMIT}
    assert _read(ok)[1] == []
    assert _read({**ok, "accepted_per_position": [COUNT_LIMIT + 1]})[1] == ["int_out_of_range"]


def test_every_broken_entry_of_the_per_position_counts_is_reported():
    doc = {"drafts": 10, "draft_tokens": 30, "accepted_tokens": 6,
           "accepted_per_position": [1, "2", -1, True]}
    assert _read(doc, {"num_spec_tokens": 3})[1] == [
        "positions_count", "wrong_type", "negative_count", "wrong_type"]


# --- the file format, both ways -------------------------------------------------------------------

@st.composite
def counted_profiles(draw):
    """A measured profile whose AL and rates are what its random counts give."""
    k = draw(st.integers(1, 6))
    d = draw(st.integers(1, 10**12))
    per = sorted(draw(st.lists(st.integers(0, d), min_size=k, max_size=k)), reverse=True)
    a = sum(per)
    drafted = draw(st.integers(a, k * d))
    known = draw(st.booleans())
    rates = tuple(x / d for x in per) if known and draw(st.booleans()) else None
    return Profile(
        "m", "mtp", k, "on", f"c{k}", 1 + a / d, "measured", per_position_rates=rates,
        provenance=Provenance("https://e/run", hardware="b300", engine_image="img",
                              sampling=Sampling(1.0)),
        counts=Counts(d, drafted, a, tuple(per) if known else None))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(counted_profiles(), min_size=1, max_size=4, unique_by=lambda p: p.key))
def test_counts_survive_render_load_check_unchanged(profiles):
    original = ProfileSet("counted", (), tuple(profiles), file="counted.yaml")
    checked, findings = check_profile_set(load_yaml(render_set(original), "counted.yaml"),
                                          "counted.yaml")
    assert findings == []
    assert checked == original
    assert checked.content_hash() == original.content_hash()
