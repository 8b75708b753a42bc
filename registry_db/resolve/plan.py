"""The resolver: one acceptance per run, or a refusal that says why.

A run names its model, method and K, the workload's thinking mode and category, the scenario's
pin, the command line's value, its chip, and which sets count as the registry. Four layers may
state acceptance; lowest to highest they are ``registry``, ``workload``, ``scenario`` and
``cli``. The highest layer that states it wins and layers are never merged (spec: Resolution).

Every run goes through the same three steps, whether it is resolved alone (:func:`resolve`) or
with many others (:func:`resolve_many`): :func:`_plan` checks the request, every stated value
(its K included, at every layer, winning or not) and the named sets, and either answers at once
or says which profile keys it needs; the keys go to the database in one indexed query
(:mod:`registry_db.resolve.lookup`) for the run or for the whole batch, whose statement decides
among the stored profiles; :mod:`registry_db.resolve.finish` builds the answer from the rows it
returns, or the refusal that says why there are none. Nothing falls back
silently: every refusal is a :class:`~registry_db.errors.ResolutionRefused` with a reason code
from the contract. The request and the checks of what it states live in
:mod:`registry_db.inputs.request`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable
from datetime import datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any

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
from registry_db.model import InlineValue, Layer, Refusal
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Fallback, HardwareMismatch, Resolution
from registry_db.resolve.finish import Answers, Plan, say_what_exists, when_text
from registry_db.resolve.lookup import (
    Lookup,
    cursor,
    lookup_many,
    lookup_one,
    set_names,
    stored_among,
)
from registry_db.resolve.rates import complete
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
        if isinstance(plan, Plan):
            won = lookup_one(c, plan.lookup)
            plan = Answers({} if won is None else {plan.lookup: won}).finish(plan)
    if isinstance(plan, Refusal):
        raise ResolutionRefused(say_what_exists(bind, [planned], [plan])[0])
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
            index = lookup_many(c, [p.lookup for p in runs if type(p) is Plan])
        answers = Answers(index)
        # Each distinct run answered once (answers are immutable values), then handed to every
        # request that is that run.
        finished = [answers.finish(p) if type(p) is Plan else p for p in runs]
        finished = say_what_exists(bind, runs, finished)
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

#: What each layer above the registry states, read from a request in one call.
_STATED_BY = attrgetter(*(row.input for row in LAYERS if row.input is not None))
_NOTHING_STATED = (None,) * (len(LAYERS) - 1)
_REGISTRY = Layer.REGISTRY  # read once: a member lookup on the enum class costs every run


def _plan(req: Request, known: Collection[str], checks: Checks
          ) -> Plan | Resolution | Refusal:
    """Check everything that needs no profile; answer at once, or say which keys to look up."""
    refusal = checks.terms(req)
    if refusal is not None:
        return refusal
    if _STATED_BY(req) == _NOTHING_STATED:  # the common run: the registry alone
        sets = req.sets
        if sets is not None:
            for name in sets:
                if name not in known:
                    return _unknown_set("--set", name, known, when_text(req.as_of))
        if req.thinking is None:
            return _no_thinking(_REGISTRY)
        if req.category is None:
            return _no_category(_REGISTRY)
        # Built by tuple.__new__, every field given: the named tuples' own __new__ is Python
        # (74,000 plans in the benchmark's batch).
        key = (req.model, req.method, req.k, req.thinking, req.category)
        return _new(Plan, (req, _REGISTRY, None if sets is None else frozenset(sets), (key,),
                           None, _new(Lookup, (*key, None, None if sets is None else _scope(sets),
                                               None if req.as_of is None
                                               else as_of_utc(req.as_of))), ()))
    return _plan_layers(req, known, checks)


_new = tuple.__new__


def _plan_layers(req: Request, known: Collection[str], checks: Checks
                 ) -> Plan | Resolution | Refusal:
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
            return _unknown_set("--set", name, known, when_text(req.as_of))
    pin = dict((row.layer, found) for row, found in stated).get(Layer.SCENARIO)
    if pin is not None and pin.profiles is not None and pin.profiles not in known:
        return _unknown_set("the scenario's acceptance.profiles", pin.profiles, known,
                            when_text(req.as_of) + "; the registry is not consulted in its place")

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
    return Plan(req, layer, scope, keys, fallback,
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
