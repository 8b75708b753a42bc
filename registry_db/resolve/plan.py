"""The resolver: one acceptance per run, or a refusal that says why.

A run names its model, method and K, the workload's thinking mode and category, the scenario's
pin, the command line's value, its chip, and which sets count as the registry. Four layers may
state acceptance; lowest to highest they are ``registry``, ``workload``, ``scenario`` and
``cli``. The highest layer that states it wins and layers are never merged (spec: Resolution).

Every run goes through the same three steps, whether it is resolved alone (:func:`resolve`) or
with many others (:func:`resolve_many`): :func:`_plan` checks the request, every stated value
(its K included, at every layer, winning or not) and the named sets, and either answers at once
or says which profile keys it needs; the keys go to the database in one indexed query
(:mod:`registry_db.resolve.lookup`) for the run or for the whole batch; :class:`_Answers` picks
the profile from the few rows, with the fallback category and conflict rules. Nothing falls back
silently: every refusal is a :class:`~registry_db.errors.ResolutionRefused` with a reason code
from the contract. The request and the checks of what it states live in
:mod:`registry_db.inputs.request`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable
from datetime import datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from sqlalchemy.engine import Connection, Engine

    #: An engine, an open connection, or (the command line's read-only SQLite path,
    #: :mod:`registry_db.store.sqlite_read`) a bare ``sqlite3`` connection.
    Bind = Engine | Connection | sqlite3.Connection

from registry_db.errors import ResolutionRefused
from registry_db.gcpause import gc_paused
from registry_db.inputs.as_of import as_of_utc
from registry_db.inputs.layers import LAYERS, LayerRow
from registry_db.inputs.request import SHARED, Checks, Request
from registry_db.model import InlineValue, Layer, Refusal, profile_label
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Fallback, HardwareMismatch, Resolution
from registry_db.resolve.lookup import (
    Candidate,
    Key,
    Lookup,
    Winner,
    cursor,
    lookup_many,
    lookup_one,
    set_names,
    stored_among,
)
from registry_db.resolve.rates import complete, min_variance_rates, rate_from_al
from registry_db.resolve.timeline import KnownAt

__all__ = ["Fallback", "HardwareMismatch", "Request", "Resolution", "resolve", "resolve_many"]


def resolve(bind: Bind, request: Request) -> Resolution:
    """Resolve one run; raise :class:`~registry_db.errors.ResolutionRefused` when it is refused.

    ``bind`` is an engine or an open connection (the lookup then reads inside its transaction).
    At most two queries: the stored set names (only when the request names sets) and the one
    lookup of the run's profile key, in its category and fallback. With ``as_of``, both read the
    registry as it stood then (the revisions).
    """
    checks = SHARED
    at = _time(request)
    with cursor(bind) as c:  # which translates driver errors
        # Only the sets the run names are looked up (most runs name none); every name is read
        # only to refuse an unknown one with the nearest names suggested.
        named = _named_sets(request)
        known = frozenset(stored_among(c, named, at)) if named else frozenset()
        if len(known) < len(named):
            known = frozenset(set_names(c, at))
        plan = planned = _plan(request, known, checks)
        if isinstance(plan, _Plan):
            won = lookup_one(c, plan.lookup)
            plan = _Answers({} if won is None else {plan.lookup: won}).finish(plan)
    if isinstance(plan, Refusal):
        raise ResolutionRefused(_say_what_exists(bind, [planned], [plan])[0])
    return plan


def _time(request: Request) -> datetime | None:
    """The request's as-of time in UTC; None when it has none, or when it is not a time (its
    check refuses the run before anything is looked up)."""
    if request.as_of is None:
        return None
    try:
        return as_of_utc(request.as_of)
    except ValueError:
        return None


def _named_sets(request: Request) -> tuple[str, ...]:
    """The distinct set names a request names (``--set`` and the pin's ``profiles``)."""
    names = list(request.sets) if isinstance(request.sets, (tuple, list)) else []
    pin = request.pin
    profiles = pin.get("profiles") if isinstance(pin, dict) else getattr(pin, "profiles", None)
    if isinstance(profiles, str):
        names.append(profiles)
    return tuple(dict.fromkeys(n for n in names if isinstance(n, str)))


def resolve_many(bind: Bind, requests: Iterable[Request]) -> list[Resolution | Refusal]:
    """Resolve many runs at once: one answer per request, in order; a refused run's answer is
    its :class:`~registry_db.model.Refusal` (a value, not raised).

    Set-based: one query for the set names and one join for every distinct profile key of the
    batch, in one transaction, however many requests there are. Each answer equals what
    :func:`resolve` gives (or raises) for that request alone.
    """
    requests = list(requests)
    checks = Checks()
    with gc_paused(len(requests)):
        with cursor(bind, snapshot=True) as c:  # which translates driver errors
            known = frozenset(set_names(c))
            if any(r.as_of is not None for r in requests):
                at_known = KnownAt(c)
                runs, where = _once_each(requests, lambda r: _plan(
                    r, known if r.as_of is None
                    else at_known(_time(r), bool(_named_sets(r))), checks))
            else:
                runs, where = _once_each(requests, lambda r: _plan(r, known, checks))
            index = lookup_many(c, [p.lookup for p in runs if type(p) is _Plan])
        answers = _Answers(index)
        # Each distinct run answered once (answers are immutable values), then handed to every
        # request that is that run.
        finished = [answers.finish(p) if type(p) is _Plan else p for p in runs]
        finished = _say_what_exists(bind, runs, finished)
        return list(map(finished.__getitem__, where))


def _once_each(requests: list[Request], plan: Any) -> tuple[list[Any], list[int]]:
    """``plan(r)`` for each distinct run of ``requests``, and for each request the place of its
    run's plan in that list: a sweep repeats the same run (the benchmark's 100,000 requests
    hold 62,000 distinct runs), and a plan depends on the run alone. Only runs that state no
    value and whose terms are of their own types are shared (text, an int K, a tuple of
    names): 1, 1.0 and True are equal in Python and only the first is a K, so a run with a
    term of another type is planned on its own, every time."""
    memo: dict[tuple, int] = {}
    plans: list[Any] = []
    where: list[int] = []
    add, put = plans.append, where.append
    for r in requests:
        # The run's terms and their types, read in C: the key is a plain tuple, hashed and
        # compared without the dataclass's Python-level __hash__ and __eq__ (0.1 s a batch).
        key = _RUN_OF(r)
        if tuple(map(type, key)) not in _SHAREABLE or (
                key[6] is not None and not all(type(n) is str for n in key[6])):
            put(len(plans))
            add(plan(r))
            continue
        found = memo.get(key)
        if found is None:
            found = memo[key] = len(plans)
            add(plan(r))
        put(found)
    return plans, where


#: A run's terms as :func:`_once_each` keys it; ``workload``, ``pin`` and ``cli`` last (a run
#: that states a value is never shared, so they are always None in a key).
_RUN_OF = attrgetter("model", "method", "k", "thinking", "category", "hardware", "sets", "as_of",
                     "workload", "pin", "cli")
_NONE = type(None)
#: The types of a run's terms that :func:`_once_each` may share: text and an int K, text or
#: None for the optional terms, a tuple of set names (checked apart) or None, no stated value.
_SHAREABLE = frozenset(
    (str, str, int, thinking, category, hardware, sets, as_of, _NONE, _NONE, _NONE)
    for thinking in (str, _NONE) for category in (str, _NONE) for hardware in (str, _NONE)
    for sets in (tuple, _NONE) for as_of in (str, _NONE))


# --- planning: everything that needs no profile --------------------------------------------------

class _Plan(NamedTuple):
    """A request that needs a lookup: where, in which keys, and what it reports on the way."""

    request: Request
    layer: str
    scope: frozenset[str] | None  # None: every set
    keys: tuple[Key, ...]  # the workload's category first (when it has one), then the fallback's
    fallback: str | None
    #: What the lookup statement is given: the prefix, category, fallback, sets in scope.
    lookup: Lookup
    notes: tuple[str, ...] = ()


#: What each layer above the registry states, read from a request in one call.
_STATED_BY = attrgetter(*(row.input for row in LAYERS if row.input is not None))
_NOTHING_STATED = (None,) * (len(LAYERS) - 1)
_REGISTRY = Layer.REGISTRY  # read once: a member lookup on the enum class costs every run


def _plan(req: Request, known: Collection[str], checks: Checks
          ) -> _Plan | Resolution | Refusal:
    """Check everything that needs no profile; answer at once, or say which keys to look up."""
    refusal = checks.terms(req)
    if refusal is not None:
        return refusal
    if _STATED_BY(req) == _NOTHING_STATED:  # the common run: the registry alone
        sets = req.sets
        if sets is not None:
            for name in sets:
                if name not in known:
                    return _unknown_set("--set", name, known, _when(req.as_of))
        if req.thinking is None:
            return _no_thinking(_REGISTRY)
        if req.category is None:
            return _no_category(_REGISTRY)
        return _Plan(req, _REGISTRY, None if sets is None else frozenset(sets),
                     ((req.model, req.method, req.k, req.thinking, req.category),), None,
                     Lookup(req.model, req.method, req.k, req.thinking, req.category, None,
                            None if sets is None else _scope(sets),
                            None if req.as_of is None else as_of_utc(req.as_of)))
    return _plan_layers(req, known, checks)


def _plan_layers(req: Request, known: Collection[str], checks: Checks
                 ) -> _Plan | Resolution | Refusal:
    """:func:`_plan` for a run where a layer above the registry states something: every
    stated value is checked (its K included), then the highest layer that states acceptance
    answers, by its value or from the set it names."""
    stated: list[tuple[LayerRow, Any]] = []
    for row in LAYERS[1:]:
        found = checks.stated(req, row.layer)
        if type(found) is Refusal:
            return found
        if found is not None:
            stated.append((row, found))
    for row, found in stated:
        value = row.value(found)
        if value is not None and value.num_spec_tokens != req.k:
            return Refusal(R.K_MISMATCH, (
                f"the {row.layer} layer's value was stated for K = {value.num_spec_tokens}, but "
                f"the run speculates K = {req.k}; a value is refused rather than rescaled"))
    for name in req.sets or ():
        if name not in known:
            return _unknown_set("--set", name, known, _when(req.as_of))
    pin = dict((row.layer, found) for row, found in stated).get(Layer.SCENARIO)
    if pin is not None and pin.profiles is not None and pin.profiles not in known:
        return _unknown_set("the scenario's acceptance.profiles", pin.profiles, known,
                            _when(req.as_of) + "; the registry is not consulted in its place")

    acceptance = [(row, found) for row, found in stated
                  if row.value(found) is not None or row.names_set(found) is not None]
    winner = acceptance[-1][0].layer if acceptance else Layer.REGISTRY
    notes = tuple(f"the {row.layer} layer's acceptance is overridden by the {winner} layer "
                  "(layers are not merged)" for row, _ in acceptance[:-1])
    fallback = pin.fallback_category if pin is not None else None
    scope: frozenset[str] | None
    if acceptance:
        row, found = acceptance[-1]
        value = row.value(found)
        if value is not None:
            return _inline_answer(value, req.k, row.layer, notes)
        named = row.names_set(found)
        assert named is not None  # a layer that states acceptance states a value or a set
        layer, scope = row.layer, frozenset((named,))
    else:
        layer, scope = Layer.REGISTRY, None if req.sets is None else frozenset(req.sets)
    if req.thinking is None:
        return _no_thinking(layer)
    if req.category is None and fallback is None:
        return _no_category(layer)
    prefix = (req.model, req.method, req.k, req.thinking)
    keys = tuple(prefix + (c,) for c in (req.category, fallback) if c is not None)
    return _Plan(req, layer, scope, keys, fallback,
                 Lookup(*prefix, req.category, fallback, None if scope is None else _scope(scope),
                        None if req.as_of is None else as_of_utc(req.as_of)),
                 notes)


def _scope(names: Iterable[str]) -> tuple[str, ...]:
    """Set names as a lookup's scope: distinct and sorted, so equal scopes share a lookup."""
    names = tuple(names)  # a library caller may pass a list (checked: of strings)
    found = _SCOPES.get(names)
    if found is None:
        if len(_SCOPES) >= 1024:  # a batch names few distinct scopes; bound the memo anyway
            _SCOPES.clear()
        found = _SCOPES[names] = tuple(sorted(set(names)))
    return found


_SCOPES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _no_thinking(layer: str) -> Refusal:
    return Refusal(R.NO_THINKING, (
        f"the {layer} lookup needs the workload's thinking mode (on or off) and none was given"))


def _no_category(layer: str) -> Refusal:
    return Refusal(R.NO_CATEGORY, (
        f"the {layer} lookup needs the workload's category and none was given, nor a "
        "fallback_category"))


def _when(as_of: Any) -> str:
    """`` as of TIME`` (UTC) for a run as of a time; empty for the current registry."""
    if as_of is None:
        return ""
    return f" as of {as_of_utc(as_of).isoformat().replace('+00:00', 'Z')}"


def _unknown_set(where: str, name: str, known: Collection[str], tail: str) -> Refusal:
    # Imported here: the store's models cost a fast command's start-up, and this path is rare.
    from registry_db.store.read import unknown_set_message

    return Refusal(R.UNKNOWN_SET, f"{where}: {unknown_set_message(name, sorted(known))}{tail}")


def _inline_answer(value: InlineValue, k: int, layer: str, notes: tuple[str, ...]) -> Resolution:
    al, rate, rates, derived = complete(
        k, acceptance_length=value.acceptance_length, acceptance_rate=value.acceptance_rate,
        per_position_rates=value.per_position_rates)
    return Resolution(al, rate, k, rates, derived, layer, None, None, value.source,
                      warnings=notes)


# --- finishing: the profile from the lookup's rows -----------------------------------------------

class _Answers:
    """Turns plans into answers from one lookup's candidates, sharing what answers share."""

    def __init__(self, index: dict[Lookup, Winner]):
        self.index = index
        self._derived: dict[tuple[float, int], tuple[float, ...]] = {}

    def finish(self, plan: _Plan) -> Resolution | Refusal:
        """The answer to ``plan`` from its lookup's winner (or from there being none).

        The lookup statement has already chosen the category (the workload's or the fallback)
        and counted the sets in scope that hold it: this builds the answer, or the refusal
        that says why there is none.
        """
        lookup = plan.lookup
        won = self.index.get(lookup)
        if won is None:
            if lookup.fallback is None:
                return Refusal(R.NO_MATCH, (
                    f"no profile {profile_label(*plan.keys[0])} in {_scope_text(plan)}, and no "
                    "fallback_category was requested"))
            missing = "the workload states no category" if lookup.category is None else (
                f"the workload's category {lookup.category!r} has no profile")
            return Refusal(R.FALLBACK_NO_MATCH, (
                f"{missing} in {_scope_text(plan)}, and the fallback has no profile either: no "
                f"{profile_label(*plan.keys[-1])}"))
        key = plan.keys[0][:4] + (won.category,)
        if won.set_count > 1:
            return _conflict(key, list(won.candidates), won.set_count)
        return self.answer(plan, won.candidates[0], key,
                           None if won.category == lookup.category
                           else Fallback(lookup.category, won.category))

    def answer(self, plan: _Plan, cand: Candidate, key: Key,
               fallback: Fallback | None) -> Resolution:
        """The resolution a profile gives, with its rates stored or derived, and its notes."""
        k, al = key[2], cand.acceptance_length
        rates = cand.rates
        derived = rates is None
        if rates is None:
            rates = self._derived.get((al, k))
            if rates is None:
                rates = self._derived[(al, k)] = tuple(min_variance_rates(al, k))
        warnings, mismatch = plan.notes, None
        run_on, measured_on = plan.request.hardware, cand.hardware
        # Chip names are compared without case: "B300" on the command line is the b300.
        if run_on is not None and measured_on is not None \
                and run_on.casefold() != measured_on.casefold():
            mismatch = HardwareMismatch(measured_on, run_on)
        if fallback is not None or mismatch is not None or cand.method != "measured":
            notes = list(warnings)
            if fallback is not None:
                notes.append((f"the workload's category {fallback.replaced!r} has no profile"
                              if fallback.replaced else "the workload states no category")
                             + f"; used the fallback category {fallback.category!r}")
            if mismatch is not None:
                notes.append(f"the profile was measured on {measured_on} and the run is on "
                             f"{run_on}; acceptance is reused across hardware")
            if cand.method != "measured":
                how = f"copied from {cand.copied_from}" if cand.copied_from else cand.method
                notes.append(f"the profile's value is not measured ({how})")
            warnings = tuple(notes)
        return Resolution(al, rate_from_al(al, k), k, rates, derived, plan.layer,
                          cand.profile_set, profile_label(*key), cand.source, fallback, mismatch,
                          warnings, cand.revision)


#: Refusals for want of a profile: they also say what is stored for the run's model and method.
_NO_PROFILE = (R.NO_MATCH, R.FALLBACK_NO_MATCH)


def _say_what_exists(bind: Bind, plans: list[Any], answers: list[Any]) -> list[Any]:
    """``answers`` with each no-profile refusal saying which K values, thinking modes and
    categories the run's scope does hold for its model and method.

    One extra query (:func:`registry_db.resolve.stored.stored_variants`), made only when some
    answer is such a refusal, so that answering costs nothing more.
    """
    todo = [i for i, (p, a) in enumerate(zip(plans, answers)) if type(p) is _Plan
            and type(a) is Refusal and a.reason in _NO_PROFILE]
    if not todo:
        return answers
    from registry_db.resolve.stored import stored_variants, stored_variants_as_of

    now = [i for i in todo if plans[i].lookup.as_of is None]
    then = [i for i in todo if plans[i].lookup.as_of is not None]
    # Each reads through lookup.cursor, which translates driver errors.
    stored: dict[Any, Any] = {}
    # A run in every set needs only what all sets hold together (far fewer rows); a run
    # scoped to some sets needs them told apart.
    for per_set in (False, True):
        pairs = {(plans[i].request.model, plans[i].request.method) for i in now
                 if (plans[i].scope is not None) is per_set}
        if pairs:
            stored.update(((pair, per_set), held) for pair, held in
                          stored_variants(bind, pairs, per_set=per_set).items())
    if then:
        stored.update(stored_variants_as_of(bind, {
            (plans[i].request.model, plans[i].request.method, plans[i].lookup.as_of)
            for i in then}))
    out = list(answers)
    # Described once per (model, method, time, scope): a batch's misses repeat a few of them (the
    # benchmark's 10,000 misses, 10,000 describe calls: 0.32 s of CPU before, by key rows).
    said: dict[tuple, str] = {}
    for i in todo:
        req, scope, at = plans[i].request, plans[i].scope, plans[i].lookup.as_of
        what = said.get((req.model, req.method, at, scope))
        if what is None:
            variants = stored[((req.model, req.method), scope is not None) if at is None
                              else (req.model, req.method, at)]
            held = variants.describe(scope)
            what = said[(req.model, req.method, at, scope)] = (
                f"stored for {req.model}/{req.method} there: {held}" if held
                else f"nothing is stored for {req.model}/{req.method} there")
        out[i] = Refusal(out[i].reason, f"{out[i].message}; {what}")
    return out


def _scope_text(plan: _Plan) -> str:
    when = _when(plan.lookup.as_of)
    if plan.layer == "scenario":
        assert plan.scope is not None  # the scenario's lookup is in its one named set
        (name,) = plan.scope
        return f"the scenario's set {name!r}{when}"
    if plan.scope is None:
        return f"the registry (every set){when}"
    return "the registry sets " + ", ".join(repr(s) for s in sorted(plan.scope)) + when


def _conflict(key: Key, found: list[Candidate], count: int) -> Refusal:
    names = ", ".join(c.profile_set for c in found)
    return Refusal(R.CONFLICT, (
        f"{count} registry sets hold {profile_label(*key)}: {names}; name one with --set "
        "(or a scenario's acceptance.profiles)"))
