"""Finishing a planned run: its answer from the rows the lookup statement chose, or the refusal
that says why there is none.

:mod:`registry_db.resolve.plan` plans each checked run and says what it looks up (a
:class:`Plan`); the lookup statement (:mod:`registry_db.resolve.lookup`) decides among the
stored profiles in SQL; :class:`Answers` turns each plan and its winner into a
:class:`~registry_db.resolve.answer.Resolution` (rates stored or derived, the notes an answer
carries) or a :class:`~registry_db.model.Refusal`, and :func:`say_what_exists` makes every
no-profile refusal say what the run's scope does hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from registry_db.inputs.run import Run
from registry_db.model import Counts, Refusal, Uncertainty, profile_label
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Fallback, HardwareMismatch, Resolution
from registry_db.resolve.answer_json import AnswerText, resolution_body
from registry_db.resolve.lookup import Key, Lookup, LookupRow, Winner, stored_counts, stored_rates
from registry_db.resolve.rates import min_variance_rates, rate_from_al

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind

__all__ = ["Answers", "Plan", "conflict", "no_profile", "notes", "say_what_exists", "stored_text",
           "when_text"]


class Plan(NamedTuple):
    """A run that needs a lookup: the layer it is answered at, what it looks up, and the notes
    its answer carries."""

    run: Run
    layer: str
    #: The prefix, the categories, the sets in scope (None: every set) and the time.
    lookup: Lookup
    notes: tuple[str, ...] = ()

    def key(self, category: str) -> Key:
        """The profile key of this run in ``category``."""
        lk = self.lookup
        return (lk.model, lk.method, lk.k, lk.thinking, category)


def when_text(as_of: datetime | None) -> str:
    """`` as of TIME`` (UTC) for a run as of a time; empty for the current registry."""
    if as_of is None:
        return ""
    return f" as of {as_of.isoformat().replace('+00:00', 'Z')}"


class Answers:
    """Turns plans into answers from one lookup's candidates, sharing what answers share."""

    def __init__(self, index: dict[Lookup, Winner]):
        self.index = index
        self._derived: dict[tuple[float, int], tuple[float, ...]] = {}

    def finish(self, plan: Plan) -> Resolution | Refusal:
        """The answer to ``plan`` from its lookup's winner (or from there being none).

        The lookup statement has already chosen the category (the workload's or the fallback)
        and counted the sets in scope that hold it: this builds the answer, or the refusal
        that says why there is none.
        """
        won = self._won(plan)
        return won if isinstance(won, Refusal) else Resolution(*won)

    def written(self, plan: Plan) -> Resolution | Refusal | AnswerText:
        """:meth:`finish`'s answer, a resolution as its JSON text where the template writes it
        (:func:`~registry_db.resolve.answer_json.resolution_body`): for a batch that only
        writes its answers, building the Resolution first cost a third of their time."""
        won = self._won(plan)
        if isinstance(won, Refusal):
            return won
        try:
            body = resolution_body(*won)
        except TypeError:  # a field of a type the template does not write
            body = None
        return Resolution(*won) if body is None else AnswerText(body)

    def _won(self, plan: Plan) -> tuple | Refusal:
        """The fields of ``plan``'s resolution (:meth:`values`), or its refusal."""
        won = self.index.get(plan.lookup)
        if won is None:
            return no_profile(plan)
        if won.set_count > 1:
            return conflict(plan.key(won.category), [c.profile_set for c in won.candidates],
                            won.set_count)
        return self.values(plan, won.category, won.profiles[0])

    def values(self, plan: Plan, category: str, rows: Sequence[Sequence]) -> tuple:
        """The fields of the resolution a profile gives (its rows from the lookup, in
        ``category``), in order: its rates stored or derived, its notes."""
        lookup = plan.lookup
        key = plan.key(category)
        profile = LookupRow._make(rows[0])
        k, al = key[2], profile.acceptance_length
        rates = stored_rates(rows)
        derived = rates is None
        if rates is None:
            rates = self._derived.get((al, k))
            if rates is None:
                rates = self._derived[(al, k)] = tuple(min_variance_rates(al, k))
        fallback = None if category == lookup.category else Fallback(lookup.category, category)
        mismatch = None
        run_on, measured_on = plan.run.hardware, profile.hardware
        # Chip names are compared without case: "B300" on the command line is the b300.
        if run_on is not None and measured_on is not None \
                and run_on.casefold() != measured_on.casefold():
            mismatch = HardwareMismatch(measured_on, run_on)
        warnings = notes(plan.notes, fallback, mismatch, profile.method, profile.copied_from)
        counts, uncertainty = stored_counts(profile)
        return (al, rate_from_al(al, k), k, rates, derived, plan.layer, profile.set_name,
                profile_label(*key), profile.source, fallback, mismatch, warnings,
                profile.revision, _at_k(uncertainty, counts, k), counts)


def _at_k(uncertainty: Uncertainty | None, counts: Counts | None, k: int
          ) -> Uncertainty | None:
    """The stored error with what K and the counts add: exact at K = 1, and its centre."""
    if uncertainty is None or counts is None:
        return uncertainty
    return replace(uncertainty, exact=counts.exact(k), mean=counts.mean)


#: Refusals for want of a profile: they also say what is stored for the run's model and method.
_NO_PROFILE = (R.NO_MATCH, R.FALLBACK_NO_MATCH)


def say_what_exists(bind: ReadBind, plans: list[Any], answers: list[Any],
                    known: dict[Any, Any] | None = None) -> list[Any]:
    """``answers`` with each no-profile refusal saying which K values, thinking modes and
    categories the run's scope does hold for its model and method.

    One extra query (:func:`registry_db.resolve.stored.stored_variants`), made only when some
    answer is such a refusal, so that answering costs nothing more. ``known`` keeps what was
    read for the calls that read the same snapshot (a streamed batch's chunks): what it holds
    is not read again, and what is read is added to it.
    """
    todo = [i for i, (p, a) in enumerate(zip(plans, answers)) if type(p) is Plan
            and type(a) is Refusal and a.reason in _NO_PROFILE]
    if not todo:
        return answers
    from registry_db.resolve.stored import stored_variants, stored_variants_as_of

    lookups = [plans[i].lookup for i in todo]
    now = [lk for lk in lookups if lk.as_of is None]
    # Each reads through lookup.cursor, which translates driver errors.
    stored: dict[Any, Any] = {} if known is None else known
    # A run in every set needs only what all sets hold together (far fewer rows); a run
    # scoped to some sets needs them told apart.
    for per_set in (False, True):
        pairs = {(lk.model, lk.method) for lk in now if (lk.scope is not None) is per_set
                 and ((lk.model, lk.method), per_set) not in stored}
        if pairs:
            stored.update(((pair, per_set), held) for pair, held in
                          stored_variants(bind, pairs, per_set=per_set).items())
    for per_set in (False, True):
        then = {(lk.model, lk.method, lk.as_of) for lk in lookups
                if lk.as_of is not None and (lk.scope is not None) is per_set
                and ((lk.model, lk.method, lk.as_of), per_set) not in stored}
        if then:
            stored.update(((key, per_set), held) for key, held in
                          stored_variants_as_of(bind, then, per_set=per_set).items())
    out = list(answers)
    # Described once per (model, method, time, scope): a batch's misses repeat a few of them.
    said: dict[tuple, str] = {}
    for i, lk in zip(todo, lookups):
        where = (lk.model, lk.method, lk.as_of, lk.scope)
        what = said.get(where)
        if what is None:
            variants = stored[((lk.model, lk.method) if lk.as_of is None
                               else (lk.model, lk.method, lk.as_of), lk.scope is not None)]
            what = said[where] = stored_text(lk.model, lk.method, variants.describe(lk.scope))
        out[i] = Refusal(out[i].reason, f"{out[i].message}; {what}")
    return out


def _scope_text(plan: Plan) -> str:
    scope, when = plan.lookup.scope, when_text(plan.lookup.as_of)
    if plan.layer == "scenario":
        assert scope is not None  # the scenario's lookup is in its one named set
        (name,) = scope
        return f"the scenario's set {name!r}{when}"
    if scope is None:
        return f"the registry (every set){when}"
    return "the registry sets " + ", ".join(repr(s) for s in scope) + when


def notes(notes: tuple[str, ...], fallback: Fallback | None, mismatch: HardwareMismatch | None,
          method: str, copied_from: str | None) -> tuple[str, ...]:
    """An answer's warnings: the plan's ``notes``, then the fallback used, the chip it was
    measured on, a value not measured."""
    if fallback is None and mismatch is None and method == "measured":
        return notes
    out = list(notes)
    if fallback is not None:
        out.append((f"the workload's category {fallback.replaced!r} has no profile"
                    if fallback.replaced else "the workload states no category")
                   + f"; used the fallback category {fallback.category!r}")
    if mismatch is not None:
        out.append(f"the profile was measured on {mismatch.measured_on} and the run is on "
                   f"{mismatch.run_on}; acceptance is reused across hardware")
    if method != "measured":
        how = f"copied from {copied_from}" if copied_from else method
        out.append(f"the profile's value is not measured ({how})")
    return tuple(out)


def no_profile(plan: Plan) -> Refusal:
    """The refusal of a plan that no profile answers: ``no_match``, or ``fallback_no_match``
    when it has a fallback."""
    lookup = plan.lookup
    if lookup.fallback is None:
        assert lookup.category is not None  # a plan has a category or a fallback
        return Refusal(R.NO_MATCH, (
            f"no profile {profile_label(*plan.key(lookup.category))} in "
            f"{_scope_text(plan)}, and no fallback_category was requested"))
    missing = "the workload states no category" if lookup.category is None else (
        f"the workload's category {lookup.category!r} has no profile")
    return Refusal(R.FALLBACK_NO_MATCH, (
        f"{missing} in {_scope_text(plan)}, and the fallback has no profile either: no "
        f"{profile_label(*plan.key(lookup.fallback))}"))


def stored_text(model: str, method: str, held: str | None) -> str:
    """What a no-profile refusal adds: what the run's scope holds for its model and method
    (``held``: :meth:`~registry_db.resolve.stored.StoredVariants.describe`'s text)."""
    return (f"stored for {model}/{method} there: {held}" if held
            else f"nothing is stored for {model}/{method} there")


def conflict(key: Key, names: list[str], count: int) -> Refusal:
    """The refusal of a key that ``count`` sets in scope hold (``names``, by name)."""
    names_text = ", ".join(names)
    return Refusal(R.CONFLICT, (
        f"{count} registry sets hold {profile_label(*key)}: {names_text}; name one with --set "
        "(or a scenario's acceptance.profiles)"))
