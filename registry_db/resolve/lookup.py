"""The resolver's SQL, run: the decision itself, made in the database by one statement per run
or per batch (:mod:`registry_db.resolve.statements` holds the text and says how it decides).

A :class:`Lookup` names a key prefix, the workload's category, the pin's fallback and the sets
in scope; the statement keeps the profiles of the sets in scope, prefers the category over the
fallback and counts the sets that hold the winner, probing the profile key's unique index. Many
runs go together (SQLite: a TEMP table; PostgreSQL: one JSON parameter), however many there
are. Statements run on the DB-API cursor (:func:`cursor`), driver errors translated; rows stay
here, read by name (:class:`LookupRow`), and callers get a :class:`Winner` per lookup.
"""

from __future__ import annotations

import contextlib
import operator
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from registry_db.model import Counts, Uncertainty
from registry_db.resolve.statements import (
    LIVE_SETS,
    LOOKUP_ONE,
    PG_LOOKUP_MANY,
    PG_LOOKUP_MANY_AS_OF,
    SQLITE_AS_OF_DDL,
    SQLITE_AS_OF_INSERT,
    SQLITE_AS_OF_TABLE,
    SQLITE_KEYS_DDL,
    SQLITE_KEYS_INSERT,
    SQLITE_KEYS_TABLE,
    SQLITE_LOOKUP_MANY,
    SQLITE_LOOKUP_MANY_AS_OF,
    named_one_statement,
    one_statement,
    pg_parameters,
)
from registry_db.store.pg_read import PgReader
from registry_db.store.stored_counts import counts_from_row

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from sqlalchemy.engine import Connection

    from registry_db.store.engine import ReadBind

#: The statements' names are re-exported: callers and tests read them from here.
__all__ = ["Candidate", "Cursor", "Key", "LIVE_SETS", "LOOKUP_ONE", "Lookup", "LookupRow",
           "PG_CHUNK", "PG_LOOKUP_MANY", "PG_LOOKUP_MANY_AS_OF", "SQLITE_AS_OF_DDL",
           "SQLITE_AS_OF_INSERT", "SQLITE_AS_OF_TABLE", "SQLITE_KEYS_DDL",
           "SQLITE_KEYS_INSERT", "SQLITE_KEYS_TABLE", "SQLITE_LOOKUP_MANY",
           "SQLITE_LOOKUP_MANY_AS_OF", "Winner", "bound", "cursor", "lookup_many", "lookup_one",
           "named_one_statement", "one_parameters", "one_statement", "pg_parameters",
           "candidate", "set_names", "stored_among", "stored_counts", "stored_rates", "winners"]

#: (model, speculative_method, num_spec_tokens, thinking, category): a profile's key.
Key = tuple[str, str, int, str, str]

#: Lookups per PostgreSQL statement: bounds the parameter's memory, not the round trips.
PG_CHUNK = 50_000


class Lookup(NamedTuple):
    """What one run looks up: the key prefix, up to two categories, the sets in scope."""

    model: str
    method: str
    k: int
    thinking: str
    #: The workload's category (preferred), or None when the workload states none.
    category: str | None
    #: The pin's fallback_category, or None.
    fallback: str | None
    #: The sets in scope, sorted; None: every set.
    scope: tuple[str, ...] | None = None
    #: The registry as it stood at this UTC time (aware); None: as it stands.
    as_of: datetime | None = None


class Candidate(NamedTuple):
    """One stored profile of the winning key: the set holding it and what it says."""

    profile_set: str
    acceptance_length: float
    #: The stored per-position rates, or None when the profile states none.
    rates: tuple[float, ...] | None
    source: str | None
    hardware: str | None
    method: str
    copied_from: str | None
    #: The revision of its set that holds it (the set's current one, or the one of the time).
    revision: int
    #: The counts its value came from, and their stored standard error (None: no counts).
    counts: Counts | None = None
    uncertainty: Uncertainty | None = None


class Winner(NamedTuple):
    """The database's decision for one lookup: the key it chose and the sets that hold it."""

    #: The category of the chosen key: the workload's, or the fallback when it stood in.
    category: str
    #: How many sets in scope hold the winning key (more than one: a conflict).
    set_count: int
    #: The winning key's profiles, one per set in scope that holds it, each as its rows
    #: (:class:`LookupRow`'s fields: one row per stored rate, or one) as the statement gave
    #: them: an answer reads the one profile it needs, not a :class:`Candidate` first.
    profiles: tuple[Sequence[Sequence], ...]

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """The winning key's profiles as candidates, by set name."""
        return tuple(sorted(map(candidate, self.profiles)))


class LookupRow(NamedTuple):
    """One row of the lookup statements: a candidate profile of a lookup's winning key, once
    per stored rate (``position`` and ``rate`` null when it stores none)."""

    lookup_id: int
    category: str
    #: The sets in scope that hold the winning key (the one-run statement puts it on a
    #: profile's first row only; null on the others).
    set_count: int | None
    profile_id: int
    set_name: str
    acceptance_length: float
    method: str
    copied_from: str | None
    source: str | None
    hardware: str | None
    position: int | None
    rate: float | None
    revision: int
    #: The profile's counts and their stored ``al_stderr`` (null without counts).
    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    accepted_per_position: str | None
    al_stderr: float | None


def bound(moment: datetime, dialect: str) -> Any:
    """``moment`` (UTC) as a statement's parameter on ``dialect``, the one place a time is
    bound: PostgreSQL compares ``timestamptz`` values; SQLite compares text, in the stored
    format."""
    if dialect == "sqlite":
        # isoformat writes year 1 as "0001" (strftime's %Y writes "1" on glibc, which would sort
        # after "2026"); the first 26 characters leave out the zone, which is UTC.
        return moment.isoformat(" ", "microseconds")[:26]
    return moment


def one_parameters(lookup: Lookup, order: Sequence[str], dialect: str = "sqlite") -> tuple:
    """``lookup``'s values in a one-run statement's parameter ``order``
    (:func:`~registry_db.resolve.statements.one_statement`; ``dialect``: how its time is bound)."""
    out: list[Any] = []
    at = None  # the time, bound once: the as-of statement names it three times
    for name in order:
        if name.startswith("set_"):  # set_1 ... set_N: the scope's names
            out.append(lookup.scope[int(name[4:]) - 1])  # type: ignore[index]
        elif name == "as_of":
            if at is None:
                at = bound(lookup.as_of, dialect)  # type: ignore[arg-type]
            out.append(at)
        else:
            out.append(getattr(lookup, name))
    return tuple(out)


class Cursor(NamedTuple):
    """A DB-API cursor and the dialect whose SQL it speaks (``sqlite`` or ``postgresql``)."""

    cur: Any
    dialect: str


@contextlib.contextmanager
def cursor(bind: ReadBind, *, snapshot: bool = False) -> Iterator[Cursor]:
    """A cursor on the engine's pooled connection (returned afterwards) or on the caller's.

    On the caller's connection the statements join whatever transaction it has. On an engine's,
    ``snapshot`` makes them read one snapshot in one transaction, which the pool rolls back on
    return; without it each statement reads on its own (autocommit), which spares PostgreSQL
    the BEGIN and ROLLBACK round trips around a one-query resolution. A bare ``sqlite3``
    connection (the command line's read-only path, :mod:`registry_db.store.sqlite_read`) is used
    as it is, without SQLAlchemy. Driver errors are translated either way.
    """
    if isinstance(bind, sqlite3.Connection):
        with _sqlite_cursor(bind, snapshot) as c:
            yield c
        return
    if isinstance(bind, PgReader):
        with _pg_reader_cursor(bind, snapshot) as c:
            yield c
        return
    # Imported here: the command line's sqlite3 path never needs SQLAlchemy's side.
    from registry_db.store.engine import translated

    engine = bind.engine
    dialect = engine.dialect.name
    with translated(engine.url):
        if bind is engine:  # an engine (an Engine is its own .engine): its pooled connection
            own = pooled = engine.raw_connection()
        else:  # the caller's connection, in its transaction
            own, pooled = None, cast("Connection", bind).connection
        try:
            dbapi = pooled.dbapi_connection
            assert dbapi is not None  # checked out: a live DB-API connection
            if own is not None and dialect == "postgresql":
                with _pg_session(dbapi, snapshot) as cur:
                    yield Cursor(cur, dialect)
                return
            cur = dbapi.cursor()
            try:
                if snapshot and own is not None:
                    cur.execute("BEGIN")
                yield Cursor(cur, dialect)
            finally:
                cur.close()
        finally:
            if own is not None:
                own.close()


#: libpq's PQTRANSACTION_IDLE (``psycopg.pq.TransactionStatus.IDLE``): no transaction open.
_PG_IDLE = 0


@contextlib.contextmanager
def _pg_session(dbapi: Any, snapshot: bool) -> Iterator[Any]:
    """A cursor on a psycopg connection of our own, the engine's pooled one or the command
    line's (:class:`~registry_db.store.pg_read.PgReader`): without ``snapshot`` each statement
    reads on its own (autocommit: no BEGIN and ROLLBACK round trips around a one-query
    resolution); with it, one REPEATABLE READ, READ ONLY transaction, rolled back afterwards.
    The connection's autocommit is given back as it was. In a transaction already (a streamed
    batch's one snapshot, :func:`registry_db.resolve.reading.snapshot`) the cursor joins it."""
    if dbapi.info.transaction_status != _PG_IDLE:
        joined = dbapi.cursor()
        try:
            yield joined
        finally:
            joined.close()
        return
    was = dbapi.autocommit
    dbapi.autocommit = not snapshot
    cur = dbapi.cursor()
    done = False
    try:
        if snapshot:
            # READ COMMITTED gives each statement its own snapshot: a batch's set names and
            # profiles could come from before and after a concurrent import.
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield cur
        done = True
    finally:
        cur.close()
        # After an error the first one is the one to report, not the rollback's.
        with contextlib.nullcontext() if done else contextlib.suppress(Exception):
            if snapshot and not dbapi.closed:
                dbapi.rollback()
            dbapi.autocommit = was


@contextlib.contextmanager
def _pg_reader_cursor(reader: PgReader, snapshot: bool) -> Iterator[Cursor]:
    try:
        with _pg_session(reader.conn, snapshot) as cur:
            yield Cursor(cur, "postgresql")
    except Exception as exc:
        # Imported only on an error: translating needs the store's engine module.
        from registry_db.store.engine import is_driver_error, translate

        if not is_driver_error(exc):
            raise
        raise translate(exc, reader.where) from exc


@contextlib.contextmanager
def _sqlite_cursor(conn: sqlite3.Connection, snapshot: bool) -> Iterator[Cursor]:
    plain = conn.cursor()
    # In the caller's transaction already (a streamed batch's one snapshot): join it.
    begin = snapshot and not conn.in_transaction
    try:
        if begin:
            plain.execute("BEGIN")
        yield Cursor(plain, "sqlite")
    except sqlite3.Error as exc:
        # Imported only on an error: translating needs the store's engine module.
        from registry_db.store.engine import translate

        raise translate(exc) from exc
    finally:
        if begin and conn.in_transaction:
            conn.rollback()
        plain.close()


def _markers(c: Cursor, n: int) -> str:
    return ", ".join(["?" if c.dialect == "sqlite" else "%s"] * n)


def stored_among(c: Cursor, names: Sequence[str], as_of: datetime | None = None) -> list[str]:
    """Which of ``names`` are stored sets (one query on the unique name index, whatever the
    number of sets in the database); ``as_of``: which were sets at that time (one query on
    the revisions' (set_name, revision) index)."""
    if as_of is None:
        c.cur.execute(f"SELECT name FROM profile_sets WHERE name IN "
                      f"({_markers(c, len(names))})", tuple(names))
    else:
        at = _markers(c, 1)
        c.cur.execute(LIVE_SETS.format(at=at) + f" AND v.set_name IN ({_markers(c, len(names))})",
                      (bound(as_of, c.dialect), *names))
    return [name for (name,) in c.cur.fetchall()]


def set_names(c: Cursor, as_of: datetime | None = None) -> list[str]:
    """Every stored set's name, or every set's of the registry as of ``as_of`` (one query; the
    resolver checks named sets against them)."""
    if as_of is None:
        c.cur.execute("SELECT name FROM profile_sets")
    else:
        c.cur.execute(LIVE_SETS.format(at=_markers(c, 1)), (bound(as_of, c.dialect),))
    return [name for (name,) in c.cur.fetchall()]


def lookup_one(c: Cursor, lookup: Lookup) -> Winner | None:
    """The database's decision for one run: its winning key's profiles, or None (no profile)."""
    statement, order = one_statement(c.dialect, len(lookup.scope or ()), lookup.as_of is not None)
    c.cur.execute(statement, one_parameters(lookup, order, c.dialect))
    return winners((lookup,), c.cur.fetchall()).get(lookup)


def lookup_many(c: Cursor, lookups: Iterable[Lookup]) -> dict[Lookup, Winner]:
    """The decision for every lookup in ``lookups`` (distinct or not), in a few set-based
    statements; a lookup that no profile answers is absent from the result. Lookups as of a
    time go to the revisions in statements of their own."""
    # Sorted by model, so that the index is probed a model's range at a time (neighbouring keys
    # share pages); a stable sort keeps the rest in batch order (docs/decisions.md).
    lookups = sorted(set(lookups), key=operator.attrgetter("model"))
    now = [lk for lk in lookups if lk.as_of is None]
    then = [lk for lk in lookups if lk.as_of is not None]
    decided: dict[Lookup, Winner] = {}
    for group, as_of in ((now, False), (then, True)):
        if group:
            decided.update(_lookup_many(c, group, as_of))
    return decided


def _lookup_many(c: Cursor, lookups: list[Lookup], as_of: bool) -> dict[Lookup, Winner]:
    if c.dialect == "postgresql":
        statement = PG_LOOKUP_MANY_AS_OF if as_of else PG_LOOKUP_MANY
        decided: dict[Lookup, Winner] = {}
        for start in range(0, len(lookups), PG_CHUNK):
            chunk = lookups[start:start + PG_CHUNK]
            c.cur.execute(statement, pg_parameters(_lookup_rows(chunk, as_of, c.dialect)))
            decided.update(winners(chunk, c.cur.fetchall()))
        return decided
    table, ddl, insert, statement = (
        (SQLITE_AS_OF_TABLE, SQLITE_AS_OF_DDL, SQLITE_AS_OF_INSERT, SQLITE_LOOKUP_MANY_AS_OF)
        if as_of else
        (SQLITE_KEYS_TABLE, SQLITE_KEYS_DDL, SQLITE_KEYS_INSERT, SQLITE_LOOKUP_MANY))
    return winners(lookups, over_temp_rows(c, table, ddl, insert,
                                           _lookup_rows(lookups, as_of, c.dialect), statement))


def over_temp_rows(c: Cursor, table: str, ddl: str, insert: str, rows: Sequence[tuple],
                   statement: str) -> list[tuple]:
    """``statement``'s rows, run on SQLite over ``rows`` put first into TEMP table ``table``
    (made by ``ddl``, filled by ``insert``, dropped afterwards). A TEMP table lives in the
    connection's own temp database, so it needs no write access to the registry (a read-only
    connection can make one) and no other connection sees it."""
    c.cur.execute(f"DROP TABLE IF EXISTS temp.{table}")
    c.cur.execute(ddl)
    try:
        c.cur.executemany(insert, rows)
        c.cur.execute(statement)
        return list(c.cur.fetchall())
    finally:
        c.cur.execute(f"DROP TABLE IF EXISTS temp.{table}")


def _lookup_rows(lookups: Sequence[Lookup], as_of: bool = False,
                 dialect: str = "sqlite") -> list[tuple]:
    """The lookups as rows of the many-runs statement, numbered by their position: one per
    (lookup, preference, set in scope; '' for every set); ``as_of``: each row ends with its
    lookup's time, bound for ``dialect``."""
    rows: list[tuple] = []
    for i, lk in enumerate(lookups):
        if lk.fallback is None and lk.scope is None and lk.category is not None and not as_of:
            rows.append((i, 0, lk.model, lk.method, lk.k, lk.thinking, lk.category, ""))
            continue  # the common lookup: its category in every set
        more = (bound(lk.as_of, dialect),) if as_of and lk.as_of is not None else ()
        wanted = [(0, lk.category)] if lk.category is not None else []
        if lk.fallback is not None and lk.fallback != lk.category:
            wanted.append((1, lk.fallback))
        for preference, category in wanted:  # 0: the workload's category, 1: the fallback
            for name in lk.scope or ("",):
                rows.append((i, preference, lk.model, lk.method, lk.k, lk.thinking, category,
                             name, *more))
    return rows


def winners(lookups: Sequence[Lookup], rows: Iterable[Sequence]) -> dict[Lookup, Winner]:
    """Rows of the statements above (:class:`LookupRow`) as one :class:`Winner` per lookup
    (``lookups[lookup_id]``).

    Every row of a lookup carries the same category; a profile with stored rates has one row
    per rate, in no particular order.
    """
    # Rows stay plain tuples: a batch reads about two rows a lookup, and naming each and
    # nesting dicts per row cost more than the rest.
    profiles: dict[int, dict[int, list[Sequence]]] = {}  # per lookup, per profile: its rows
    heads: dict[int, tuple[str, int]] = {}  # per lookup: the winning category and set count
    for row in rows:
        lid, pid = row[_LOOKUP_ID], row[_PROFILE_ID]
        held = profiles.get(lid)
        if held is None:
            profiles[lid] = {pid: [row]}
        elif pid in held:
            held[pid].append(row)
        else:
            held[pid] = [row]
        if row[_SET_COUNT] is not None:
            heads[lid] = (row[_CATEGORY], row[_SET_COUNT])
    return {lookups[lid]: Winner(*heads[lid], tuple(held.values()))
            for lid, held in profiles.items()}


#: Where :class:`LookupRow`'s fields are in a row, for :func:`winners`.
_LOOKUP_ID, _CATEGORY, _SET_COUNT, _PROFILE_ID, _POSITION, _RATE = map(
    LookupRow._fields.index,
    ("lookup_id", "category", "set_count", "profile_id", "position", "rate"))


def candidate(rows: Sequence[Sequence]) -> Candidate:
    """One profile's candidate from its rows (one per stored rate, or one without)."""
    first = LookupRow._make(rows[0])
    counts, uncertainty = stored_counts(first)
    return Candidate(first.set_name, first.acceptance_length, stored_rates(rows),
                     first.source, first.hardware, first.method, first.copied_from,
                     first.revision, counts, uncertainty)


def stored_rates(rows: Sequence[Sequence]) -> tuple[float, ...] | None:
    """A profile's stored per-position rates from its rows, in order (None: it states none)."""
    if rows[0][_POSITION] is None:
        return None
    if len(rows) == 1:
        return (rows[0][_RATE],)
    return tuple(r[_RATE] for r in sorted(rows, key=operator.itemgetter(_POSITION)))


def stored_counts(first: LookupRow) -> tuple[Counts | None, Uncertainty | None]:
    """A profile's counts and their stored standard error, from its first row (None, None:
    it has none)."""
    if first.drafts is None:
        return None, None
    # A counts row: only its per-position counts may be null.
    assert first.draft_tokens is not None and first.accepted_tokens is not None \
        and first.al_stderr is not None
    counts = counts_from_row(first.drafts, first.draft_tokens, first.accepted_tokens,
                             first.accepted_per_position)
    # The stored stderr, the figure the views give: not computed again here.
    return counts, Uncertainty(counts.drafts, float(first.al_stderr),
                               counts.accepted_per_position is not None)
