"""The engines' hand-off: what each inference engine takes to realise a resolved acceptance.

A resolution says which acceptance a run uses; a benchmark that must reproduce a published curve
forces that acceptance on the engine: vLLM's synthetic rejection sampling, SGLang's simulated
acceptance, TensorRT-LLM's forced accepted tokens, ATOM's and TileRT's equivalents. This module
owns that translation, so that no pipeline writes it (and its off-by-one) by hand.

:data:`ENGINES` is a table, one row per engine: the form the engine reads (environment
variables, vLLM's ``--speculative-config`` JSON, or command-line arguments) and the entries, whose
values are the resolution's quantities (:data:`AL`, :data:`AL_MINUS_1`, :data:`K`,
:data:`RATES`) or literal text. Adding an engine is one row. Numbers are written as the shortest
decimal that reads back to the same float (``repr``), and AL − 1 is computed in decimal from that
text, so AL 2.78 gives ``1.78``, never ``1.7799999999999998``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from registry_db.errors import UsageError

__all__ = ["ENGINES", "EngineSettings", "EngineRow", "engine_settings"]


class _Quantity(str):
    """A placeholder in a row for one of the resolution's quantities."""


AL = _Quantity("acceptance length")
AL_MINUS_1 = _Quantity("acceptance length - 1")
K = _Quantity("num_spec_tokens")
RATES = _Quantity("per-position rates")

Value = str  # literal text, or a _Quantity placeholder (a str too)
Entry = tuple[str, Value]


@dataclass(frozen=True, slots=True)
class EngineRow:
    """How one engine takes an acceptance: its form and its entries, in output order.

    ``form`` is ``env`` (``NAME=VALUE`` lines), ``speculative_config`` (a JSON object to merge
    into ``--speculative-config``) or ``args`` (flag and value, in order). ``with_rates``, when
    set, replaces ``entries`` whenever the per-position rates were stated or stored (not
    derived): an engine that can take the whole distribution gets it.
    """

    form: str
    entries: tuple[Entry, ...]
    with_rates: tuple[Entry, ...] | None = None


#: One row per engine (the names ``--emit`` accepts).
ENGINES: dict[str, EngineRow] = {
    # vLLM takes exactly one of the length and the rates.
    "vllm": EngineRow("speculative_config", (
        ("num_speculative_tokens", K), ("rejection_sample_method", "synthetic"),
        ("synthetic_acceptance_length", AL)), with_rates=(
        ("num_speculative_tokens", K), ("rejection_sample_method", "synthetic"),
        ("synthetic_acceptance_rates", RATES))),
    "sglang": EngineRow("env", (
        ("SGLANG_SIMULATE_ACC_LEN", AL), ("SGLANG_SIMULATE_ACC_METHOD", "match-expected"),
        ("SGLANG_SIMULATE_ACC_TOKEN_MODE", "real-draft-token"))),
    # TensorRT-LLM counts accepted draft tokens, without the target's bonus token.
    "trtllm": EngineRow("env", (("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS", AL_MINUS_1),)),
    "atom": EngineRow("args", (("--spec-decode-acceptance-length", AL),)),
    "tilert": EngineRow("env", (
        ("TILERT_SIMULATE_ACC_LEN", AL), ("TILERT_SIMULATE_ACC_METHOD", "match-expected"))),
}


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """What one engine takes: ``(name, value)`` pairs in the engine's form.

    Values are text for ``env`` and ``args`` (exactly what is printed) and JSON values for
    ``speculative_config`` (numbers stay numbers).
    """

    engine: str
    form: str
    entries: tuple[tuple[str, Any], ...]

    def lines(self, shell: bool = False) -> list[str]:
        """The printed form: ``NAME=VALUE`` lines, one JSON object, or the arguments on one line.

        ``shell`` makes it ready for a POSIX shell: ``export NAME=VALUE`` with the value quoted,
        the JSON quoted as one word, the arguments quoted each.
        """
        if self.form == "env":
            if shell:
                return [f"export {name}={shlex.quote(value)}" for name, value in self.entries]
            return [f"{name}={value}" for name, value in self.entries]
        if self.form == "args":
            args = [part for entry in self.entries for part in entry]
            return [shlex.join(args) if shell else " ".join(args)]
        text = json.dumps(dict(self.entries))
        return [shlex.quote(text) if shell else text]

    def to_json(self) -> dict[str, Any]:
        """``{"engine", "env": {...}}``, ``{"engine", "speculative_config": {...}}`` or
        ``{"engine", "args": [...]}``."""
        if self.form == "args":
            return {"engine": self.engine,
                    "args": [part for entry in self.entries for part in entry]}
        return {"engine": self.engine, self.form: dict(self.entries)}


def engine_settings(resolution: Any, engine: str) -> EngineSettings:
    """What ``engine`` takes to realise ``resolution`` (a :class:`~registry_db.resolve.Resolution`).

    Raises :class:`~registry_db.errors.UsageError` for an engine that is not in :data:`ENGINES`.
    """
    row = ENGINES.get(engine)
    if row is None:
        raise UsageError(f"unknown engine {engine!r}; one of {', '.join(ENGINES)}")
    entries = row.entries
    if row.with_rates is not None and not resolution.rates_derived:
        entries = row.with_rates
    as_text = row.form != "speculative_config"
    return EngineSettings(engine, row.form, tuple(
        (name, _value(value, resolution, as_text)) for name, value in entries))


def decimal_text(x: float) -> str:
    """The shortest decimal that reads back to ``x`` (``repr``): 2.78, 1.0, 4.0."""
    return repr(float(x))


def minus_one_text(x: float) -> str:
    """``x`` − 1 computed in decimal from :func:`decimal_text`: 2.78 gives ``1.78``."""
    # Imported here: ``registry resolve`` loads this module for its --emit choices, and
    # decimal is 1.4 ms of every run's start-up that only --emit uses.
    from decimal import Decimal

    return format(Decimal(decimal_text(x)) - 1, "f")


def _value(value: Value, r: Any, as_text: bool) -> Any:
    if not isinstance(value, _Quantity):
        return value
    if value is AL:
        return decimal_text(r.acceptance_length) if as_text else float(r.acceptance_length)
    if value is AL_MINUS_1:
        text = minus_one_text(r.acceptance_length)
        return text if as_text else float(text)
    if value is K:
        return str(r.num_spec_tokens) if as_text else r.num_spec_tokens
    rates = [float(p) for p in r.per_position_rates]
    return ",".join(decimal_text(p) for p in rates) if as_text else rates
