"""The coverage grid: which (model, method, thinking, category, K) cells the registry holds.

The grid itself is SQL: the view ``profile_coverage`` (migrations 0003 and 0005) crosses every
stored (model, speculative_method) pair with both thinking modes, every stored category and K
from 1 to the largest K, and puts each cell's holders (and their counts' stderr) beside it.
This module narrows that grid to a :class:`Selection` (the sets that count as the registry, and
filters on the key's columns) and groups it into :class:`Row` objects of :class:`Cell` objects,
which a table, a JSON document or a plot draws. Nothing here knows about output formats.

A selection that matches no stored profile is :class:`~registry_db.errors.EmptySelection`, whose
message says what the registry does hold for the filters given.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import column, select, table
from sqlalchemy.engine import Connection

from registry_db import history
from registry_db.errors import EmptySelection, NotFound
from registry_db.model import THINKING_MODES, Uncertainty
from registry_db.store.engine import Bind
from registry_db.store.read import _connect, set_names, unknown_set_message
from registry_db.store.schema import profile_sets, profiles

#: The view, declared here as a lightweight construct: its SQL lives only in the migrations.
VIEW = table(
    "profile_coverage",
    *(column(name) for name in (
        "model", "speculative_method", "thinking", "category", "num_spec_tokens",
        "profile_set", "profile_id", "acceptance_length", "method", "set_count", "drafts",
        "al_stderr", "al_stderr_exact")),
)

#: The filterable key columns, and how a message names each.
FILTER_WORDS = {"model": "model", "speculative_method": "method", "thinking": "thinking",
                "category": "category"}

#: The mark a value carries in a table when it was not measured, by method.
METHOD_MARKS = {"copied": "c", "assumed": "a", "literature": "l", "vendor_spec": "v"}
#: The mark of a cell that several selected sets hold (a resolution there is a conflict).
SHARED_MARK = "*"


@dataclass(frozen=True)
class Selection:
    """What to look at: filters on the key's columns (None: any) and the sets that count as the
    registry (empty: every stored set)."""

    model: str | None = None
    speculative_method: str | None = None
    thinking: str | None = None
    category: str | None = None
    sets: tuple[str, ...] = ()
    #: The registry as it was at this (aware) time, read from the history; None: as it is.
    as_of: datetime | None = None

    def filters(self) -> dict[str, str]:
        """The given filters, column -> value, in the key's order."""
        return {c: getattr(self, c) for c in FILTER_WORDS if getattr(self, c) is not None}


#: The filters of ``registry profiles``, which also filter on K.
PROFILE_FILTER_WORDS = {"model": "model", "speculative_method": "method",
                        "num_spec_tokens": "K", "thinking": "thinking", "category": "category"}


def describe(filters: dict[str, Any], words: dict[str, str] = FILTER_WORDS) -> str:
    """``model 'glm-5.3', category 'chat'``: filters in words."""
    return ", ".join(f"{words[c]} {v!r}" for c, v in filters.items())


@dataclass(frozen=True)
class Entry:
    """One set's profile at a cell."""

    profile_set: str
    acceptance_length: float
    method: str
    #: The AL's standard error, from the profile's counts (None without them).
    uncertainty: Uncertainty | None = None


@dataclass(frozen=True)
class Cell:
    """One K of a row: the selected sets' profiles there, by set name (none: missing). Where
    several sets hold the cell, each set's value is kept and shown: none stands for another."""

    k: int
    entries: tuple[Entry, ...] = ()

    @property
    def present(self) -> bool:
        """Whether any selected set holds the cell."""
        return bool(self.entries)

    @property
    def agreed(self) -> bool:
        """Whether every set holding the cell holds the same AL, method and standard error
        (True when one set or none holds it)."""
        return len({(e.acceptance_length, e.method, e.uncertainty) for e in self.entries}) <= 1

    @property
    def acceptance_length(self) -> float | None:
        """The AL when every holder agrees on it; None when missing or when the sets differ
        (:attr:`entries` has each set's)."""
        found = {e.acceptance_length for e in self.entries}
        return found.pop() if len(found) == 1 else None

    @property
    def method(self) -> str | None:
        """How the value was obtained, when every holder agrees; None when missing or not."""
        found = {e.method for e in self.entries}
        return found.pop() if len(found) == 1 else None

    @property
    def uncertainty(self) -> Uncertainty | None:
        """The AL's standard error when every holder agrees on the value; None when missing,
        without counts, or when the sets differ."""
        return self.entries[0].uncertainty if self.entries and self.agreed else None

    @property
    def sets(self) -> tuple[str, ...]:
        """The selected sets holding the cell, by name."""
        return tuple(e.profile_set for e in self.entries)

    @property
    def shared(self) -> bool:
        """Held by several selected sets: a resolution with this selection is a conflict."""
        return len(self.entries) > 1

    @property
    def measured(self) -> bool:
        """Present, and every holder measured it."""
        return self.present and all(e.method == "measured" for e in self.entries)

    @property
    def shown(self) -> tuple[Entry, ...]:
        """The entries a table shows: one per distinct (AL, method), in the sets' order."""
        out: dict[tuple[float, str], Entry] = {}
        for e in self.entries:
            out.setdefault((e.acceptance_length, e.method), e)
        return tuple(out.values())

    @property
    def marks(self) -> str:
        """The last shown value's method letter when it was not measured, then ``*`` when
        several sets hold the cell (the other values carry theirs in :meth:`value_text`)."""
        if not self.entries:
            return ""
        return METHOD_MARKS.get(self.shown[-1].method, "") + (SHARED_MARK if self.shared
                                                               else "")

    def value_text(self, number: Callable[[float], Any] = lambda v: v) -> str:
        """The values without the trailing :attr:`marks`: ``4.07``, or every set's where they
        differ, ``4.07/4.02c`` (each but the last with its method letter); ``-`` when missing.
        ``number`` writes each AL (a table rounds it)."""
        if not self.entries:
            return "-"
        *others, last = self.shown
        return "".join(f"{number(e.acceptance_length)}{METHOD_MARKS.get(e.method, '')}/"
                       for e in others) + str(number(last.acceptance_length))

    def text(self) -> str:
        """The table's cell: the value(s) with their marks, or ``-``."""
        return self.value_text() + self.marks

    def to_json(self) -> dict[str, Any]:
        """The cell object: ``k``; ``acceptance_length``, ``method`` and ``uncertainty`` when
        every holder agrees (null: missing, no counts, or the sets differ); ``sets``; and
        ``values``, each set's own ``{"profile_set", "acceptance_length", "method",
        "uncertainty"}``."""
        u = self.uncertainty
        return {"k": self.k, "acceptance_length": self.acceptance_length,
                "method": self.method, "sets": list(self.sets),
                "uncertainty": None if u is None else u.to_json(),
                "values": [{"profile_set": e.profile_set,
                            "acceptance_length": e.acceptance_length, "method": e.method,
                            "uncertainty": None if e.uncertainty is None
                            else e.uncertainty.to_json()} for e in self.entries]}


@dataclass(frozen=True)
class Row:
    """One (model, method, thinking, category) of the grid, with a cell for every K shown."""

    model: str
    speculative_method: str
    thinking: str
    category: str
    cells: tuple[Cell, ...]

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(model, speculative_method, thinking, category)."""
        return (self.model, self.speculative_method, self.thinking, self.category)

    def to_json(self) -> dict[str, Any]:
        """The issue's row object."""
        return {"model": self.model, "speculative_method": self.speculative_method,
                "thinking": self.thinking, "category": self.category,
                "cells": [c.to_json() for c in self.cells]}


@dataclass(frozen=True)
class Coverage:
    """The grid for one selection: rows by key, K from 1 to ``max_k``."""

    selection: Selection
    max_k: int
    rows: tuple[Row, ...]
    #: The sets holding at least one cell shown, by name.
    sets: tuple[str, ...] = ()

    @property
    def categories(self) -> tuple[str, ...]:
        """The categories with at least one stored cell, sorted."""
        return tuple(sorted({r.category for r in self.rows if any(c.present for c in r.cells)}))

    def marks(self) -> list[str]:
        """What each mark in the table means, for the marks that occur."""
        cells = [c for r in self.rows for c in r.cells]
        methods = {e.method for c in cells for e in c.shown}
        out = [f"{m} {name}" for name, m in METHOD_MARKS.items() if name in methods]
        if any(c.shared for c in cells):
            out.append(f"{SHARED_MARK} held by several sets (resolve refuses it; pick with --set)")
        return out

    def to_json(self) -> dict[str, Any]:
        """``{"rows": [...]}``, every present and missing cell listed."""
        return {"rows": [r.to_json() for r in self.rows]}


def read_coverage(bind: Bind, selection: Selection = Selection()) -> Coverage:
    """The coverage grid of ``selection``.

    Raises :class:`NotFound` for a set that is not stored (not held then, with ``as_of``),
    :class:`EmptySelection` when no stored profile in the selected sets matches the filters.
    """
    with _connect(bind) as conn:
        if selection.as_of is not None:
            return _coverage_as_of(conn, selection)
        if selection.sets:
            known = set_names(conn)
            for name in selection.sets:
                if name not in known:
                    raise NotFound(unknown_set_message(name, known))
        chosen = set(selection.sets)
        pairs, categories = _frame(conn, selection.sets)
        v = VIEW.c
        query = (select(v.model, v.speculative_method, v.thinking, v.category,
                        v.num_spec_tokens, v.profile_set, v.acceptance_length, v.method,
                        v.drafts, v.al_stderr, v.al_stderr_exact)
                 .where(*(v[c] == value for c, value in selection.filters().items())))
        grid: Grid = defaultdict(lambda: defaultdict(list))
        for r in conn.execute(query):
            if (r.model, r.speculative_method) not in pairs or r.category not in categories:
                continue
            # Touching the row keeps it in the grid even when no selected set holds any cell.
            cells = grid[(r.model, r.speculative_method, r.thinking, r.category)]
            if r.profile_set is not None and (not chosen or r.profile_set in chosen):
                # At K = 1 the totals' variance is exact (the view's flag predates that rule).
                u = None if r.drafts is None else Uncertainty(
                    int(r.drafts), float(r.al_stderr),
                    bool(r.al_stderr_exact) or r.num_spec_tokens == 1)
                cells[r.num_spec_tokens].append(Entry(r.profile_set, r.acceptance_length,
                                                      r.method, u))
        if not any(e for cells in grid.values() for e in cells.values()):
            raise EmptySelection(_holdings(selection, _stored_values(conn, selection.sets)))
    return _coverage(selection, grid)


#: The grid being read: (model, method, thinking, category) -> K -> the selected sets' entries.
Grid = dict[tuple[str, str, str, str], dict[int, list[Entry]]]


def _coverage(selection: Selection, grid: Grid) -> Coverage:
    """The grid's rows, K from 1 to the largest K held."""
    max_k = max(k for cells in grid.values() for k, e in cells.items() if e)
    rows = tuple(
        Row(*key, cells=tuple(
            Cell(k, tuple(sorted(cells.get(k, ()), key=lambda e: e.profile_set)))
            for k in range(1, max_k + 1)))
        for key, cells in sorted(grid.items()))
    used = sorted({s for r in rows for c in r.cells for s in c.sets})
    return Coverage(selection=selection, max_k=max_k, rows=rows, sets=tuple(used))


def _coverage_as_of(conn: Connection, selection: Selection) -> Coverage:
    """The grid of the registry as of ``selection.as_of``, by the view's rule (every stored
    pair, both thinking modes, every stored category) over the sets held then."""
    assert selection.as_of is not None
    held = history.held(conn, list(selection.sets) or None, as_of=selection.as_of)
    profiles = [(h.set.name, p) for h in held for p in h.set.profiles]
    pairs = sorted({(p.model, p.speculative_method) for _, p in profiles})
    categories = sorted({p.category for _, p in profiles})
    given = selection.filters()
    grid: Grid = {}
    for model, smethod in pairs:
        for thinking in THINKING_MODES:
            for category in categories:
                key = (model, smethod, thinking, category)
                if all(dict(zip(FILTER_WORDS, key))[c] == v for c, v in given.items()):
                    grid[key] = defaultdict(list)
    for name, p in profiles:
        cells = grid.get((p.model, p.speculative_method, p.thinking, p.category))
        if cells is not None:
            u = None if p.counts is None else p.counts.uncertainty(p.num_spec_tokens)
            cells[p.num_spec_tokens].append(Entry(name, float(p.acceptance_length), p.method,
                                                  u))
    if not any(e for cells in grid.values() for e in cells.values()):
        def values(col: str, others: dict[str, str]) -> list[str]:
            return sorted({getattr(p, col) for _, p in profiles
                           if all(getattr(p, c) == v for c, v in others.items())})
        raise EmptySelection(_holdings(selection, values))
    return _coverage(selection, grid)


def _held(sets: tuple[str, ...]):  # noqa: ANN202 - a SQLAlchemy clause
    """The profiles of the selected sets, as a WHERE clause on ``profiles``."""
    if not sets:
        return profiles.c.set_id.isnot(None)
    ids = select(profile_sets.c.id).where(profile_sets.c.name.in_(sets))
    return profiles.c.set_id.in_(ids)


def _frame(conn: Connection, sets: tuple[str, ...]) -> tuple[set[tuple[str, str]], set[str]]:
    """The grid's frame in the selected sets: their (model, method) pairs and categories.

    Read from the tables, not the view: the frame is small, the view's whole grid is not.
    """
    held = _held(sets)
    pairs = {(m, x) for m, x in conn.execute(
        select(profiles.c.model, profiles.c.speculative_method).where(held).distinct())}
    categories = set(conn.execute(select(profiles.c.category).where(held).distinct()).scalars())
    return pairs, categories


def _stored_values(conn: Connection, sets: tuple[str, ...]):  # noqa: ANN202
    """``values(column, filters)``: the stored values of a key column in the selected sets
    under the other filters, sorted."""
    held = _held(sets)

    def values(col: str, others: dict[str, Any]) -> list[Any]:
        return sorted(conn.execute(
            select(profiles.c[col]).where(
                held, *(profiles.c[c] == v for c, v in others.items())).distinct()).scalars())
    return values


def no_match_message(bind: Bind, given: dict[str, Any], sets: tuple[str, ...] = (),
                     as_of: datetime | None = None) -> str:
    """Why the profile filters ``given`` (column -> value, :data:`PROFILE_FILTER_WORDS`'s
    columns) match no stored profile in ``sets`` (all when empty), now or as of a time: what
    the registry holds under the other filters, with the nearest name."""
    selection = Selection(sets=sets, as_of=as_of)
    with _connect(bind) as conn:
        if as_of is None:
            return _holdings(selection, _stored_values(conn, sets), given,
                             PROFILE_FILTER_WORDS)
        profs = [p for h in history.held(conn, list(sets) or None, as_of=as_of)
                 for p in h.set.profiles]

    def values(col: str, others: dict[str, Any]) -> list[Any]:
        return sorted({getattr(p, col) for p in profs
                       if all(getattr(p, c) == v for c, v in others.items())})
    return _holdings(selection, values, given, PROFILE_FILTER_WORDS)


def _holdings(selection: Selection, values: Any, given: dict[str, Any] | None = None,
              words: dict[str, str] = FILTER_WORDS) -> str:
    """Why nothing matched: for each filter, what the registry holds under the other filters
    (``values(column, filters)``, from the tables or from the history as of a time)."""
    scope = (f"the set{'s' if len(selection.sets) > 1 else ''} {', '.join(selection.sets)}"
             if selection.sets else "the registry")
    if selection.as_of is not None:
        scope += f" as of {selection.as_of.isoformat()}"
    given = selection.filters() if given is None else given
    if not given:
        if selection.sets:
            return f"{scope} hold no profiles"
        return (f"{scope} holds no profiles" if selection.as_of is not None else
                f"{scope} holds no profiles yet; add some with `registry import PATH`")
    sentences: list[str] = []
    for col, value in given.items():
        others = {c: v for c, v in given.items() if c != col}
        found = values(col, others)
        who = scope if not sentences else "it"
        where = (f"With {describe(others, words)}, {who}" if others
                 else who[:1].upper() + who[1:])
        if not found:
            sentences.append(f"{where} holds nothing at all.")
            continue
        near = difflib.get_close_matches(value, found, n=1, cutoff=0.6) \
            if isinstance(value, str) else []
        hint = f" (did you mean {near[0]!r}?)" if near and near[0] != value else ""
        shown = ", ".join(str(v) for v in found[:20]) + (f", … ({len(found)} in all)"
                                                         if len(found) > 20 else "")
        sentences.append(f"{where} holds {words[col]}: {shown}{hint}.")
    return f"no stored profile matches {describe(given, words)}. " + " ".join(sentences)
