"""The spec's vocabulary, in one place.

Everything here comes from ``acceptance-profiles.md``: the kinds, the thinking modes, the methods
and what each requires, the keys each mapping may hold, the category and ``copied_from`` formats,
and the small frozen dataclasses a validated document becomes. Validation, import, resolution and
export all speak these names; none of them restates a rule.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

KIND = "AcceptanceProfileSet"
THINKING_MODES: tuple[str, ...] = ("on", "off")

#: Rates must sum to AL − 1 within this, and inline quantities agree within this.
SUM_TOLERANCE = 0.01

CATEGORY_RE = re.compile(r"^[a-z0-9_-]+$")
#: ``model/method/k<K>/thinking-<mode>/category``; model and method may not contain ``/``.
COPIED_FROM_RE = re.compile(
    r"^(?P<model>[^/\s]+)/(?P<method>[^/\s]+)/k(?P<k>[1-9][0-9]*)"
    r"/thinking-(?P<thinking>on|off)/(?P<category>[a-z0-9_-]+)$"
)


@dataclass(frozen=True)
class MethodRule:
    """What a value-obtaining method requires of a profile (the spec's Profiles table)."""

    name: str
    description: str
    allowed_in_profile: bool = True
    requires_provenance: bool = True
    requires_rationale: bool = True
    requires_copied_from: bool = False
    requires_measurement: bool = False  # hardware, engine_image and sampling in the provenance


METHODS: dict[str, MethodRule] = {
    m.name: m
    for m in (
        MethodRule("measured", "Measured on real hardware by a benchmark run.",
                   requires_rationale=False, requires_measurement=True),
        MethodRule("literature", "Read from a paper or a published report."),
        MethodRule("vendor_spec", "Stated by a vendor's documentation."),
        MethodRule("copied", "Copied from another profile; copied_from names it.",
                   requires_copied_from=True),
        MethodRule("assumed", "Assumed without a source; the rationale explains it.",
                   requires_provenance=False),
        MethodRule("not_charged", "Not a value: speculative decoding is not charged.",
                   allowed_in_profile=False),
    )
}
PROFILE_METHODS: tuple[str, ...] = tuple(n for n, m in METHODS.items() if m.allowed_in_profile)

LAYERS: tuple[str, ...] = ("registry", "workload", "scenario", "cli")

REFUSAL_REASONS: tuple[str, ...] = (
    "no_thinking",
    "no_category",
    "no_match",
    "fallback_no_match",
    "conflict",
    "unknown_set",
    "k_mismatch",
    "invalid_value",
    "invalid_request",
)

# The keys each mapping may hold, in the order the spec lists them (export writes this order).
SET_KEYS: tuple[str, ...] = ("kind", "name", "caveats", "profiles")
PROFILE_KEY_FIELDS: tuple[str, ...] = (
    "model", "speculative_method", "num_spec_tokens", "thinking", "category",
)
PROFILE_KEYS: tuple[str, ...] = PROFILE_KEY_FIELDS + (
    "acceptance_length", "per_position_rates", "method", "provenance", "rationale", "copied_from",
)
PROVENANCE_KEYS: tuple[str, ...] = (
    "source", "run", "benchmark", "prompts", "hardware", "engine_image", "tp", "sampling",
    "settings",
)
SAMPLING_KEYS: tuple[str, ...] = ("temperature", "top_p", "top_k", "max_tokens")
INLINE_KEYS: tuple[str, ...] = (
    "num_spec_tokens", "acceptance_length", "acceptance_rate", "per_position_rates", "source",
)
PIN_KEYS: tuple[str, ...] = ("profiles", "value", "fallback_category")
WORKLOAD_KEYS: tuple[str, ...] = ("thinking", "category", "acceptance")

#: A setting's value is a scalar; its type is kept so that export writes it back as it came.
SETTING_TYPES: tuple[str, ...] = ("string", "integer", "number", "boolean")


def profile_label(model: str, method: str, k: int, thinking: str, category: str) -> str:
    """The spec's name for one profile: ``model/method/k<K>/thinking-<mode>/category``."""
    return f"{model}/{method}/k{k}/thinking-{thinking}/{category}"


def setting_type(value: Any) -> str:
    """The stored type name of a setting's scalar value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def setting_text(value: Any) -> str:
    """A setting's value as stored text; :func:`setting_value` reads it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def setting_value(text: str, type_: str) -> Any:
    """The inverse of :func:`setting_text`."""
    if type_ == "boolean":
        return text == "true"
    if type_ == "integer":
        return int(text)
    if type_ == "number":
        return float(text)
    return text


@dataclass(frozen=True)
class Sampling:
    """``provenance.sampling``: the decoding configuration of a measurement."""

    temperature: float
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Provenance:
    """Where a value was measured or read. One database row per distinct provenance."""

    source: str
    run: str | None = None
    benchmark: str | None = None
    prompts: int | None = None
    hardware: str | None = None
    engine_image: str | None = None
    tp: int | None = None
    sampling: Sampling | None = None
    #: ``(name, value)`` pairs in file order; values are str, int, float or bool.
    settings: tuple[tuple[str, Any], ...] = ()

    def canonical(self) -> dict[str, Any]:
        """A JSON-able form that is equal exactly when two provenances are the same content."""
        out: dict[str, Any] = {k: getattr(self, k) for k in PROVENANCE_KEYS[:7]}
        out["sampling"] = None if self.sampling is None else {
            k: getattr(self.sampling, k) for k in SAMPLING_KEYS
        }
        out["settings"] = sorted([n, setting_type(v), setting_text(v)] for n, v in self.settings)
        return out

    def content_hash(self) -> str:
        """SHA-256 of :meth:`canonical`: the provenance's identity in the database."""
        return _hash(self.canonical())


class Keyed:
    """The profile key and its label, for anything with the five key fields."""

    model: str
    speculative_method: str
    num_spec_tokens: int
    thinking: str
    category: str

    @property
    def key(self) -> tuple[str, str, int, str, str]:
        """The profile key (without the set)."""
        return (self.model, self.speculative_method, self.num_spec_tokens, self.thinking,
                self.category)

    @property
    def label(self) -> str:
        """The spec's ``model/method/k<K>/thinking-<mode>/category`` name."""
        return profile_label(*self.key)


@dataclass(frozen=True)
class Profile(Keyed):
    """One validated profile of a set."""

    model: str
    speculative_method: str
    num_spec_tokens: int
    thinking: str
    category: str
    acceptance_length: float
    method: str
    per_position_rates: tuple[float, ...] | None = None
    provenance: Provenance | None = None
    rationale: str | None = None
    copied_from: str | None = None

    def canonical(self) -> dict[str, Any]:
        """A JSON-able form used for the set's content hash."""
        return {
            "key": list(self.key),
            "acceptance_length": self.acceptance_length,
            "method": self.method,
            "per_position_rates": None if self.per_position_rates is None
            else list(self.per_position_rates),
            "provenance": None if self.provenance is None else self.provenance.canonical(),
            "rationale": self.rationale,
            "copied_from": self.copied_from,
        }


@dataclass(frozen=True)
class ProfileSet:
    """A validated profile set, as one file states it."""

    name: str
    caveats: tuple[str, ...]
    profiles: tuple[Profile, ...]
    file: str | None = None

    def content_hash(self) -> str:
        """SHA-256 of the set's meaning (not its bytes): comments and layout do not count."""
        return _hash({
            "name": self.name,
            "caveats": list(self.caveats),
            "profiles": [p.canonical() for p in self.profiles],
        })


@dataclass(frozen=True)
class InlineValue:
    """A workload's, scenario's or command line's stated acceptance (spec: Inline values)."""

    num_spec_tokens: int
    acceptance_length: float | None = None
    acceptance_rate: float | None = None
    per_position_rates: tuple[float, ...] | None = None
    source: str | None = None


@dataclass(frozen=True)
class Pin:
    """A scenario's ``acceptance`` pin (spec: Scenario pin)."""

    profiles: str | None = None
    value: InlineValue | None = None
    fallback_category: str | None = None


def _hash(obj: Any) -> str:
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()
