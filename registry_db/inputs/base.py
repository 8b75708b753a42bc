"""The building blocks of validation: a finding collector with typed field readers.

Profile sets (:mod:`registry_db.inputs.profile_set`) and inline values and pins
(:mod:`registry_db.inputs.inline`) are checked with the same readers, so that "an integer is an
integer literal", "a number is finite" and "a key not in the spec's tables is an error" are each
decided once. Readers report a problem and return None, so a check can go on and report the next
problem instead of stopping at the first.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any, Iterable, Sequence

from registry_db.errors import Finding
from registry_db.yaml.load import Position, key_pos, mark, pos, scalar_kind

_LEADING_ZERO_RE = re.compile(r"[-+]?0[0-9]+")
#: Integers are stored in 32-bit columns (PostgreSQL's INTEGER); larger ones are refused here
#: rather than by the database halfway through an import.
INT_LIMIT = 2**31 - 1

#: The spec's ``want`` names, as messages say them.
_WANTS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "list": "a list",
    "mapping": "a mapping",
}


def type_name(value: Any) -> str:
    """How a message names the type of a loaded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def is_int(value: Any) -> bool:
    """An integer literal: ``5`` yes; ``true``, ``5.0`` and ``"5"`` no."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An integer or a float, not a boolean (finiteness is checked separately)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def join(path: str, key: Any) -> str:
    """The key path of ``key`` under ``path``: ``a.b`` for keys, ``a[2]`` for indexes."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _hint(value: Any, want: str) -> str:
    """A short "how to fix" for the common wrong types."""
    if want in ("integer", "number") and isinstance(value, str):
        if _LEADING_ZERO_RE.fullmatch(value):
            return f"; a leading zero makes it text, so write {int(value)}"
        if scalar_kind(value) in ("int", "float"):
            return "; remove the quotes"
        return ""
    if want == "integer" and isinstance(value, float) and math.isfinite(value) \
            and value.is_integer():
        return f"; write {int(value)}, without the decimal point"
    if want == "string" and isinstance(value, bool):
        return "; quote it"
    if value is None:
        return "; give a value or remove the key"
    return ""


class Checker:
    """Collects the findings of one file (or one inline value) and reads typed fields."""

    def __init__(self, file: str):
        self.file = file
        self.findings: list[Finding] = []

    @property
    def errors(self) -> int:
        """How many findings so far are errors."""
        return sum(1 for f in self.findings if f.is_error)

    def error(self, where: Position, path: str, code: str, message: str,
              severity: str = "error") -> None:
        """Record one finding."""
        self.findings.append(Finding(file=self.file, line=where[0], column=where[1], path=path,
                                     code=code, message=message, severity=severity))

    def text_ok(self, value: str, where: Position, path: str, what: str) -> bool:
        """False, after reporting it, if ``value`` holds a NUL, which databases cannot store."""
        if "\x00" not in value:
            return True
        self.error(where, path, "bad_character", f"{what} contains a NUL character (\\0), which "
                   "the registry cannot store; remove it")
        return False

    def mapping(self, value: Any, where: Position, path: str, what: str,
                code: str = "not_a_mapping") -> bool:
        """True if ``value`` is a mapping; otherwise report it (as ``not_a_mapping``)."""
        if isinstance(value, dict):
            return True
        got = "nothing" if value is None and not path else type_name(value)
        self.error(where, path, code, f"{what} must be a mapping, got {got}")
        return False

    def unknown_keys(self, m: dict, known: Sequence[str], path: str) -> None:
        """Report every key of ``m`` that ``known`` lacks, naming the nearest known key."""
        for key in m:
            if key in known:
                continue
            text = str(key)
            near = difflib.get_close_matches(text, known, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]!r}?" if near else f"known keys: {', '.join(known)}"
            self.error(key_pos(m, key), join(path, text), "unknown_key",
                       f"unknown key {text!r}; {hint}")

    def field(self, m: dict, key: str, path: str, want: str, *, required: bool = False,
              missing: str = "missing_key", missing_message: str | None = None,
              nonfinite: str = "not_finite", nonempty: str | None = None,
              empty_message: str | None = None) -> Any:
        """Read ``m[key]`` as ``want``; report what is wrong and return None if anything is.

        ``missing`` names the code for an absent required key; ``nonempty``, for strings, the code
        for an empty (or blank) one, which then counts as absent. The messages default to the
        ``missing_message`` and then to a generic one.
        """
        where, sub = pos(m, key), join(path, key)
        if key not in m:
            if required:
                self.error(mark(m), sub, missing,
                           missing_message or f"{key} is required; add it ({_WANTS[want]})")
            return None
        value = m[key]
        ok = {
            "string": isinstance(value, str),
            "integer": is_int(value),
            "number": is_number(value),
            "list": isinstance(value, list),
            "mapping": isinstance(value, dict),
        }[want]
        if not ok:
            shown = f" {value!r}"[:42] if isinstance(value, (str, int, float)) else ""
            self.error(where, sub, "wrong_type", f"{key} must be {_WANTS[want]}, got "
                       f"{type_name(value)}{shown}{_hint(value, want)}")
            return None
        if want == "integer" and not -INT_LIMIT <= value <= INT_LIMIT:
            self.error(where, sub, "int_out_of_range", f"{key} is {value}, beyond what the "
                       f"registry stores (±{INT_LIMIT})")
            return None
        if want == "string" and not self.text_ok(value, where, sub, key):
            return None
        if want == "number" and not math.isfinite(value):
            self.error(where, sub, nonfinite,
                       f"{key} must be a finite number, got {value!r}")
            return None
        if want == "string" and not value.strip() and nonempty is not None:
            self.error(where, sub, nonempty, empty_message or missing_message
                       or f"{key} is empty; give it a value or remove the key")
            return None
        return value

    def numbers(self, seq: list, path: str, what: str) -> list[float] | None:
        """Every item of ``seq`` as a finite number, or None after reporting the others."""
        out: list[float] = []
        good = True
        for i, item in enumerate(seq):
            if not is_number(item):
                self.error(pos(seq, i), join(path, i), "wrong_type",
                           f"each of {what} must be a number, got {type_name(item)}")
                good = False
            elif not math.isfinite(item):
                self.error(pos(seq, i), join(path, i), "not_finite",
                           f"each of {what} must be a finite number, got {item!r}")
                good = False
            else:
                out.append(float(item))
        return out if good else None

    def rates(self, m: dict, path: str, k: int | None) -> tuple[float, ...] | None:
        """``m["per_position_rates"]``: K numbers in [0, 1], non-increasing (spec: Profiles).

        Returns the rates only when all of that holds; the sum against AL is the caller's check.
        """
        key = "per_position_rates"
        seq = self.field(m, key, path, "list")
        if seq is None:
            return None
        sub = join(path, key)
        values = self.numbers(seq, sub, key)
        good = values is not None
        if k is not None and len(seq) != k:
            self.error(pos(m, key), sub, "rates_count",
                       f"{key} has {len(seq)} entries but num_spec_tokens is {k}; give one rate "
                       "per speculative position")
            good = False
        if values is None:
            return None
        for i, r in enumerate(values):
            if not 0.0 <= r <= 1.0:
                self.error(pos(seq, i), join(sub, i), "rate_out_of_range",
                           f"rate {r!r} lies outside [0, 1]; each is a probability")
                good = False
        for i in range(1, len(values)):
            if values[i] > values[i - 1]:
                self.error(pos(seq, i), join(sub, i), "rates_rise",
                           f"rate {values[i]!r} at position {i + 1} is above the "
                           f"{values[i - 1]!r} before it; rates never rise, since p_i is the "
                           "chance that the first i drafts are all accepted")
                good = False
        return tuple(values) if good else None


def rates_sum_off(rates: Iterable[float], expected: float, tolerance: float) -> float | None:
    """How far the rates' sum lies from ``expected``, or None when it is within ``tolerance``."""
    total = math.fsum(rates)
    # A hair of slack so that a sum exactly 0.01 away, after float rounding, still passes.
    if abs(total - expected) <= tolerance + 1e-9:
        return None
    return total
