"""The schemas of inline acceptance values and scenario pins (spec: "Inline values", "Scenario
pin"), as :mod:`registry_db.inputs.schema` tables.

A workload's ``acceptance``, a scenario's ``acceptance`` pin and a command line's value are
checked here, whether they came from a YAML file (positions are reported) or from a JSON line of
``registry resolve --batch`` (positions are unknown and reported as 0:0). Whether the value's K
matches the run's is the resolver's check (``k_mismatch``), not this module's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from registry_db.errors import Finding
from registry_db.inputs.readers import (
    AL_RANGE,
    K_RANGE,
    RATES_SHAPE,
    category_check,
    rates,
    rates_sum_off,
)
from registry_db.inputs.schema import (
    Check,
    Checker,
    Field,
    Map,
    join,
)
from registry_db.model import INLINE_KEYS, PIN_KEYS, SUM_TOLERANCE, InlineValue, Pin, Refusal
from registry_db.model import RefusalReason as R
from registry_db.yaml.nodes import mark, pos


def check_inline_value(doc: Any, file: str, path: str) -> tuple[InlineValue | None, list[Finding]]:
    """Check one inline value found at key path ``path`` of ``file``.

    The value comes back only when nothing is wrong. Quantities are kept as stated (none is
    derived from another here).
    """
    ck = Checker(file)
    return INLINE_VALUE.load(ck, doc, path), ck.findings


def check_pin(doc: Any, file: str, path: str) -> tuple[Pin | None, list[Finding]]:
    """Check a scenario's ``acceptance`` pin found at key path ``path`` of ``file``."""
    ck = Checker(file)
    return PIN.load(ck, doc, path), ck.findings


# --- inline value --------------------------------------------------------------------------------

_QUANTITIES = INLINE_KEYS[1:4]  # acceptance_length, acceptance_rate, per_position_rates


def _states_acceptance(ck: Checker, m: dict, path: str, got: dict) -> None:
    if not any(key in m for key in _QUANTITIES):
        ck.error(mark(m), path, "no_acceptance",
                 "the value states no acceptance; give acceptance_length, acceptance_rate or "
                 "per_position_rates")
    if "acceptance_length" in m and "acceptance_rate" in m:
        ck.error(pos(m, "acceptance_rate"), join(path, "acceptance_rate"), "length_and_rate",
                 "the value states both acceptance_length and acceptance_rate; one determines "
                 "the other, so keep one")


def _rates_agree(ck: Checker, m: dict, path: str, got: dict) -> None:
    # Both checks compare the accepted drafts per step, AL - 1 = rate * K, with the sum.
    rates_, k, al, rate = (got["per_position_rates"], got["num_spec_tokens"],
                           got["acceptance_length"], got["acceptance_rate"])
    if rates_ is None or k is None:
        return
    for stated_as, implied in (("acceptance_length", None if al is None else al - 1),
                               ("acceptance_rate", None if rate is None else rate * k)):
        total = None if implied is None else rates_sum_off(rates_, implied, SUM_TOLERANCE)
        if total is not None:
            ck.error(pos(m, "per_position_rates"), join(path, "per_position_rates"),
                     "rates_sum", f"per_position_rates sum to {total:.4g} but {stated_as} "
                     f"implies {implied:.4g} accepted drafts per step; they must agree "
                     f"within {SUM_TOLERANCE}")


INLINE_VALUE = Map("an acceptance value", keys=INLINE_KEYS, steps=(
    Field("num_spec_tokens", "integer", required=True, checks=(K_RANGE,),
          missing_message="num_spec_tokens is required; a value names the K it was stated for"),
    _states_acceptance,
    Field("acceptance_length", "number", nonfinite="al_not_finite", checks=(AL_RANGE,)),
    Field("acceptance_rate", "number", checks=(
        Check("acceptance_rate_out_of_range", lambda v, got: None if 0 <= v <= 1 else
              f"acceptance_rate {v!r} lies outside [0, 1]; it is (AL - 1) / K",
              {"minimum": 0, "maximum": 1}),)),
    Field("per_position_rates", "list", content=rates, shape=RATES_SHAPE),
    _rates_agree,
    Field("source", "string", blank="empty_value", limit="source"),
), also=(  # _states_acceptance
    {"anyOf": [{"required": [key]} for key in _QUANTITIES]},
    {"not": {"required": ["acceptance_length", "acceptance_rate"]}},
), build=lambda g: InlineValue(
    num_spec_tokens=g["num_spec_tokens"],
    acceptance_length=None if g["acceptance_length"] is None else float(g["acceptance_length"]),
    acceptance_rate=None if g["acceptance_rate"] is None else float(g["acceptance_rate"]),
    per_position_rates=g["per_position_rates"], source=g["source"]))


# --- pin -----------------------------------------------------------------------------------------

def _sets_something(ck: Checker, m: dict, path: str, got: dict) -> None:
    if not any(key in m for key in PIN_KEYS):
        ck.error(mark(m), path, "empty_pin",
                 "the pin sets nothing; give profiles, value or fallback_category, or remove it")


def _value(ck: Checker, m: dict, path: str, got: dict) -> None:
    """``value``, an inline value, which needs no profile set and no fallback beside it."""
    if "value" not in m:
        got["value"] = None
        return
    for other, code in (("profiles", "profiles_with_value"),
                        ("fallback_category", "fallback_with_value")):
        if other in m:
            ck.error(pos(m, other), join(path, other), code,
                     f"the pin sets both {other} and value; a stated value needs no profile "
                     f"set, so keep one of them")
    got["value"] = INLINE_VALUE.load(ck, m["value"], join(path, "value"), pos(m, "value"))


PIN = Map("an acceptance pin", keys=PIN_KEYS, steps=(
    _sets_something,
    Field("profiles", "string", blank="empty_value"),
    Field("fallback_category", "string", blank="empty_value", limit="category",
          checks=(category_check("fallback_category"),)),
    _value,
), also=(  # _sets_something and _value
    {"anyOf": [{"required": [key]} for key in PIN_KEYS]},
    {"properties": {"value": INLINE_VALUE},
     "dependentSchemas": {"value": {"not": {"anyOf": [{"required": ["profiles"]},
                                                      {"required": ["fallback_category"]}]}}}},
), build=lambda g: Pin(profiles=g["profiles"], value=g["value"],
                       fallback_category=g["fallback_category"]))


def invalid_value(layer: str, findings: Iterable[Finding]) -> Refusal:
    """The refusal for a stated value (or, at the scenario layer, a pin) that breaks the spec."""
    what = "pin" if layer == "scenario" else "value"
    return Refusal(R.INVALID_VALUE, f"the {layer} layer's {what} is invalid: {describe(findings)}")


def describe(findings: Iterable[Finding]) -> str:
    """Findings as one message: ``FILE:LINE:COL: PATH: MESSAGE`` where positions are known."""
    return "\n".join(f.render() if f.line else f"{f.path}: {f.message}"
                     for f in findings if f.is_error)
