"""What the registry holds for a model and method, so that a no-profile refusal can say it.

A run refused ``no_match`` or ``fallback_no_match`` leaves its user guessing which K, thinking
mode or category would have matched. :func:`stored_variants` answers that in ONE query on the
profile key's index (its leading columns are model and method), made only when some answer is
such a refusal: a run that is answered costs nothing more, and a batch pays one query however
many of its lines are refused. The SQL is plain text on the DB-API cursor, so the resolver's
path still loads no schema tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind

#: Up to this many distinct models the query names them (an index range per model); past it,
#: one pass over the key index reads every (model, method) instead of a huge IN list.
MAX_NAMED_MODELS = 500

#: What is stored per (model, method, set): its Ks, thinking modes and categories, each
#: aggregated DISTINCT into one comma-separated text (no category or mode holds a comma: the
#: spec's rules; a K is an integer), the set's name joined after the grouping. One pass over
#: the key index, one row per (model, method, set), one statement for both dialects
#: (docs/decisions.md). ``{ks}``, ``{modes}`` and ``{categories}`` are the dialect's aggregate
#: (:data:`_AGGREGATE`) of each column, filled in by :func:`_statement`.
_SELECT = ("SELECT d.model, d.speculative_method, s.name, d.ks, d.modes, d.categories FROM ("
           "SELECT p.model, p.speculative_method, p.set_id, {ks} AS ks, {modes} AS modes, "
           "{categories} AS categories FROM profiles p{{where}} "
           "GROUP BY p.model, p.speculative_method, p.set_id) d "
           "JOIN profile_sets s ON s.id = d.set_id")

#: The same across every set, for runs that name none: without the set in the grouping a
#: (model, method) held by many sets is one row, not one per set.
_SELECT_ALL_SETS = ("SELECT p.model, p.speculative_method, '' AS name, {ks}, {modes}, "
                    "{categories} FROM profiles p{{where}} "
                    "GROUP BY p.model, p.speculative_method")

#: Each dialect's DISTINCT text aggregate, comma-separated.
_AGGREGATE = {"sqlite": "group_concat(DISTINCT {})",
              "postgresql": "string_agg(DISTINCT CAST({} AS TEXT), ',')"}


def _statement(template: str, dialect: str) -> str:
    agg = _AGGREGATE[dialect]
    return template.format(ks=agg.format("p.num_spec_tokens"), modes=agg.format("p.thinking"),
                           categories=agg.format("p.category"))


@dataclass(frozen=True)
class StoredVariants:
    """What is stored for one model and method, per set: ``{set: (Ks, thinking modes,
    categories)}``."""

    by_set: dict[str, tuple[frozenset[int], frozenset[str], frozenset[str]]]

    def describe(self, sets: Iterable[str] | None = None) -> str:
        """``K 3, 5; thinking off, on; categories chat, coding`` for the rows in ``sets``
        (every set when None); empty when none is stored there."""
        held = [v for name, v in self.by_set.items() if sets is None or name in sets]
        if not held:
            return ""
        ks = sorted(set().union(*(v[0] for v in held)))
        thinking = sorted(set().union(*(v[1] for v in held)))
        categories = sorted(set().union(*(v[2] for v in held)))
        return (f"K {', '.join(map(str, ks))}; thinking {', '.join(thinking)}; "
                f"categories {', '.join(categories)}")


def stored_variants(bind: ReadBind,
                    pairs: Iterable[tuple[str, str]], *, per_set: bool = True,
                    ) -> dict[tuple[str, str], StoredVariants]:
    """For each (model, method) pair, what is stored: one statement; a pair with nothing
    stored maps to no sets. Without ``per_set`` the sets are not told apart (one entry named
    ``''``): enough to describe what every set holds (``describe()`` with no sets), for a
    fraction of the rows."""
    wanted = sorted(set(pairs))
    found: dict[tuple[str, str], dict[str, tuple[frozenset, frozenset, frozenset]]] = {
        p: {} for p in wanted}
    models = sorted({m for m, _ in wanted})
    for model, method, name, ks, modes, categories in _rows(
            bind, models if len(models) <= MAX_NAMED_MODELS else None,
            _SELECT if per_set else _SELECT_ALL_SETS):
        held = found.get((model, method))
        if held is None:
            continue
        held[name] = (frozenset(map(int, ks.split(","))), frozenset(modes.split(",")),
                      frozenset(categories.split(",")))
    return {pair: StoredVariants(held) for pair, held in found.items()}


#: What was stored per (model, method, time) and set, in one statement over the key index:
#: each wanted (model, method, time) is a row of ``w`` (numbered ``i``), joined to the stretches
#: of time each set held each key of that model and method (``profile_keys``: a new value does
#: not make a new stretch, so about one row per key, as in ``profiles``), aggregated as
#: :data:`_SELECT` does.
_SELECT_AS_OF = ("WITH w (i, model, method, at) AS (VALUES {{rows}}) "
                 "SELECT w.i, {{name}}, {ks}, {modes}, {categories} FROM w "
                 "JOIN profile_keys p ON p.model = w.model AND p.speculative_method = w.method"
                 " AND p.valid_from <= w.at AND (p.valid_until IS NULL OR p.valid_until > w.at) "
                 "GROUP BY w.i{{by_set}}")

#: Wanted (model, method, time) rows per statement: four parameters each, far below either
#: driver's limit.
AS_OF_CHUNK = 200


def stored_variants_as_of(bind: ReadBind,
                          wanted: Iterable[tuple[str, str, datetime]], *, per_set: bool = True,
                          ) -> dict[tuple[str, str, datetime], StoredVariants]:
    """For each (model, method, time), what the registry held then: computed in the database
    over the stretches' key index (``profile_keys``), one statement per :data:`AS_OF_CHUNK`
    of them, in one snapshot. Without ``per_set`` the sets are not told apart, as for
    :func:`stored_variants`."""
    from registry_db.resolve.lookup import bound, cursor

    wanted = sorted(set(wanted))
    found: dict[int, dict[str, tuple[frozenset, frozenset, frozenset]]] = {
        i: {} for i in range(len(wanted))}
    with cursor(bind, snapshot=True) as c:
        marker = "?" if c.dialect == "sqlite" else "%s"
        # Typed once, in the first row, for PostgreSQL (VALUES takes its types from it).
        first = (f"(CAST({marker} AS INTEGER), {marker}, {marker}, "
                 f"{'CAST(%s AS TIMESTAMPTZ)' if c.dialect == 'postgresql' else marker})")
        rest = f"({marker}, {marker}, {marker}, {marker})"
        for start in range(0, len(wanted), AS_OF_CHUNK):
            chunk = wanted[start:start + AS_OF_CHUNK]
            rows = ", ".join([first] + [rest] * (len(chunk) - 1))
            params = tuple(v for i, (model, method, at) in enumerate(chunk, start)
                           for v in (i, model, method, bound(at, c.dialect)))
            c.cur.execute(_statement(_SELECT_AS_OF, c.dialect).format(
                rows=rows, name="p.set_name" if per_set else "''",
                by_set=", p.set_name" if per_set else ""), params)
            for i, name, ks, modes, categories in c.cur.fetchall():
                found[i][name] = (frozenset(map(int, ks.split(","))),
                                  frozenset(modes.split(",")), frozenset(categories.split(",")))
    return {key: StoredVariants(found[i]) for i, key in enumerate(wanted)}


def _rows(bind: ReadBind,
          models: list[str] | None, select: str) -> list[tuple]:
    # On the DB-API cursor of the resolver's lookup (registry_db.resolve.lookup.cursor): one
    # statement and nothing around it (no BEGIN), in the caller's transaction when it hands in a
    # connection, and on the command line's read-only sqlite3 connection as well.
    from registry_db.resolve.lookup import cursor

    with cursor(bind) as c:
        marker = "?" if c.dialect == "sqlite" else "%s"
        where = "" if models is None else (
            f" WHERE p.model IN ({', '.join([marker] * len(models))})")
        c.cur.execute(_statement(select, c.dialect).format(where=where), tuple(models or ()))
        return list(c.cur.fetchall())
