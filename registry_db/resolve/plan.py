"""The resolver: one acceptance per run, or a refusal that says why.

A run names its model, method and K, the workload's thinking mode and category, the scenario's
pin, the command line's value, its chip, and which sets count as the registry. Four layers may
state acceptance; lowest to highest they are ``registry``, ``workload``, ``scenario`` and
``cli``. The highest layer that states it wins and layers are never merged (spec: Resolution).

:func:`resolve` and :func:`resolve_many` take requests and check each once where it enters
(:func:`registry_db.inputs.run.check`); everything after takes the checked
:class:`~registry_db.inputs.run.Run`. Every run then goes through the same three steps:
:func:`plan` compares every stated value's K with the run's (at every layer, winning or not),
checks the named sets, and either answers at once or says what to look up; the lookups go to
the database in one indexed query (:mod:`registry_db.resolve.lookup`) for the run or for the
whole batch, whose statement decides among the stored profiles; :mod:`registry_db.resolve.finish`
builds the answer from the rows it returns, or the refusal that says why there are none.
Nothing falls back silently: every refusal is a :class:`~registry_db.errors.ResolutionRefused`
with a reason code from the contract.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable
from typing import TYPE_CHECKING, Any, Literal, overload

from registry_db.errors import ResolutionRefused
from registry_db.inputs import layers
from registry_db.inputs.run import Request, Run, check
from registry_db.model import InlineValue, Layer, Refusal
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Fallback, HardwareMismatch, Resolution
from registry_db.resolve.answer_json import AnswerText
from registry_db.resolve.answer_row import (
    Ask,
    Steps,
    answer_many,
    answer_one,
    asked_here,
    finish_row,
)
from registry_db.resolve.finish import Answers, Plan, say_what_exists, when_text
from registry_db.resolve.lookup import (
    Lookup,
    cursor,
    lookup_many,
    set_names,
    stored_among,
)
from registry_db.resolve.rates import complete
from registry_db.resolve.timeline import KnownAt

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind

__all__ = ["Fallback", "HardwareMismatch", "Request", "Resolution", "Run", "plan", "resolve",
           "SET_NAMES", "resolve_many", "resolve_steps"]


def resolve(bind: ReadBind, request: Request | Run) -> Resolution:
    """Resolve one run; raise :class:`~registry_db.errors.ResolutionRefused` when it is refused.

    ``bind`` is an engine or an open connection (the lookup then reads inside its transaction).
    One query for a run in every set or in the sets it names: the registry layer's statement
    (PostgreSQL: ``registry_resolve``), which also says whether those sets are stored. The
    stored set names are read first only when a layer names a set the lookup does not use,
    and after the statement only to refuse an unknown set with the nearest names. With
    ``as_of``, every query reads the registry as it stood then (the revisions).
    """
    run = check(request)
    if type(run) is Refusal:
        raise ResolutionRefused(run)
    assert type(run) is Run
    with cursor(bind) as c:  # which translates driver errors
        named = named_sets(run)
        # Planned as if the named sets were stored: when the lookup's sets are the ones named,
        # the registry layer's statement says whether they are (one round trip).
        planned = plan(run, frozenset(named))
        if named and not (type(planned) is Plan
                          and frozenset(planned.lookup.scope or ()) == frozenset(named)):
            planned = plan(run, _stored_sets(c, named, run.as_of))
        answer = planned
        told = False  # whether the refusal says what is stored already
        if type(planned) is Plan:
            # The registry layer's own statement (PostgreSQL: registry_resolve) decides.
            row = answer_one(c, planned)
            if row.reason == R.UNKNOWN_SET:  # refused as plan() refuses it: nearest names
                replanned = plan(run, _stored_sets(c, named, run.as_of))
                if type(replanned) is Refusal:  # (else the set came between the two reads)
                    planned = answer = replanned
            if type(planned) is Plan:
                answer = finish_row(planned, row)
                told = True
    if type(answer) is Refusal:
        refusal = answer if told else say_what_exists(bind, [planned], [answer])[0]
        if type(planned) is Plan:  # a typo in the model or method: the nearest stored ones
            from registry_db.resolve.suggest import with_suggestion

            refusal = with_suggestion(bind, run.model, run.method, refusal)
        raise ResolutionRefused(refusal)
    assert type(answer) is Resolution
    return answer


@overload
def resolve_many(bind: ReadBind, requests: Iterable[Request | Run],
                 stored: dict[Any, Any] | None = None, text: Literal[False] = False
                 ) -> list[Resolution | Refusal]: ...
@overload
def resolve_many(bind: ReadBind, requests: Iterable[Request | Run],
                 stored: dict[Any, Any] | None = None, text: bool | Collection[int] = False
                 ) -> list[Resolution | Refusal | AnswerText]: ...
def resolve_many(bind: ReadBind, requests: Iterable[Request | Run],
                 stored: dict[Any, Any] | None = None, text: bool | Collection[int] = False
                 ) -> list[Any]:
    """Resolve many runs at once: one answer per request, in order; a refused run's answer is
    its :class:`~registry_db.model.Refusal` (a value, not raised). ``stored``: what earlier
    calls in the same snapshot read of what is stored, for the refusals' text
    (:func:`~registry_db.resolve.finish.say_what_exists`). ``text``: a registry hit's answer
    may come as its JSON text (:meth:`~registry_db.resolve.finish.Answers.written`), for a
    caller that only writes it: every request's (True) or those at these places.

    Set-based: one query for the set names and one join for every distinct profile key of the
    batch, in one transaction, however many requests there are. Each answer equals what
    :func:`resolve` gives (or raises) for that request alone. Identical runs are planned and
    answered once (a sweep repeats them): a run is its own key, so every term and every stated
    value is part of it.
    """
    return asked_here(resolve_steps(bind, requests, stored, text))


def resolve_steps(bind: ReadBind, requests: Iterable[Request | Run],
                  stored: dict[Any, Any] | None = None, text: bool | Collection[int] = False
                  ) -> Steps[list[Any]]:
    """:func:`resolve_many` in two steps (:data:`~registry_db.resolve.answer_row.Steps`): on
    PostgreSQL it asks for ``registry_resolve_many``'s rows, which a batch's caller may fetch
    while it plans the next runs. The set names are kept in ``stored`` (:data:`SET_NAMES`): a
    read meanwhile would wait for that call."""
    checked = [check(r) for r in requests]
    place: dict[Run, int] = {}  # each distinct run, by its place in ``runs``
    where = [place.setdefault(r, len(place)) if type(r) is Run else -1 for r in checked]
    runs = list(place)
    by_row: dict[int, Any] = {}  # the plans PostgreSQL's registry_resolve_many answers
    with cursor(bind, snapshot=True) as c:  # which translates driver errors
        known = None if stored is None else stored.get(SET_NAMES)
        if known is None:
            known = frozenset(set_names(c))
            if stored is not None:
                stored[SET_NAMES] = known
        at_known = KnownAt(c)
        plans = [plan(run, known if run.as_of is None
                      else at_known(run.as_of, bool(named_sets(run)))) for run in runs]
        if c.dialect == "postgresql" and BY_FUNCTION:
            # The registry layer as the function decides it.
            mine = {i: p for i, p in enumerate(plans) if type(p) is Plan}
            asked = list(mine.values())
            rows = (yield Ask(c, asked)) if asked else []
            if rows is None:
                rows = answer_many(c, asked)
            by_row = {i: finish_row(p, row) for (i, p), row in zip(mine.items(), rows)}
        index = lookup_many(c, [p.lookup for i, p in enumerate(plans)
                                if type(p) is Plan and i not in by_row])
    answers = Answers(index)
    written = _textual(text, where, len(runs))
    # (what a refusal of the function's says is stored is in it already)
    finished = say_what_exists(bind, [None if i in by_row else p for i, p in enumerate(plans)],
                               [by_row[i] if i in by_row else (
                                   answers.written if i in written else answers.finish)(p)
                                if type(p) is Plan else p for i, p in enumerate(plans)], stored)
    return [finished[i] if i >= 0 else r for i, r in zip(where, checked)]


def _textual(text: bool | Collection[int], where: list[int], runs: int) -> Container[int]:
    """The distinct runs (by place) whose hits may be written as text: those every request
    of which may be (``text``: True for every request, else their places)."""
    if text is True or text is False:
        return range(runs if text else 0)
    yes: set[int] = set()
    no: set[int] = set()
    for i, run in enumerate(where):
        (yes if i in text else no).add(run)
    return yes - no


#: ``stored``'s entry for the stored set names (its other keys are tuples), which a batch reads
#: once per chunk (:func:`~registry_db.resolve.batch.answer_chunks`).
SET_NAMES = "set names"


def _stored_sets(c: Any, named: tuple[str, ...], as_of: Any) -> frozenset[str]:
    """Which of ``named`` are stored sets (as of ``as_of``); when some is not, every stored
    set's name, for the refusal's nearest names."""
    known = frozenset(stored_among(c, named, as_of))
    return known if len(known) == len(named) else frozenset(set_names(c, as_of))


#: Whether a batch on PostgreSQL asks ``registry_resolve_many`` (migration 0015) for the
#: registry layer, as ``registry resolve`` asks ``registry_resolve``; False: the lookup statement
#: and the decision in Python, as on SQLite. The answers are the same
#: (tests/db/test_batch_fast_path.py); kept as a switch since the function costs the server more
#: CPU than the lookup statement (100k runs: about 1.9 s against 1.0 s; docs/decisions.md).
BY_FUNCTION = True


def named_sets(run: Run) -> tuple[str, ...]:
    """The distinct set names a run names: its scope (``--set``) and any a layer states (the
    scenario's pin ``profiles``)."""
    names = list(run.scope or ())
    for row, found in zip(layers.LAYERS, run.stated):
        named = None if found is None else row.names_set(found)
        if named is not None:
            names.append(named)
    return tuple(dict.fromkeys(names))


def plan(run: Run, known: Collection[str]) -> Plan | Resolution | Refusal:
    """Everything that needs no profile: every stated value's K against the run's, the named
    sets against ``known``; then the answer of the highest layer that states a value, or what
    to look up for the layer that looks one up (the registry, or the set a layer names)."""
    if run.stated.count(None) == len(run.stated):  # no layer states anything (most runs)
        for name in run.scope or ():
            if name not in known:
                return _unknown_set("--set", name, known, when_text(run.as_of))
        if run.thinking is None:
            return _no_thinking(Layer.REGISTRY)
        if run.category is None:
            return _no_category(Layer.REGISTRY)
        return Plan(run, Layer.REGISTRY, Lookup(run.model, run.method, run.k, run.thinking,
                                                run.category, None, run.scope, run.as_of))
    stated = []  # (row, what it states) of each layer that states something, lowest first
    pin = None
    for row, found in zip(layers.LAYERS, run.stated):
        if found is None:
            continue
        value = row.value(found)
        if value is not None and value.num_spec_tokens != run.k:
            return Refusal(R.K_MISMATCH, (
                f"the {row.layer} layer's value was stated for K = {value.num_spec_tokens}, but "
                f"the run speculates K = {run.k}; a value is refused rather than rescaled"))
        if row.layer == Layer.SCENARIO:
            pin = found
        stated.append((row, found))
    for name in run.scope or ():
        if name not in known:
            return _unknown_set("--set", name, known, when_text(run.as_of))
    if pin is not None and pin.profiles is not None and pin.profiles not in known:
        return _unknown_set("the scenario's acceptance.profiles", pin.profiles, known,
                            when_text(run.as_of) + "; the registry is not consulted in its place")

    layer, scope = Layer.REGISTRY, run.scope
    notes: tuple[str, ...] = ()
    acceptance = [(row, found) for row, found in stated
                  if row.value(found) is not None or row.names_set(found) is not None]
    if acceptance:
        row, found = acceptance[-1]
        notes = tuple(f"the {lower.layer} layer's acceptance is overridden by the {row.layer} "
                      "layer (layers are not merged)" for lower, _ in acceptance[:-1])
        value = row.value(found)
        if value is not None:
            return _inline_answer(value, run.k, row.layer, notes)
        named = row.names_set(found)
        assert named is not None  # a layer that states acceptance states a value or a set
        layer, scope = row.layer, (named,)
    fallback = pin.fallback_category if pin is not None else None
    if run.thinking is None:
        return _no_thinking(layer)
    if run.category is None and fallback is None:
        return _no_category(layer)
    return Plan(run, layer, Lookup(run.model, run.method, run.k, run.thinking, run.category,
                                   fallback, scope, run.as_of), notes)


def _no_thinking(layer: str) -> Refusal:
    return Refusal(R.NO_THINKING, (
        f"the {layer} lookup needs the workload's thinking mode (on or off) and none was given"))


def _no_category(layer: str) -> Refusal:
    return Refusal(R.NO_CATEGORY, (
        f"the {layer} lookup needs the workload's category and none was given, nor a "
        "fallback_category"))


def _unknown_set(where: str, name: str, known: Collection[str], tail: str) -> Refusal:
    # Imported here: the store's models cost a fast command's start-up, and this path is rare.
    from registry_db.store.messages import unknown_set_message

    return Refusal(R.UNKNOWN_SET, f"{where}: {unknown_set_message(name, sorted(known))}{tail}")


def _inline_answer(value: InlineValue, k: int, layer: str, notes: tuple[str, ...]) -> Resolution:
    al, rate, rates, derived = complete(
        k, acceptance_length=value.acceptance_length, acceptance_rate=value.acceptance_rate,
        per_position_rates=value.per_position_rates)
    return Resolution(al, rate, k, rates, derived, layer, None, None, value.source,
                      warnings=notes)
