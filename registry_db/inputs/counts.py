"""A profile's ``counts`` (contract, third round: a registry_db extension of the spec) as a
:mod:`registry_db.inputs.schema` table, with every rule that ties them to K, AL and the rates.

:data:`COUNTS` is read with the enclosing mapping's fields as ``outer``: a profile's K, AL and
per-position rates, read before it. A rule whose other side is absent or invalid (no K, no
stated rates) is not checked, so the same table also reads counts that come without a profile.
"""

from __future__ import annotations

from typing import Any

from registry_db.inputs.readers import count_check, negative_message
from registry_db.inputs.schema import Check, Checker, Field, Map, is_int, join, type_name
from registry_db.model import COUNT_LIMIT, COUNTS_KEYS, SUM_TOLERANCE, Counts
from registry_db.yaml.nodes import mark, pos

__all__ = ["COUNTS", "read_counts"]

#: What each count is, as the message for a missing one says it.
_MEANING = {"drafts": "the verification steps that drafted",
            "draft_tokens": "the tokens drafted",
            "accepted_tokens": "the drafted tokens accepted"}


def _count(key: str, *checks: Check) -> Field:
    """A required count: an integer, not negative, in a 64-bit column."""
    return Field(key, "integer", required=True, missing="missing_count", bound=COUNT_LIMIT,
                 missing_message=f"counts has no {key}; give it ({_MEANING[key]})",
                 checks=(count_check(key), *checks))


def _drafted_within_k(v: int, got: dict) -> str | None:
    k, d = got.get("num_spec_tokens"), got.get("drafts")
    if k is None or d is None or v <= k * d:
        return None
    return (f"draft_tokens {v} is more than K x drafts = {k} x {d} = {k * d}; a step drafts "
            "at most K tokens")


def _accepted_within_drafted(v: int, got: dict) -> str | None:
    drafted = got.get("draft_tokens")
    if drafted is None or v <= drafted:
        return None
    return f"accepted_tokens {v} is more than draft_tokens {drafted}; only a drafted token " \
           "can be accepted"


def _positions(ck: Checker, seq: list, m: dict, sub: str, got: dict) -> tuple[int, ...] | None:
    """``accepted_per_position``: K counts, a_i the steps that accepted at least i drafts, so
    non-increasing, each at most ``drafts``, summing to ``accepted_tokens``."""
    key, k, d = "accepted_per_position", got.get("num_spec_tokens"), got.get("drafts")
    good = True
    if k is not None and len(seq) != k:
        ck.error(pos(m, key), sub, "positions_count",
                 f"{key} has {len(seq)} entries but num_spec_tokens is {k}; give one count per "
                 "speculative position")
        good = False
    values: list[int] = []
    for i, item in enumerate(seq):
        if not is_int(item):
            ck.error(pos(seq, i), join(sub, i), "wrong_type",
                     f"each of {key} must be an integer, got {type_name(item)} {item!r}"[:100])
        elif item < 0:
            ck.error(pos(seq, i), join(sub, i), "negative_count",
                     negative_message(f"{key}[{i}]", item))
        elif item > COUNT_LIMIT:
            ck.error(pos(seq, i), join(sub, i), "int_out_of_range",
                     f"{key}[{i}] is {item}, beyond what the registry stores ({COUNT_LIMIT})")
        else:
            values.append(item)
            continue
        good = False
    if len(values) != len(seq):
        return None
    for i, a in enumerate(values):
        if i and a > values[i - 1]:
            ck.error(pos(seq, i), join(sub, i), "positions_rise",
                     f"{a} steps accepted {i + 1} or more drafts, more than the "
                     f"{values[i - 1]} that accepted {i} or more; the counts never rise")
            good = False
        elif d is not None and a > d:
            ck.error(pos(seq, i), join(sub, i), "position_above_drafts",
                     f"{a} steps accepted {i + 1} or more drafts, but only {d} steps "
                     "drafted (drafts)")
            good = False
    accepted = got.get("accepted_tokens")
    if good and accepted is not None and sum(values) != accepted:
        ck.error(pos(m, key), sub, "positions_sum",
                 f"{key} sums to {sum(values)} but accepted_tokens is {accepted}; each "
                 "accepted token is counted at its position once")
        good = False
    return tuple(values) if good else None


def _al_agrees(ck: Checker, m: dict, path: str, got: dict) -> None:
    """The stated AL is 1 + accepted_tokens / drafts within 0.01 (AL is often rounded)."""
    al, d, a = got.get("acceptance_length"), got["drafts"], got["accepted_tokens"]
    if al is None or d is None or a is None:
        return
    implied = 1 + a / d
    if abs(al - implied) > SUM_TOLERANCE + 1e-9:
        ck.error(mark(m), path, "al_disagrees_with_counts",
                 f"acceptance_length is {al!r} but the counts give 1 + accepted_tokens / drafts "
                 f"= 1 + {a} / {d} = {implied:.4f}; they must agree within {SUM_TOLERANCE}")


def _rates_agree(ck: Checker, m: dict, path: str, got: dict) -> None:
    """Stated per-position rates are accepted_per_position[i] / drafts within 0.01."""
    rates, counts, d = got.get("per_position_rates"), got["accepted_per_position"], got["drafts"]
    if rates is None or counts is None or d is None or len(rates) != len(counts):
        return
    off = [i for i, (r, a) in enumerate(zip(rates, counts))
           if abs(r - a / d) > SUM_TOLERANCE + 1e-9]
    if off:
        i, sub = off[0], join(path, "accepted_per_position")
        more = f" (and {len(off) - 1} more position(s))" if len(off) > 1 else ""
        ck.error(pos(m["accepted_per_position"], i), join(sub, i), "rates_disagree_with_counts",
                 f"per_position_rates[{i}] is {rates[i]!r} but accepted_per_position[{i}] / "
                 f"drafts = {counts[i]} / {d} = {counts[i] / d:.4f}{more}; they must agree "
                 f"within {SUM_TOLERANCE}")


COUNTS = Map("counts", keys=COUNTS_KEYS, compiled=True, steps=(
    _count("drafts", Check("no_drafts", lambda v, got: None if v >= 1 else
                           "drafts is 0; counts come from at least one step that drafted",
                           {"minimum": 1})),
    _count("draft_tokens", Check("drafted_above_k", _drafted_within_k)),
    _count("accepted_tokens", Check("accepted_above_drafted", _accepted_within_drafted)),
    Field("accepted_per_position", "list", content=_positions, shape={"items": {
        "type": "integer", "minimum": 0, "maximum": COUNT_LIMIT}}),
    _al_agrees,
    _rates_agree,
), build=lambda g: Counts(g["drafts"], g["draft_tokens"], g["accepted_tokens"],
                          g["accepted_per_position"]))


def read_counts(ck: Checker, raw: dict, m: dict, sub: str, got: dict) -> Any:
    """A row's ``content``: the counts under ``sub``, checked against the fields read before."""
    return COUNTS.load(ck, raw, sub, outer=got)
