"""The resolver: one acceptance per run, or a refusal that says why.

A run names its model, method and K, the workload's thinking mode and category, the scenario's
pin, the command line's value, its chip, and which sets count as the registry. Four layers may
state acceptance; lowest to highest they are ``registry``, ``workload``, ``scenario`` and
``cli``. The highest layer that states it wins and layers are never merged (spec: Resolution).

Every run goes through the same three steps, whether it is resolved alone (:func:`resolve`) or
with many others (:func:`resolve_many`): :func:`_plan` checks the request, every stated value
(its K included, at every layer, winning or not) and the named sets, and either answers at once
or says which profile keys it needs; the keys go to the database in one indexed query
(:mod:`registry_db.resolve_sql`) for the run or for the whole batch; :func:`_finish` picks the
profile from the few rows, with the fallback category and conflict rules. Nothing falls back
silently: every refusal is a :class:`~registry_db.errors.ResolutionRefused` with a reason code
from the contract.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, NamedTuple

from sqlalchemy.engine import Connection, Engine

from registry_db.db import translated
from registry_db.errors import ResolutionRefused
from registry_db.findings import Finding
from registry_db.rates import complete, min_variance_rates, rate_from_al
from registry_db.resolve_sql import Candidate, Key, lookup_many, lookup_one, set_names
from registry_db.spec import CATEGORY_RE, THINKING_MODES, InlineValue, Pin, profile_label
from registry_db.validate_inline import check_inline_value, check_pin

Bind = Engine | Connection


@dataclass(frozen=True)
class Request:
    """One run to resolve. ``workload``, ``pin`` and ``cli`` are what those layers state.

    ``sets`` names the sets that count as the registry (None: every set in the database).
    ``hardware`` is the run's chip; a profile measured on another is recorded.
    """

    model: str
    method: str
    k: int
    thinking: str | None = None
    category: str | None = None
    workload: InlineValue | None = None
    pin: Pin | None = None
    cli: InlineValue | None = None
    hardware: str | None = None
    sets: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Fallback:
    """The pin's fallback category stood in for the workload's (``replaced`` None: it had none)."""

    replaced: str | None
    category: str


@dataclass(frozen=True)
class HardwareMismatch:
    """The profile was measured on one chip and the run is on another."""

    measured_on: str
    run_on: str


@dataclass(frozen=True)
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

    def to_json(self) -> dict[str, Any]:
        """The contract's object, keys in the contract's order."""
        fb, hw = self.fallback, self.hardware_mismatch
        return {
            "acceptance_length": self.acceptance_length,
            "acceptance_rate": self.acceptance_rate,
            "num_spec_tokens": self.num_spec_tokens,
            "per_position_rates": list(self.per_position_rates),
            "rates_derived": self.rates_derived,
            "layer": self.layer,
            "profile_set": self.profile_set,
            "profile": self.profile,
            "source": self.source,
            "fallback": None if fb is None else {"replaced": fb.replaced, "category": fb.category},
            "hardware_mismatch": None if hw is None else {"measured_on": hw.measured_on,
                                                          "run_on": hw.run_on},
            "warnings": list(self.warnings),
        }


def resolve(bind: Bind, request: Request) -> Resolution:
    """Resolve one run; raise :class:`~registry_db.errors.ResolutionRefused` when it is refused.

    ``bind`` is an engine or an open connection (the lookup then reads inside its transaction).
    At most two queries: the stored set names (only when the request names sets) and the one
    lookup of the run's profile key, in its category and fallback.
    """
    checked = _Checked()
    with translated(), _connect(bind) as conn:
        # The set names are read only when the run names a set: most runs need one query.
        named = request.sets or getattr(request.pin, "profiles", None)
        known = frozenset(set_names(conn)) if named else frozenset()
        plan = _plan(request, known, checked)
        if isinstance(plan, _Plan):
            index = lookup_one(conn, request.model, request.method, request.k, plan.thinking,
                               plan.keys[0][4], plan.keys[-1][4])
            plan = _finish(plan, index)
    if isinstance(plan, ResolutionRefused):
        raise plan
    return plan


def resolve_many(bind: Bind, requests: Iterable[Request]) -> list[Resolution | ResolutionRefused]:
    """Resolve many runs at once: one answer per request, in order; refusals are returned.

    Set-based: one query for the set names and one join for every distinct profile key of the
    batch, in one transaction, however many requests there are. Each answer equals what
    :func:`resolve` gives (or raises) for that request alone.
    """
    requests = list(requests)
    checked = _Checked()
    with translated(), _connect(bind) as conn:
        known = frozenset(set_names(conn))
        plans = [_plan(r, known, checked) for r in requests]
        keys = [key for p in plans if type(p) is _Plan for key in p.keys]
        index = lookup_many(conn, keys)
    return [_finish(p, index) if type(p) is _Plan else p for p in plans]


# --- planning: everything that needs no profile --------------------------------------------------

class _Plan(NamedTuple):
    """A request that needs a lookup: where, in which keys, and what it reports on the way."""

    request: Request
    layer: str
    scope: frozenset[str] | None  # None: every set
    scope_text: str
    thinking: str
    keys: tuple[Key, ...]  # the workload's category first, then the fallback's
    fallback: str | None
    notes: tuple[str, ...]


def _plan(req: Request, known: frozenset[str], checked: _Checked
          ) -> _Plan | Resolution | ResolutionRefused:
    try:
        _check_request(req)
        workload = checked.value(req.workload, "workload", "acceptance")
        pin = checked.pin(req.pin)
        cli = checked.value(req.cli, "cli", "cli")
        for layer, value in (("workload", workload), ("scenario", pin and pin.value),
                             ("cli", cli)):
            if value is not None and value.num_spec_tokens != req.k:
                raise ResolutionRefused("k_mismatch", (
                    f"the {layer} layer's value was stated for K = {value.num_spec_tokens}, but "
                    f"the run speculates K = {req.k}; a value is refused rather than rescaled"))
        for name in req.sets or ():
            if name not in known:
                raise _unknown_set("--set", name, known, "")
        if pin is not None and pin.profiles is not None and pin.profiles not in known:
            raise _unknown_set("the scenario's acceptance.profiles", pin.profiles, known,
                               "; the registry is not consulted in its place")
    except ResolutionRefused as refusal:
        return refusal

    stated = [layer for layer, on in (("workload", workload is not None),
                                      ("scenario", pin is not None and (
                                          pin.value is not None or pin.profiles is not None)),
                                      ("cli", cli is not None)) if on]
    winner = stated[-1] if stated else "registry"
    notes = tuple(f"the {lower} layer's acceptance is overridden by the {winner} layer "
                  "(layers are not merged)" for lower in stated[:-1])
    if cli is not None:
        return _inline_answer(cli, req.k, "cli", notes)
    if pin is not None and pin.value is not None:
        return _inline_answer(pin.value, req.k, "scenario", notes)
    fallback = pin.fallback_category if pin is not None else None
    if pin is not None and pin.profiles is not None:
        scope, scope_text = frozenset((pin.profiles,)), f"the scenario's set {pin.profiles!r}"
        layer = "scenario"
    elif workload is not None:
        return _inline_answer(workload, req.k, "workload", notes)
    else:
        layer = "registry"
        scope = None if req.sets is None else frozenset(req.sets)
        scope_text = ("the registry (every set)" if scope is None else
                      "the registry sets " + ", ".join(repr(s) for s in sorted(scope)))
    if req.thinking is None:
        return ResolutionRefused("no_thinking", (
            f"the {layer} lookup needs the workload's thinking mode (on or off) and none was "
            "given"))
    if req.category is None and fallback is None:
        return ResolutionRefused("no_category", (
            f"the {layer} lookup needs the workload's category and none was given, nor a "
            "fallback_category"))
    prefix = (req.model, req.method, req.k, req.thinking)
    keys = tuple(prefix + (c,) for c in (req.category, fallback) if c is not None)
    return _Plan(req, layer, scope, scope_text, req.thinking, keys, fallback, notes)


def _unknown_set(where: str, name: str, known: frozenset[str], tail: str) -> ResolutionRefused:
    # Imported here: the store's models cost a fast command's start-up, and this path is rare.
    from registry_db.store import unknown_set_message

    return ResolutionRefused("unknown_set",
                             f"{where}: {unknown_set_message(name, sorted(known))}{tail}")


def _check_request(req: Request) -> None:
    """The run's own terms; a library caller can pass anything, so they are checked here too."""
    problems = []
    for name in ("model", "method"):
        value = getattr(req, name)
        if not isinstance(value, str) or not value:
            problems.append(f"{name} must be a non-empty string, got {value!r}")
    if not isinstance(req.k, int) or isinstance(req.k, bool) or req.k < 1:
        problems.append(f"k must be an integer of at least 1, got {req.k!r}")
    if req.thinking is not None and req.thinking not in THINKING_MODES:
        problems.append(f"thinking must be 'on' or 'off', got {req.thinking!r}")
    if req.category is not None and (not isinstance(req.category, str)
                                     or not CATEGORY_RE.fullmatch(req.category)):
        problems.append(f"category {req.category!r} is malformed; use lower-case letters, "
                        "digits, '_' and '-'")
    if req.hardware is not None and (not isinstance(req.hardware, str) or not req.hardware):
        problems.append(f"hardware must be a non-empty string, got {req.hardware!r}")
    if req.sets is not None and (isinstance(req.sets, str) or not req.sets or not all(
            isinstance(s, str) and s for s in req.sets)):
        problems.append(f"sets must be a non-empty list of set names, got {req.sets!r}")
    if problems:
        raise ResolutionRefused("invalid_request", "; ".join(problems))


class _Checked:
    """Checks stated values by the spec's rules, once per distinct value in a batch."""

    def __init__(self) -> None:
        self._seen: dict[Any, Any] = {}

    def value(self, value: InlineValue | None, layer: str, path: str) -> InlineValue | None:
        if value is None:
            return None
        return self._check(value, layer, path, check_inline_value, _value_doc)

    def pin(self, pin: Pin | None) -> Pin | None:
        if pin is None:
            return None
        return self._check(pin, "scenario", "pin", check_pin, _pin_doc)

    def _check(self, obj: Any, layer: str, path: str, check: Any, as_doc: Any) -> Any:
        key = (path, obj)
        try:
            found = self._seen.get(key)
        except TypeError:  # a list where the spec has a tuple: unhashable, so check it each time
            key, found = None, None
        if found is None:
            good, findings = check(as_doc(obj), "", path)
            found = good if good is not None else invalid_value(layer, findings)
            if key is not None:
                self._seen[key] = found
        if isinstance(found, ResolutionRefused):
            raise found
        return found


def _value_doc(value: Any) -> Any:
    if not isinstance(value, InlineValue):
        return value  # the checker reports what it is instead
    doc: dict[str, Any] = {"num_spec_tokens": value.num_spec_tokens}
    for name in ("acceptance_length", "acceptance_rate", "per_position_rates", "source"):
        item = getattr(value, name)
        if item is not None:
            doc[name] = list(item) if isinstance(item, tuple) else item
    return doc


def _pin_doc(pin: Any) -> Any:
    if not isinstance(pin, Pin):
        return pin
    doc: dict[str, Any] = {}
    if pin.profiles is not None:
        doc["profiles"] = pin.profiles
    if pin.value is not None:
        doc["value"] = _value_doc(pin.value)
    if pin.fallback_category is not None:
        doc["fallback_category"] = pin.fallback_category
    return doc


def invalid_value(layer: str, findings: Iterable[Finding]) -> ResolutionRefused:
    """The refusal for a stated value (or, at the scenario layer, a pin) that breaks the spec."""
    what = "pin" if layer == "scenario" else "value"
    return ResolutionRefused("invalid_value",
                             f"the {layer} layer's {what} is invalid: {describe(findings)}")


def describe(findings: Iterable[Finding]) -> str:
    """Findings as one message: ``FILE:LINE:COL: PATH: MESSAGE`` where positions are known."""
    return "\n".join(f.render() if f.line else f"{f.path}: {f.message}"
                     for f in findings if f.is_error)


def _inline_answer(value: InlineValue, k: int, layer: str, notes: tuple[str, ...]) -> Resolution:
    al, rate, rates, derived = complete(
        k, acceptance_length=value.acceptance_length, acceptance_rate=value.acceptance_rate,
        per_position_rates=value.per_position_rates)
    return Resolution(al, rate, k, rates, derived, layer, None, None, value.source,
                      warnings=notes)


# --- finishing: the profile from the lookup's rows -----------------------------------------------

def _finish(plan: _Plan, index: dict[Key, list[Candidate]]) -> Resolution | ResolutionRefused:
    req, scope = plan.request, plan.scope
    category = req.category
    if category is not None:
        found = _in_scope(index.get(plan.keys[0], ()), scope)
        if len(found) == 1:
            return _profile_answer(plan, found[0], plan.keys[0], None)
        if found:
            return _conflict(plan, plan.keys[0], found)
    fallback = plan.fallback
    if fallback is None:
        return ResolutionRefused("no_match", (
            f"no profile {profile_label(*plan.keys[0])} in {plan.scope_text}, and no "
            "fallback_category was requested"))
    key = plan.keys[-1]
    found = _in_scope(index.get(key, ()), scope)
    if len(found) == 1:
        return _profile_answer(plan, found[0], key, Fallback(category, fallback))
    if found:
        return _conflict(plan, key, found)
    missing = "the workload states no category" if category is None else (
        f"the workload's category {category!r} has no profile")
    return ResolutionRefused("fallback_no_match", (
        f"{missing} in {plan.scope_text}, and the fallback has no profile either: no "
        f"{profile_label(*key)}"))


def _in_scope(found: Iterable[Candidate], scope: frozenset[str] | None) -> list[Candidate]:
    if scope is None:
        return found if isinstance(found, list) else list(found)
    return [c for c in found if c.profile_set in scope]


def _conflict(plan: _Plan, key: Key, found: list[Candidate]) -> ResolutionRefused:
    names = ", ".join(c.profile_set for c in found)
    return ResolutionRefused("conflict", (
        f"{len(found)} registry sets hold {profile_label(*key)}: {names}; name one with --set "
        "(or a scenario's acceptance.profiles)"))


def _profile_answer(plan: _Plan, cand: Candidate, key: Key,
                    fallback: Fallback | None) -> Resolution:
    k = key[2]
    al = cand.acceptance_length
    rates, derived = cand.rates, cand.rates is None
    if derived:
        rates = tuple(min_variance_rates(al, k))
    warnings = list(plan.notes)
    if fallback is not None:
        warnings.append(
            (f"the workload's category {fallback.replaced!r} has no profile" if fallback.replaced
             else "the workload states no category")
            + f"; used the fallback category {fallback.category!r}")
    mismatch = None
    run_on = plan.request.hardware
    if run_on is not None and cand.hardware is not None \
            and run_on.casefold() != cand.hardware.casefold():
        mismatch = HardwareMismatch(cand.hardware, run_on)
        warnings.append(f"the profile was measured on {cand.hardware} and the run is on "
                        f"{run_on}; acceptance is reused across hardware")
    if cand.method != "measured":
        how = f"copied from {cand.copied_from}" if cand.copied_from else f"{cand.method}"
        warnings.append(f"the profile's value is not measured ({how})")
    return Resolution(al, rate_from_al(al, k), k, rates, derived, plan.layer, cand.profile_set,
                      profile_label(*key), cand.source, fallback, mismatch, tuple(warnings))


@contextlib.contextmanager
def _connect(bind: Bind) -> Iterator[Connection]:
    """An engine's new connection (closed afterwards), or the caller's open one (left open)."""
    if isinstance(bind, Connection):
        yield bind
        return
    with bind.connect() as conn:
        yield conn
