"""The coverage grid's values and how it is built from rows, without SQLAlchemy: the
SQLAlchemy reader (:mod:`registry_db.analyze.coverage`, whose names these are too) and the
command line's DB-API one (:func:`read_coverage_dbapi`) run the same statements through
:func:`read_grid`, so that ``registry coverage`` reads a registry at the head without loading
SQLAlchemy (a test holds both equal)."""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from registry_db.errors import EmptySelection, NotFound
from registry_db.model import Uncertainty
from registry_db.store.messages import unknown_set_message

#: The columns of the view ``profile_coverage`` the grid reads, in this order.
VIEW_COLUMNS = ("model", "speculative_method", "thinking", "category", "num_spec_tokens",
                "profile_set", "acceptance_length", "method", "drafts", "al_stderr",
                "al_stderr_exact")

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


#: The grid being read: (model, method, thinking, category) -> K -> the selected sets' entries.
Grid = dict[tuple[str, str, str, str], dict[int, list[Entry]]]


def grid_coverage(selection: Selection, grid: Grid) -> Coverage:
    """The grid's rows, K from 1 to the largest K held."""
    max_k = max(k for cells in grid.values() for k, e in cells.items() if e)
    rows = tuple(
        Row(*key, cells=tuple(
            Cell(k, tuple(sorted(cells.get(k, ()), key=lambda e: e.profile_set)))
            for k in range(1, max_k + 1)))
        for key, cells in sorted(grid.items()))
    used = sorted({s for r in rows for c in r.cells for s in c.sets})
    return Coverage(selection=selection, max_k=max_k, rows=rows, sets=tuple(used))


def read_grid(selection: Selection, *, set_names: Callable[[], list[str]],
              frame: Callable[[], tuple[set[tuple[str, str]], set[str]]],
              view_rows: Callable[[], Iterable[Any]],
              stored_values: Callable[[], Any]) -> Coverage:
    """The grid of ``selection`` (as of now) from its statements' answers: the stored set
    names, the selected sets' frame (pairs, categories), the view's rows (:data:`VIEW_COLUMNS`,
    filtered) and ``values(column, filters)`` for the message of an empty selection."""
    if selection.sets:
        known = set_names()
        for name in selection.sets:
            if name not in known:
                raise NotFound(unknown_set_message(name, known))
    chosen = set(selection.sets)
    pairs, categories = frame()
    grid: Grid = defaultdict(lambda: defaultdict(list))
    for (model, smethod, thinking, category, k, profile_set, al, method, drafts, stderr,
         exact) in view_rows():
        if (model, smethod) not in pairs or category not in categories:
            continue
        # Touching the row keeps it in the grid even when no selected set holds any cell.
        cells = grid[(model, smethod, thinking, category)]
        if profile_set is not None and (not chosen or profile_set in chosen):
            # At K = 1 the totals' variance is exact (the view's flag predates that rule).
            u = None if drafts is None else Uncertainty(
                int(drafts), float(stderr), bool(exact) or k == 1)
            cells[k].append(Entry(profile_set, al, method, u))
    if not any(e for cells in grid.values() for e in cells.values()):
        raise EmptySelection(holdings(selection, stored_values()))
    return grid_coverage(selection, grid)


def read_coverage_dbapi(cur: Any, dialect: str, selection: Selection) -> Coverage:
    """:func:`registry_db.analyze.coverage.read_coverage` of a selection as of now, on a
    DB-API cursor (``sqlite3`` or psycopg; ``dialect`` says which markers it takes)."""
    mark = "?" if dialect == "sqlite" else "%s"
    held, held_params = "profiles.set_id IS NOT NULL", []
    if selection.sets:
        held = ("profiles.set_id IN (SELECT profile_sets.id FROM profile_sets WHERE "
                f"profile_sets.name IN ({', '.join([mark] * len(selection.sets))}))")
        held_params = list(selection.sets)

    def rows(statement: str, params: list[Any]) -> list[Any]:
        cur.execute(statement, params)
        return cur.fetchall()

    def frame() -> tuple[set[tuple[str, str]], set[str]]:
        pairs = {(m, x) for m, x in rows("SELECT DISTINCT profiles.model, "
                                         f"profiles.speculative_method FROM profiles WHERE "
                                         f"{held}", held_params)}
        return pairs, {c for (c,) in rows(f"SELECT DISTINCT profiles.category FROM profiles "
                                          f"WHERE {held}", held_params)}

    def stored_values() -> Callable[[str, dict[str, Any]], list[Any]]:
        def values(col: str, others: dict[str, Any]) -> list[Any]:
            where = "".join(f" AND profiles.{c} = {mark}" for c in others)
            return sorted(v for (v,) in rows(
                f"SELECT DISTINCT profiles.{col} FROM profiles WHERE {held}{where}",
                [*held_params, *others.values()]))
        return values

    filters = selection.filters()
    where = " AND ".join(f"profile_coverage.{c} = {mark}" for c in filters)
    view = (f"SELECT {', '.join(VIEW_COLUMNS)} FROM profile_coverage"
            + (f" WHERE {where}" if where else ""))
    return read_grid(
        selection,
        set_names=lambda: [n for (n,) in rows("SELECT profile_sets.name FROM profile_sets "
                                              "ORDER BY profile_sets.name", [])],
        frame=frame, view_rows=lambda: rows(view, list(filters.values())),
        stored_values=stored_values)


def holdings(selection: Selection, values: Any, given: dict[str, Any] | None = None,
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
