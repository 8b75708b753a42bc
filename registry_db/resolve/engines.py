"""The engines' hand-off: what each inference engine takes to realise a resolved acceptance.

A resolution says which acceptance a run uses; a benchmark that must reproduce a published curve
forces that acceptance on the engine: vLLM's synthetic rejection sampling, SGLang's simulated
acceptance, TensorRT-LLM's forced accepted tokens, ATOM's and TileRT's equivalents, and the
BLIS / inference-sim simulator's acceptance rate. This module owns that translation, so that no
pipeline writes it (and its off-by-one) by hand.

:data:`ENGINES` is a table, one row per engine: the form the engine reads (environment
variables, vLLM's ``--speculative-config`` JSON, or command-line arguments) and the entries, whose
values are the resolution's quantities (:data:`AL`, :data:`AL_MINUS_1`, :data:`RATE`,
:data:`K`, :data:`RATES`) or literal text. Adding an engine is one row.

Numbers are written as each engine parses them: the shortest decimal that reads back to the same
float, never in exponent form, and a whole number without ``.0`` (``4``, not ``4.0``: an
``int(...)`` parser refuses ``4.0``). AL − 1 and (AL − 1) / K are computed in decimal from AL's
shortest text, so AL 2.78 gives ``1.78``, never ``1.7799999999999998``. vLLM's JSON keeps JSON
numbers. A value an engine cannot take on one of its paths is a warning of the settings.

Each row also says what AL the engine realises from what it is handed (``realises``: its own
parsing rule, in brief). A hand-off whose realised AL differs from the resolved one by more than
:data:`EXACT` (TensorRT-LLM at AL 1, where 0 forced tokens means "not forcing"; stored rates
whose 1 + sum is not the AL, for vLLM, which realises 1 + sum of the rates) is refused
(``inexact_handoff``) with what the engine would do instead, unless ``allow_inexact``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from registry_db.errors import ResolutionRefused, UsageError
from registry_db.model import RefusalReason

if TYPE_CHECKING:
    from decimal import Decimal

__all__ = ["ENGINES", "EXACT", "EngineRow", "EngineSettings", "engine_settings", "number_text"]

#: How far the AL an engine realises may be from the resolved AL.
EXACT = 1e-9


class _Quantity(str):
    """A placeholder in a row for one of the resolution's quantities."""


AL = _Quantity("acceptance length")
AL_MINUS_1 = _Quantity("acceptance length - 1")
RATE = _Quantity("acceptance rate (AL - 1) / K")
K = _Quantity("num_spec_tokens")
RATES = _Quantity("per-position rates")

Value = str  # literal text, or a _Quantity placeholder (a str too)
Entry = tuple[str, Value]
#: What an engine realises from its entries (name -> value as handed over) at K: the AL, or
#: None when it would not force acceptance at all.
Realises = Callable[[dict[str, Any], int], "float | None"]


def _vllm_realises(entries: dict[str, Any], k: int) -> float | None:
    # vllm/config/speculative.py: rates are used as given (their 1 + sum is the mean); a
    # length becomes the minimum-variance schedule, whose 1 + sum is the length.
    rates = entries.get("synthetic_acceptance_rates")
    if rates is not None:
        return 1.0 + math.fsum(rates)
    return float(entries["synthetic_acceptance_length"])


def _length_realises(name: str) -> Realises:
    return lambda entries, k: float(entries[name])


def _trtllm_realises(entries: dict[str, Any], k: int) -> float | None:
    # 0 forced draft tokens is TensorRT-LLM's "not forcing": the run keeps its real acceptance.
    forced = float(entries["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"])
    return None if forced == 0 else 1.0 + forced


def _blis_realises(entries: dict[str, Any], k: int) -> float | None:
    return 1.0 + int(entries["--num-speculative-tokens"]) * float(
        entries["--speculative-acceptance-rate"])


@dataclass(frozen=True, slots=True)
class EngineRow:
    """How one engine takes an acceptance: its form and its entries, in output order.

    ``form`` is ``env`` (``NAME=VALUE`` lines), ``speculative_config`` (a JSON object to merge
    into ``--speculative-config``) or ``args`` (flag and value, in order). ``with_rates``, when
    set, replaces ``entries`` whenever the per-position rates were stated or stored (not
    derived): an engine that can take the whole distribution gets it. ``whole_only`` names the
    entries that some path of the engine reads as an integer, with what that path then does.
    ``realises`` is the AL the engine realises from the entries; ``name`` is how messages call
    the engine; ``k_flags`` are the engine's own command-line flags that state K (``registry
    exec`` refuses a command whose K differs).
    """

    form: str
    entries: tuple[Entry, ...]
    realises: Realises
    name: str
    with_rates: tuple[Entry, ...] | None = None
    whole_only: dict[str, str] = field(default_factory=dict)
    k_flags: tuple[str, ...] = ()


#: One row per engine (the names ``--emit`` accepts).
ENGINES: dict[str, EngineRow] = {
    # vLLM takes exactly one of the length and the rates.
    "vllm": EngineRow("speculative_config", (
        ("num_speculative_tokens", K), ("rejection_sample_method", "synthetic"),
        ("synthetic_acceptance_length", AL)), _vllm_realises, "vLLM", with_rates=(
        ("num_speculative_tokens", K), ("rejection_sample_method", "synthetic"),
        ("synthetic_acceptance_rates", RATES))),
    # SGLang's K is --speculative-num-steps (its simulated length is clamped to steps + 1).
    "sglang": EngineRow("env", (
        ("SGLANG_SIMULATE_ACC_LEN", AL), ("SGLANG_SIMULATE_ACC_METHOD", "match-expected"),
        ("SGLANG_SIMULATE_ACC_TOKEN_MODE", "real-draft-token")),
        _length_realises("SGLANG_SIMULATE_ACC_LEN"), "SGLang",
        k_flags=("--speculative-num-steps",)),
    # TensorRT-LLM counts accepted draft tokens, without the target's bonus token. Its one-model
    # path reads the variable with float(...), its two-model path with int(...)
    # (tensorrt_llm/_torch/speculative/interface.py, get_force_num_accepted_tokens and
    # get_force_num_accepted_tokens_float).
    "trtllm": EngineRow(
        "env", (("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS", AL_MINUS_1),), _trtllm_realises,
        "TensorRT-LLM",
        whole_only={"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": (
            "only TensorRT-LLM's one-model path (MTP, EAGLE3 one-model) takes a fractional "
            "value; the two-model path reads it with int(...), warns, and forces 0 accepted "
            "tokens instead")}),
    "atom": EngineRow("args", (("--spec-decode-acceptance-length", AL),),
                      _length_realises("--spec-decode-acceptance-length"), "ATOM",
                      k_flags=("--num-speculative-tokens",)),
    "tilert": EngineRow("env", (
        ("TILERT_SIMULATE_ACC_LEN", AL), ("TILERT_SIMULATE_ACC_METHOD", "match-expected")),
        _length_realises("TILERT_SIMULATE_ACC_LEN"), "TileRT"),
    # BLIS / inference-sim: α = (AL − 1) / K, the spec's acceptance rate; g = 1 + α·K.
    "blis": EngineRow("args", (
        ("--num-speculative-tokens", K), ("--speculative-acceptance-rate", RATE)),
        _blis_realises, "BLIS", k_flags=("--num-speculative-tokens",)),
}

#: ``--shell``'s shell variable for a form that is no environment: the JSON object for
#: ``--speculative-config "$SPECULATIVE_CONFIG"``, the arguments for ``$SPECULATIVE_ARGS``.
SHELL_VARIABLES = {"speculative_config": "SPECULATIVE_CONFIG", "args": "SPECULATIVE_ARGS"}

#: What ``--shell`` prints instead of settings when there are none to give (a refusal, an
#: error): ``eval`` of it returns 1, which stops a ``set -e`` script and leaves an interactive
#: shell running.
SHELL_FAILURE = "false"


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """What one engine takes: ``(name, value)`` pairs in the engine's form, and the warnings.

    Values are text for ``env`` and ``args`` (exactly what is printed) and JSON values for
    ``speculative_config`` (numbers stay numbers).
    """

    engine: str
    form: str
    entries: tuple[tuple[str, Any], ...]
    warnings: tuple[str, ...] = ()

    def lines(self, shell: bool = False) -> list[str]:
        """The printed form: ``NAME=VALUE`` lines, one JSON object, or the arguments on one line.

        ``shell`` makes it POSIX shell that ``eval`` runs: ``export NAME=VALUE`` with both
        quoted; the JSON object as ``SPECULATIVE_CONFIG='...'`` and the arguments as
        ``SPECULATIVE_ARGS='...'`` (shell variables, not exported, for the command line).
        """
        import shlex  # only for --shell: a resolution's start-up skips it

        if self.form == "env":
            if shell:
                return [f"export {shlex.quote(name)}={shlex.quote(value)}"
                        for name, value in self.entries]
            return [f"{name}={value}" for name, value in self.entries]
        if self.form == "args":
            text = " ".join(part for entry in self.entries for part in entry)
        else:
            text = json.dumps(dict(self.entries))
        return [f"{SHELL_VARIABLES[self.form]}={shlex.quote(text)}" if shell else text]

    def args(self) -> list[str]:
        """The ``args`` form's entries as command-line words, flag then value."""
        return [part for entry in self.entries for part in entry]

    def knobs(self) -> dict[str, str]:
        """Every entry as text, keyed by its name (a flag keeps its dashes); each value of
        ``speculative_config`` is its JSON text (``"synthetic"`` with its quotes, so that
        ``json.loads`` reads every one back). What ``--batch --emit`` carries per answer."""
        if self.form == "speculative_config":
            return {name: json.dumps(value) for name, value in self.entries}
        return dict(self.entries)

    def to_json(self) -> dict[str, Any]:
        """``{"engine", "env": {...}}``, ``{"engine", "speculative_config": {...}}`` or
        ``{"engine", "args": [...]}``, each with ``"warnings"``."""
        if self.form == "args":
            body: Any = [part for entry in self.entries for part in entry]
        else:
            body = dict(self.entries)
        return {"engine": self.engine, self.form: body, "warnings": list(self.warnings)}


def engine_settings(resolution: Any, engine: str, *,
                    allow_inexact: bool = False) -> EngineSettings:
    """What ``engine`` takes to realise ``resolution`` (a :class:`~registry_db.resolve.Resolution`).

    Raises :class:`~registry_db.errors.UsageError` for an engine that is not in :data:`ENGINES`,
    and :class:`~registry_db.errors.ResolutionRefused` (``inexact_handoff``) when the engine
    would not realise the resolved AL within :data:`EXACT`, unless ``allow_inexact`` (the
    message is then the settings' first warning).
    """
    row = ENGINES.get(engine)
    if row is None:
        raise UsageError(f"unknown engine {engine!r}; one of {', '.join(ENGINES)}")
    entries = row.entries
    if row.with_rates is not None and not resolution.rates_derived:
        entries = row.with_rates
    as_text = row.form != "speculative_config"
    values = tuple((name, _value(value, resolution, as_text)) for name, value in entries)
    warnings = tuple(
        f"{name}={text} is not a whole number: {why}"
        for name, text in values if (why := row.whole_only.get(name)) and not text.isdigit())
    inexact = _inexact(row, dict(values), resolution)
    if inexact is not None:
        if not allow_inexact:
            raise ResolutionRefused(RefusalReason.INEXACT_HANDOFF,
                                    f"{inexact}; --allow-inexact hands it over anyway")
        warnings = (inexact, *warnings)
    return EngineSettings(engine, row.form, values, warnings)


def _inexact(row: EngineRow, values: dict[str, Any], resolution: Any) -> str | None:
    """What the engine would do instead of realising the resolved AL, or None when it
    realises it within :data:`EXACT`."""
    al, k = float(resolution.acceptance_length), resolution.num_spec_tokens
    realised = row.realises(values, k)
    wanted = f"the resolved AL {number_text(al)}"
    if realised is None:
        shown = ", ".join(f"{name}={value}" for name, value in values.items())
        return (f"{row.name} reads {shown} as not forcing acceptance: the run would measure "
                f"its real acceptance, not {wanted}")
    if abs(realised - al) <= EXACT:
        return None
    how = ""
    if "synthetic_acceptance_rates" in values:
        rates = ", ".join(number_text(p) for p in values["synthetic_acceptance_rates"])
        how = f" (1 + the sum of synthetic_acceptance_rates [{rates}])"
    return (f"{row.name} would realise AL {number_text(round(realised, 9))}{how}, "
            f"not {wanted}")


def number_text(x: float | Decimal) -> str:
    """The shortest decimal that reads back to ``x``, positional, a whole number without ``.0``:
    ``4.07``, ``4``, ``0.00001`` (never ``1e-05``)."""
    # Imported here: ``registry resolve`` loads this module for its --emit choices, and
    # decimal is start-up time of every run that only --emit uses.
    from decimal import Decimal

    d = x if isinstance(x, Decimal) else Decimal(repr(float(x)))
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def minus_one_text(x: float) -> str:
    """``x`` − 1 computed in decimal from ``x``'s shortest text: 2.78 gives ``1.78``."""
    from decimal import Decimal

    return number_text(Decimal(repr(float(x))) - 1)


def rate_text(al: float, k: int, stated: float | None = None) -> str:
    """(AL − 1) / K from AL's shortest text, exactly, then its shortest decimal; ``stated`` (the
    resolution's rate) is used instead when it is the same float within rounding and shorter,
    as a rate stated on the command line (0.7, whose AL 1 + 0.7 × 3 is 3.0999999999999996) is."""
    from decimal import Decimal
    from fractions import Fraction

    exact = Fraction(Decimal(repr(float(al))) - 1) / k
    near = float(exact)
    text = number_text(near)
    if stated is not None and math.isfinite(stated) and \
            abs(stated - near) <= 4 * math.ulp(near) and len(number_text(stated)) < len(text):
        return number_text(stated)
    return text


def _value(value: Value, r: Any, as_text: bool) -> Any:
    if not isinstance(value, _Quantity):
        return value
    if value is AL:
        return number_text(r.acceptance_length) if as_text else float(r.acceptance_length)
    if value is AL_MINUS_1:
        text = minus_one_text(r.acceptance_length)
        return text if as_text else float(text)
    if value is RATE:
        text = rate_text(r.acceptance_length, r.num_spec_tokens, r.acceptance_rate)
        return text if as_text else float(text)
    if value is K:
        return str(r.num_spec_tokens) if as_text else r.num_spec_tokens
    rates = [float(p) for p in r.per_position_rates]
    return ",".join(number_text(p) for p in rates) if as_text else rates
