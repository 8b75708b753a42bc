"""The registry layer's answer as SQL gives it, run and read: PostgreSQL's ``registry_resolve``
or, on SQLite, the same statement (:func:`~registry_db.resolve.statements.answer_statement`),
one row per run, turned into the :class:`~registry_db.resolve.answer.Resolution` or
:class:`~registry_db.model.Refusal` the resolver returns.

The row decides (the category, a conflict, the rates stored or derived, the chip's note, what
is stored); this module only puts the decision in the resolver's words, with the plan's layer,
scope and notes, which stay in Python.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from typing import Any, NamedTuple, TypeVar

from registry_db.model import Refusal, Uncertainty
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Fallback, HardwareMismatch, Resolution
from registry_db.resolve.finish import Plan, conflict, no_profile, notes, stored_text
from registry_db.resolve.lookup import Cursor, bound
from registry_db.resolve.statements import (
    ANSWER_COLUMNS,
    ANSWER_PARAMETERS,
    PG_ARGUMENTS,
    answer_form,
    answer_statement,
)
from registry_db.store.stored_counts import counts_from_row

__all__ = ["Ask", "AnswerRow", "Steps", "answer_many", "answer_one", "asked_here", "finish_row",
           "parameters"]


class AnswerRow(NamedTuple):
    """One row of the registry layer's answer (docs/schema.md, "registry_resolve")."""

    outcome: str
    reason: str | None
    profile: str | None
    acceptance_length: float | None
    acceptance_rate: float | None
    num_spec_tokens: int
    #: A JSON array, stored or derived.
    per_position_rates: str | None
    rates_derived: bool | int | None
    profile_set: str | None
    revision: int | None
    category_used: str | None
    value_method: str | None
    copied_from: str | None
    source: str | None
    fallback_replaced: str | None
    fallback_used: str | None
    measured_on: str | None
    hardware_mismatch: bool | int | None
    set_count: int | None
    conflict_sets: str | None
    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    accepted_per_position: str | None
    al_stderr: float | None
    al_stderr_exact: bool | int | None
    stored: str | None


assert AnswerRow._fields == tuple(name for name, _ in ANSWER_COLUMNS)

#: ``registry_resolve``'s call, its arguments in order.
PG_CALL = ("SELECT * FROM registry_resolve("
           + ", ".join(f"CAST(%s AS {kind})" for _, kind, _ in PG_ARGUMENTS) + ")")


def parameters(plan: Plan, dialect: str) -> dict[str, Any]:
    """The statement's parameters for ``plan``: one set in scope as ``set``, several as
    ``sets`` (a JSON array on SQLite), neither for every set."""
    lk = plan.lookup
    scope = lk.scope or ()
    sets = None if len(scope) < 2 else json.dumps(scope) if dialect == "sqlite" else list(scope)
    return {"model": lk.model, "method": lk.method, "k": lk.k, "thinking": lk.thinking,
            "category": lk.category, "fallback": lk.fallback,
            "set": scope[0] if len(scope) == 1 else None, "hardware": plan.run.hardware,
            "as_of": None if lk.as_of is None else bound(lk.as_of, dialect), "sets": sets}


def answer_one(c: Cursor, plan: Plan) -> AnswerRow:
    """The registry layer's answer to ``plan``: PostgreSQL's function, or the same statement
    on SQLite."""
    given = parameters(plan, c.dialect)
    if c.dialect == "postgresql":
        c.cur.execute(PG_CALL, tuple(given[name] for name in ANSWER_PARAMETERS))
    else:
        # Only the lookup's form the run calls for: SQLite prepares the four in 2.7 times the
        # time of one, and a command prepares it once.
        form = answer_form(bool(plan.lookup.scope), given["as_of"] is not None)
        c.cur.execute(answer_statement("sqlite", form, given["sets"] is not None), given)
    (row,) = c.cur.fetchall()
    return AnswerRow._make(row)


#: ``registry_resolve_many``'s call: the runs as one JSON array (:func:`answer_many`).
PG_MANY_CALL = "SELECT * FROM registry_resolve_many(CAST(%s AS jsonb))"
#: Runs per call: bounds the parameter's and the answer's memory, not the round trips.
PG_MANY_CHUNK = 50_000


def answer_many(c: Cursor, plans: Sequence[Plan]) -> list[AnswerRow]:
    """The registry layer's answer to each of ``plans``, in order, from PostgreSQL's set-based
    ``registry_resolve_many``: one statement per :data:`PG_MANY_CHUNK` runs."""
    out: list[AnswerRow] = []
    for start in range(0, len(plans), PG_MANY_CHUNK):
        runs = []
        for plan in plans[start:start + PG_MANY_CHUNK]:
            lk = plan.lookup
            run = {"model": lk.model, "method": lk.method, "k": lk.k, "thinking": lk.thinking,
                   "category": lk.category, "fallback_category": lk.fallback,
                   "hardware": plan.run.hardware,
                   # ISO 8601, which timestamptz reads back exactly
                   "as_of": None if lk.as_of is None else lk.as_of.isoformat()}
            if lk.scope is not None:
                run["set_names"] = lk.scope
            runs.append(run)
        c.cur.execute(PG_MANY_CALL, (json.dumps(runs),))
        make = AnswerRow._make
        out.extend(make(row[1:]) for row in c.cur.fetchall())
    return out


class Ask(NamedTuple):
    """What a resolver in steps (:data:`Steps`) asks :func:`answer_many` for: ``plans`` on
    ``c``, the cursor of the transaction it reads."""

    c: Cursor
    plans: list[Plan]


T = TypeVar("T")
#: A resolver in two steps, as a generator: it yields one :class:`Ask` (or none) and is sent
#: the rows :func:`answer_many` gives for it (None: it asks on its own cursor), then returns
#: its answers. A batch on PostgreSQL runs the call meanwhile on another thread
#: (:mod:`registry_db.resolve.overlap`); :func:`asked_here` runs it in place.
Steps = Generator[Ask, "list[AnswerRow] | None", T]


def asked_here(steps: Steps[T]) -> T:
    """What ``steps`` returns, each of its asks answered where it is asked."""
    try:
        next(steps)
        while True:
            steps.send(None)
    except StopIteration as done:
        return done.value


def finish_row(plan: Plan, row: AnswerRow) -> Resolution | Refusal:
    """The resolver's answer to ``plan`` from the row the database gave for it."""
    lk = plan.lookup
    if row.reason in (R.NO_MATCH, R.FALLBACK_NO_MATCH):
        said = no_profile(plan)
        return Refusal(said.reason,
                       f"{said.message}; {stored_text(lk.model, lk.method, row.stored)}")
    if row.reason == R.CONFLICT:
        assert row.category_used is not None and row.conflict_sets is not None
        assert row.set_count is not None
        return conflict(plan.key(row.category_used), row.conflict_sets.split(", "),
                        row.set_count)
    if row.reason is not None:  # refused before any lookup: plan() refuses these first
        return Refusal(R(row.reason), f"the registry layer refused the run ({row.reason})")
    assert row.acceptance_length is not None and row.per_position_rates is not None
    assert row.category_used is not None and row.value_method is not None
    fallback = None if row.fallback_used is None else Fallback(row.fallback_replaced,
                                                               row.fallback_used)
    mismatch = None
    if row.hardware_mismatch:
        assert row.measured_on is not None and plan.run.hardware is not None
        mismatch = HardwareMismatch(row.measured_on, plan.run.hardware)
    counts = uncertainty = None
    if row.drafts is not None:
        assert row.draft_tokens is not None and row.accepted_tokens is not None
        assert row.al_stderr is not None
        counts = counts_from_row(row.drafts, row.draft_tokens, row.accepted_tokens,
                                 row.accepted_per_position)
        uncertainty = Uncertainty(counts.drafts, float(row.al_stderr), bool(row.al_stderr_exact),
                                  counts.mean)
    return Resolution(
        row.acceptance_length, row.acceptance_rate,  # type: ignore[arg-type]
        row.num_spec_tokens, tuple(float(r) for r in json.loads(row.per_position_rates)),
        bool(row.rates_derived), plan.layer, row.profile_set, row.profile, row.source,
        fallback, mismatch,
        notes(plan.notes, fallback, mismatch, row.value_method, row.copied_from),
        row.revision, uncertainty, counts)
