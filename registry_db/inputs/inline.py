"""Checks of inline acceptance values and scenario pins (spec: "Inline values", "Scenario pin").

A workload's ``acceptance``, a scenario's ``acceptance`` pin and a command line's value are
checked here, whether they came from a YAML file (positions are reported) or from a JSON line of
``registry resolve --batch`` (positions are unknown and reported as 0:0). Whether the value's K
matches a deployment is the resolver's check (``k_mismatch``), not this module's.
"""

from __future__ import annotations

from typing import Any

from registry_db.errors import Finding
from registry_db.model import CATEGORY_RE, INLINE_KEYS, PIN_KEYS, SUM_TOLERANCE, InlineValue, Pin
from registry_db.inputs.base import Checker, join, rates_sum_off
from registry_db.yaml.load import mark, pos


def check_inline_value(doc: Any, file: str, path: str) -> tuple[InlineValue | None, list[Finding]]:
    """Check one inline value found at key path ``path`` of ``file``.

    The value comes back only when nothing is wrong. Quantities are kept as stated (none is
    derived from another here).
    """
    ck = Checker(file)
    value = _inline(ck, doc, path)
    return value, ck.findings


def check_pin(doc: Any, file: str, path: str) -> tuple[Pin | None, list[Finding]]:
    """Check a scenario's ``acceptance`` pin found at key path ``path`` of ``file``."""
    ck = Checker(file)
    if not ck.mapping(doc, mark(doc), path, "an acceptance pin"):
        return None, ck.findings
    ck.unknown_keys(doc, PIN_KEYS, path)
    if not any(key in doc for key in PIN_KEYS):
        ck.error(mark(doc), path, "empty_pin",
                 "the pin sets nothing; give profiles, value or fallback_category, or remove it")
    profiles = ck.field(doc, "profiles", path, "string", nonempty="empty_value")
    fallback = ck.field(doc, "fallback_category", path, "string", nonempty="empty_value")
    if fallback is not None and not CATEGORY_RE.fullmatch(fallback):
        ck.error(pos(doc, "fallback_category"), join(path, "fallback_category"), "bad_category",
                 f"fallback_category {fallback!r} is malformed; use lower-case letters, digits, "
                 "'_' and '-', such as coding")
        fallback = None
    value = None
    if "value" in doc:
        for other, code in (("profiles", "profiles_with_value"),
                            ("fallback_category", "fallback_with_value")):
            if other in doc:
                ck.error(pos(doc, other), join(path, other), code,
                         f"the pin sets both {other} and value; a stated value needs no profile "
                         f"set, so keep one of them")
        value = _inline(ck, doc["value"], join(path, "value"), where=pos(doc, "value"))
    if ck.errors:
        return None, ck.findings
    return Pin(profiles=profiles, value=value, fallback_category=fallback), ck.findings


def _inline(ck: Checker, doc: Any, path: str, where: tuple[int, int] | None = None
            ) -> InlineValue | None:
    before = ck.errors
    if not ck.mapping(doc, where or mark(doc), path, "an acceptance value"):
        return None
    ck.unknown_keys(doc, INLINE_KEYS, path)
    k = ck.field(doc, "num_spec_tokens", path, "integer", required=True,
                 missing_message="num_spec_tokens is required; a value names the K it was "
                                 "stated for")
    if k is not None and k < 1:
        ck.error(pos(doc, "num_spec_tokens"), join(path, "num_spec_tokens"), "bad_k",
                 f"num_spec_tokens is {k}; K is at least 1")
        k = None
    stated = [key for key in INLINE_KEYS[1:4] if key in doc]
    if not stated:
        ck.error(mark(doc), path, "no_acceptance",
                 "the value states no acceptance; give acceptance_length, acceptance_rate or "
                 "per_position_rates")
    if "acceptance_length" in doc and "acceptance_rate" in doc:
        ck.error(pos(doc, "acceptance_rate"), join(path, "acceptance_rate"), "length_and_rate",
                 "the value states both acceptance_length and acceptance_rate; one determines "
                 "the other, so keep one")
    al = ck.field(doc, "acceptance_length", path, "number", nonfinite="al_not_finite")
    if al is not None and k is not None and not 1 <= al <= k + 1:
        ck.error(pos(doc, "acceptance_length"), join(path, "acceptance_length"),
                 "al_out_of_range", f"acceptance_length {al!r} lies outside [1, {k + 1}] for "
                 f"K = {k}; AL counts the bonus token, so it is at least 1 and at most K + 1")
        al = None
    rate = ck.field(doc, "acceptance_rate", path, "number")
    if rate is not None and not 0 <= rate <= 1:
        ck.error(pos(doc, "acceptance_rate"), join(path, "acceptance_rate"),
                 "acceptance_rate_out_of_range",
                 f"acceptance_rate {rate!r} lies outside [0, 1]; it is (AL - 1) / K")
        rate = None
    rates = ck.rates(doc, path, k)
    if rates is not None and k is not None:
        # Both checks compare the accepted drafts per step, AL - 1 = rate * K, with the sum.
        for stated_as, implied in (("acceptance_length", None if al is None else al - 1),
                                   ("acceptance_rate", None if rate is None else rate * k)):
            total = None if implied is None else rates_sum_off(rates, implied, SUM_TOLERANCE)
            if total is not None:
                ck.error(pos(doc, "per_position_rates"), join(path, "per_position_rates"),
                         "rates_sum", f"per_position_rates sum to {total:.4g} but {stated_as} "
                         f"implies {implied:.4g} accepted drafts per step; they must agree "
                         f"within {SUM_TOLERANCE}")
    source = ck.field(doc, "source", path, "string", nonempty="empty_value")
    if ck.errors > before or k is None:
        return None
    return InlineValue(num_spec_tokens=k,
                       acceptance_length=None if al is None else float(al),
                       acceptance_rate=None if rate is None else float(rate),
                       per_position_rates=rates, source=source)
