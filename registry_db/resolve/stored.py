"""What the registry holds for a model and method, so that a no-profile refusal can say it.

A run refused ``no_match`` or ``fallback_no_match`` leaves its user guessing which K, thinking
mode or category would have matched. :func:`stored_variants` answers that in ONE query on the
profile key's index (its leading columns are model and method), made only when some answer is
such a refusal: a run that is answered costs nothing more, and a batch pays one query however
many of its lines are refused. The SQL is plain text on the DB-API cursor, so the resolver's
path still loads no ORM models.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from sqlalchemy.engine import Connection, Engine

#: Up to this many distinct models the query names them (an index range per model); past it,
#: one pass over the key index reads every (model, method) instead of a huge IN list.
MAX_NAMED_MODELS = 500

_SELECT = ("SELECT DISTINCT p.model, p.speculative_method, s.name, p.num_spec_tokens, "
           "p.thinking, p.category FROM profiles p JOIN profile_sets s ON s.id = p.set_id")


@dataclass(frozen=True)
class StoredVariants:
    """The ``(set, K, thinking, category)`` rows stored for one model and method."""

    rows: tuple[tuple[str, int, str, str], ...]

    def describe(self, sets: Iterable[str] | None = None) -> str:
        """``K 3, 5; thinking off, on; categories chat, coding`` for the rows in ``sets``
        (every set when None); empty when none is stored there."""
        scope = None if sets is None else set(sets)
        rows = [r for r in self.rows if scope is None or r[0] in scope]
        if not rows:
            return ""
        ks = sorted({r[1] for r in rows})
        thinking = sorted({r[2] for r in rows})
        categories = sorted({r[3] for r in rows})
        return (f"K {', '.join(map(str, ks))}; thinking {', '.join(thinking)}; "
                f"categories {', '.join(categories)}")


def stored_variants(bind: Engine | Connection | sqlite3.Connection,
                    pairs: Iterable[tuple[str, str]],
                    ) -> dict[tuple[str, str], StoredVariants]:
    """For each (model, method) pair, what is stored: one statement; a pair with nothing
    stored maps to no rows."""
    wanted = sorted(set(pairs))
    found: dict[tuple[str, str], set] = {pair: set() for pair in wanted}
    models = sorted({m for m, _ in wanted})
    for model, method, *row in _rows(bind, models if len(models) <= MAX_NAMED_MODELS else None):
        held = found.get((model, method))
        if held is not None:
            held.add(tuple(row))
    return {pair: StoredVariants(tuple(sorted(held))) for pair, held in found.items()}


_SELECT_HISTORY = ("SELECT DISTINCT p.model, p.speculative_method, v.set_name, v.revision, "
                   "p.num_spec_tokens, p.thinking, p.category FROM revision_profiles p "
                   "JOIN revisions v ON v.id = p.revision_id")


def stored_variants_as_of(bind: Engine | Connection | sqlite3.Connection,
                          wanted: Iterable[tuple[str, str, datetime]],
                          ) -> dict[tuple[str, str, datetime], StoredVariants]:
    """For each (model, method, time), what the registry held then: two statements (every
    revision's variants of those models, and every set's revisions), whatever the number of
    distinct times."""
    from registry_db.resolve.lookup import cursor
    from registry_db.resolve.timeline import Timeline

    wanted = sorted(set(wanted))
    models = sorted({m for m, _, _ in wanted})
    named = len(models) <= MAX_NAMED_MODELS
    with cursor(bind, snapshot=True) as c:
        marker = "?" if c.dialect == "sqlite" else "%s"
        sql = _SELECT_HISTORY if not named else (
            f"{_SELECT_HISTORY} WHERE p.model IN ({', '.join([marker] * len(models))})")
        c.cur.execute(sql, tuple(models) if named else ())
        rows: dict[tuple[str, str], list[tuple]] = {}
        for model, method, name, revision, *row in c.cur.fetchall():
            rows.setdefault((model, method), []).append((name, revision, *row))
        timeline = Timeline.read(c)
    out = {}
    for model, method, at in wanted:
        held = {(name, *row) for name, revision, *row in rows.get((model, method), ())
                if timeline.revision_at(name, at) == revision}
        out[model, method, at] = StoredVariants(tuple(sorted(held)))
    return out


def _rows(bind: Engine | Connection | sqlite3.Connection,
          models: list[str] | None) -> list[tuple]:
    # On the DB-API cursor of the resolver's lookup (registry_db.resolve.lookup.cursor): one
    # statement and nothing around it (no BEGIN), in the caller's transaction when it hands in a
    # connection, and on the command line's read-only sqlite3 connection as well.
    from registry_db.resolve.lookup import cursor

    with cursor(bind) as c:
        marker = "?" if c.dialect == "sqlite" else "%s"
        sql = _SELECT if models is None else (
            f"{_SELECT} WHERE p.model IN ({', '.join([marker] * len(models))})")
        c.cur.execute(sql, tuple(models or ()))
        return list(c.cur.fetchall())
