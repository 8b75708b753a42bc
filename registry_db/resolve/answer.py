"""What the resolver answers for one run: the acceptance, and where it came from.

A :class:`Resolution` is the contract's answer field by field (``to_json`` keeps its key
order); :class:`Fallback` and :class:`HardwareMismatch` are the two notes an answer may carry as
objects. A refused run's answer is a :class:`~registry_db.model.Refusal`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from registry_db.model import Counts, Uncertainty

__all__ = ["Fallback", "HardwareMismatch", "Resolution"]


@dataclass(frozen=True, slots=True)
class Fallback:
    """The pin's fallback category stood in for the workload's (``replaced`` None: it had none)."""

    replaced: str | None
    category: str


@dataclass(frozen=True, slots=True)
class HardwareMismatch:
    """The profile was measured on one chip and the run is on another."""

    measured_on: str
    run_on: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """The acceptance a run uses and where it came from (the contract's JSON, field by field)."""

    acceptance_length: float
    acceptance_rate: float
    num_spec_tokens: int
    per_position_rates: tuple[float, ...]
    rates_derived: bool
    layer: str
    profile_set: str | None
    profile: str | None
    source: str | None
    fallback: Fallback | None = None
    hardware_mismatch: HardwareMismatch | None = None
    warnings: tuple[str, ...] = ()
    #: The revision of ``profile_set`` the profile came from (None for an inline value).
    revision: int | None = None
    #: How sure the stored value is, from the profile's counts (None: an inline value, or a
    #: profile without counts), and the counts themselves.
    uncertainty: Uncertainty | None = None
    counts: Counts | None = None

    def to_json(self) -> dict[str, Any]:
        """The contract's object, keys in the contract's order."""
        fb, hw, u, c = self.fallback, self.hardware_mismatch, self.uncertainty, self.counts
        return {
            "acceptance_length": self.acceptance_length,
            "acceptance_rate": self.acceptance_rate,
            "num_spec_tokens": self.num_spec_tokens,
            "per_position_rates": list(self.per_position_rates),
            "rates_derived": self.rates_derived,
            "layer": self.layer,
            "profile_set": self.profile_set,
            "profile": self.profile,
            "revision": self.revision,
            "source": self.source,
            "uncertainty": None if u is None else u.to_json(),
            "counts": None if c is None else c.to_json(),
            "fallback": None if fb is None else {"replaced": fb.replaced, "category": fb.category},
            "hardware_mismatch": None if hw is None else {"measured_on": hw.measured_on,
                                                          "run_on": hw.run_on},
            "warnings": list(self.warnings),
        }
