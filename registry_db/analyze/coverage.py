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

from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy import column, select, table
from sqlalchemy.engine import Connection

from registry_db import history
from registry_db.analyze.grid import (  # noqa: F401 (the grid's names, public here too)
    FILTER_WORDS,
    METHOD_MARKS,
    PROFILE_FILTER_WORDS,
    SHARED_MARK,
    VIEW_COLUMNS,
    Cell,
    Coverage,
    Entry,
    Grid,
    Row,
    Selection,
    describe,
    grid_coverage,
    holdings,
    read_grid,
)
from registry_db.errors import EmptySelection
from registry_db.model import THINKING_MODES
from registry_db.store.engine import Bind
from registry_db.store.read import _connect, set_names
from registry_db.store.schema import profile_sets, profiles

#: The view, declared here as a lightweight construct: its SQL lives only in the migrations.
VIEW = table(
    "profile_coverage",
    *(column(name) for name in (
        "model", "speculative_method", "thinking", "category", "num_spec_tokens",
        "profile_set", "profile_id", "acceptance_length", "method", "set_count", "drafts",
        "al_stderr", "al_stderr_exact")),
)


def read_coverage(bind: Bind, selection: Selection = Selection()) -> Coverage:  # noqa: B008
    """The coverage grid of ``selection``.

    Raises :class:`NotFound` for a set that is not stored (not held then, with ``as_of``),
    :class:`EmptySelection` when no stored profile in the selected sets matches the filters.
    """
    with _connect(bind) as conn:
        if selection.as_of is not None:
            return _coverage_as_of(conn, selection)
        v = VIEW.c
        query = (select(*(v[c] for c in VIEW_COLUMNS))
                 .where(*(v[c] == value for c, value in selection.filters().items())))
        return read_grid(selection, set_names=lambda: set_names(conn),
                         frame=lambda: _frame(conn, selection.sets),
                         view_rows=lambda: conn.execute(query),
                         stored_values=lambda: _stored_values(conn, selection.sets))


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
        raise EmptySelection(holdings(selection, values))
    return grid_coverage(selection, grid)


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
            return holdings(selection, _stored_values(conn, sets), given,
                             PROFILE_FILTER_WORDS)
        profs = [p for h in history.held(conn, list(sets) or None, as_of=as_of)
                 for p in h.set.profiles]

    def values(col: str, others: dict[str, Any]) -> list[Any]:
        return sorted({getattr(p, col) for p in profs
                       if all(getattr(p, c) == v for c, v in others.items())})
    return holdings(selection, values, given, PROFILE_FILTER_WORDS)
