"""What the registry holds for a model and method, so that a no-profile refusal can say it.

A run refused ``no_match`` or ``fallback_no_match`` leaves its user guessing which K, thinking
mode or category would have matched. :func:`stored_variants` answers that in ONE query on the
profile key's index (its leading columns are model and method), made only when some answer is
such a refusal: a run that is answered costs nothing more, and a batch pays one query however
many of its lines are refused. The SQL is plain text on the DB-API cursor, so the resolver's
path still loads no schema tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

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
#: :data:`_SELECT` does. ``{{source}}``: where ``w``'s rows come from.
_SELECT_AS_OF = ("SELECT w.i, {{name}}, {ks}, {modes}, {categories} FROM {{source}} "
                 "JOIN profile_keys p ON p.model = w.model AND p.speculative_method = w.method"
                 " AND p.valid_from <= w.at AND (p.valid_until IS NULL OR p.valid_until > w.at) "
                 "GROUP BY w.i{{by_set}}")

#: On SQLite ``w`` is a TEMP table keyed by ``i`` (in the connection's own temp database, so a
#: read-only connection can make it): read in key order, the joined rows come grouped by ``i``
#: and the grouping needs no sort. From a VALUES list SQLite sorted every joined key row first
#: (docs/decisions.md, "What was stored, as of a time").
_SQLITE_WANTED = "registry_stored_as_of"
_SQLITE_WANTED_DDL = (f"CREATE TEMP TABLE {_SQLITE_WANTED} (i INTEGER PRIMARY KEY, "
                      "model TEXT NOT NULL, method TEXT NOT NULL, at TEXT NOT NULL)")

#: Wanted (model, method, time) rows per PostgreSQL statement (a VALUES list): four parameters
#: each, far below the driver's limit.
AS_OF_CHUNK = 200


def stored_variants_as_of(bind: ReadBind,
                          wanted: Iterable[tuple[str, str, datetime]], *, per_set: bool = True,
                          ) -> dict[tuple[str, str, datetime], StoredVariants]:
    """For each (model, method, time), what the registry held then: computed in the database
    over the stretches' key index (``profile_keys``), in one snapshot (one statement on SQLite,
    one per :data:`AS_OF_CHUNK` of them on PostgreSQL). Without ``per_set`` the sets are not
    told apart, as for :func:`stored_variants`."""
    from registry_db.resolve.lookup import bound, cursor

    wanted = sorted(set(wanted))
    found: dict[int, dict[str, tuple[frozenset, frozenset, frozenset]]] = {
        i: {} for i in range(len(wanted))}
    terms = {"name": "p.set_name" if per_set else "''",
             "by_set": ", p.set_name" if per_set else ""}
    with cursor(bind, snapshot=True) as c:
        rows = [(i, model, method, bound(at, c.dialect))
                for i, (model, method, at) in enumerate(wanted)]
        for i, name, ks, modes, categories in (_sqlite_as_of(c, rows, terms)
                                               if c.dialect == "sqlite"
                                               else _pg_as_of(c, rows, terms)):
            found[i][name] = (frozenset(map(int, ks.split(","))),
                              frozenset(modes.split(",")), frozenset(categories.split(",")))
    return {key: StoredVariants(found[i]) for i, key in enumerate(wanted)}


def _sqlite_as_of(c: Any, rows: list[tuple], terms: dict[str, str]) -> list[tuple]:
    from registry_db.resolve.lookup import over_temp_rows

    return over_temp_rows(c, _SQLITE_WANTED, _SQLITE_WANTED_DDL,
                          f"INSERT INTO temp.{_SQLITE_WANTED} VALUES (?, ?, ?, ?)", rows,
                          _statement(_SELECT_AS_OF, "sqlite").format(
                              source=f"temp.{_SQLITE_WANTED} w", **terms))


def _pg_as_of(c: Any, rows: list[tuple], terms: dict[str, str]) -> Iterator[tuple]:
    # Typed once, in the first row (VALUES takes its types from it).
    first, rest = "(CAST(%s AS INTEGER), %s, %s, CAST(%s AS TIMESTAMPTZ))", "(%s, %s, %s, %s)"
    for start in range(0, len(rows), AS_OF_CHUNK):
        chunk = rows[start:start + AS_OF_CHUNK]
        values = ", ".join([first] + [rest] * (len(chunk) - 1))
        c.cur.execute(_statement(_SELECT_AS_OF, "postgresql").format(
            source=f"(VALUES {values}) AS w (i, model, method, at)", **terms),
            tuple(v for row in chunk for v in row))
        yield from c.cur.fetchall()


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
