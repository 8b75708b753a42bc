"""Writing many rows at once: bulk inserts, provenances deduplicated by content, a profile's
counts row, and the size of ``IN (...)`` lists; shared by the importer
(:mod:`registry_db.importing.write`) and the history (:mod:`registry_db.history`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

from sqlalchemy import Boolean, DateTime, insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from registry_db.model import Profile, ProfileSet, Provenance, setting_text, setting_type
from registry_db.store.schema import profiles, provenance_settings, provenances
from registry_db.store.stored_counts import per_position_text

__all__ = ["CHUNK", "COPY_MIN_ROWS", "chunks", "counts_row", "insert_many", "plain_columns",
           "profile_ids", "provenance_ids"]

#: Values per ``IN (...)`` list: far below SQLite's and PostgreSQL's bound-parameter limits.
CHUNK = 1000

#: From this many rows on, PostgreSQL inserts use COPY and SQLite ones the driver's executemany.
COPY_MIN_ROWS = 50


def insert_many(conn: Connection, table: Any, rows: list[dict[str, Any]] | list[tuple], *,
                plain: bool = False, columns: Sequence[str] | None = None,
                min_rows: int = COPY_MIN_ROWS) -> None:
    """Insert ``rows`` into ``table``, in the current transaction (``plain``: the caller gave
    every value as the SQLite driver takes it, its times as stored text). Rows are mappings,
    or with ``columns`` tuples of those columns' values (the big tables: no dict per row).

    PostgreSQL gets ``COPY ... FROM STDIN`` for many rows (psycopg's executemany sends one
    statement per row, ten times slower). SQLite gets the driver's own ``executemany`` of plain
    tuples for tables whose columns need no conversion (text, numbers), skipping SQLAlchemy's
    per-row parameter processing (figures in docs/decisions.md, "Importing"). ``min_rows``:
    from how many rows on (a caller that inserts a few rows many times in one transaction
    lowers it: one COPY beats psycopg's statement a row).
    """
    if not rows:
        return
    postgresql = conn.dialect.name == "postgresql"
    bulk = len(rows) >= min_rows and (postgresql or plain_columns(table))
    values: list[Any] = rows
    if columns is None:  # mappings: their keys are the columns
        dicts = cast(list[dict[str, Any]], rows)
        columns = list(dicts[0])
        values = [tuple([row[c] for c in columns]) for row in dicts]
    if not (bulk or (plain and not postgresql)):
        conn.execute(insert(table), [dict(zip(columns, row)) for row in values])
        return
    names = ", ".join(f'"{c}"' for c in columns)
    dbapi_error = conn.dialect.loaded_dbapi.Error
    driver = conn.connection.driver_connection
    assert driver is not None  # a live connection inside the write transaction
    cursor = driver.cursor()
    sql = ""
    try:
        if postgresql:
            sql = f'COPY "{table.name}" ({names}) FROM STDIN'
            with cursor.copy(sql) as copy:
                for row in values:
                    copy.write_row(row)
        else:
            sql = f'INSERT INTO "{table.name}" ({names}) VALUES ({", ".join("?" * len(columns))})'
            cursor.executemany(sql, values)
    except dbapi_error as exc:
        # Wrapped like SQLAlchemy's own errors, so run_write retries or translates it.
        raise DBAPIError.instance(sql, None, exc, dbapi_error) from exc
    finally:
        cursor.close()


@functools.lru_cache(maxsize=64)  # a table's column types do not change within a process
def plain_columns(table: Any) -> bool:
    """Whether every column of ``table`` takes its Python value as the driver does (no dates,
    no booleans), so rows may bypass SQLAlchemy's type processing."""
    return not any(isinstance(c.type, (DateTime, Boolean)) for c in table.columns)


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    """``items`` in slices of at most ``size``, for ``IN (...)`` lists."""
    for i in range(0, len(items), size):
        yield items[i:i + size]


def provenance_ids(conn: Connection, sets: Iterable[ProfileSet],
                   known: dict[str, int] | None = None) -> dict[int, int]:
    """``id(provenance object) -> row id`` for every provenance the sets cite, inserting the
    missing ones. Each distinct object is hashed once (aliases share one object). ``known``
    (content hash -> row id, in the caller's transaction) is consulted first and updated, so a
    caller writing one set at a time looks each provenance up once."""
    by_object: dict[int, str] = {}
    # Provenances written out in full in each profile are equal objects, not one: hashed once
    # per distinct repr (which, unlike ==, tells 1 from 1.0 from True, as the hash does).
    by_repr: dict[str, str] = {}
    wanted: dict[str, Provenance] = {}
    for s in sets:
        for p in s.profiles:
            pv = p.provenance
            if pv is not None and id(pv) not in by_object:
                text = repr(pv)
                h = by_repr.get(text)
                if h is None:
                    h = by_repr[text] = pv.content_hash()
                by_object[id(pv)] = h
                wanted.setdefault(h, pv)
    ids = {} if known is None else known
    ids.update(_provenance_rows(conn, sorted(h for h in wanted if h not in ids)))
    missing = [h for h in wanted if h not in ids]
    if missing:
        # A set at a time (the importer's way), a few rows each: sent in one COPY all the same.
        insert_many(conn, provenances, [_provenance_row(h, wanted[h]) for h in missing],
                    min_rows=1)
        ids.update(_provenance_rows(conn, missing))
        settings = [{"provenance_id": ids[h], "name": n, "value": setting_text(v),
                     "value_type": setting_type(v)}
                    for h in missing for n, v in wanted[h].settings]
        if settings:
            insert_many(conn, provenance_settings, settings, min_rows=1)
    return {obj: ids[h] for obj, h in by_object.items()}


def counts_row(profile_id: int, p: Profile) -> dict[str, Any]:
    """The ``profile_counts`` row of profile ``p`` (which has counts), its stderr computed as
    the library computes it, so that every reader of the column gets the library's figure."""
    c = p.counts
    assert c is not None
    return {"profile_id": profile_id, "drafts": c.drafts, "draft_tokens": c.draft_tokens,
            "accepted_tokens": c.accepted_tokens,
            "accepted_per_position": per_position_text(c.accepted_per_position),
            "al_stderr": c.uncertainty(p.num_spec_tokens).stderr}


def profile_ids(conn: Connection, set_id: int) -> dict[int, int]:
    """``position -> id`` of the current profiles of set ``set_id``, through the driver: an
    importer asks once a set that has rates or counts, and SQLAlchemy's rows cost more than the
    query (docs/decisions.md, "Importing")."""
    mark = "%s" if conn.dialect.name == "postgresql" else "?"
    sql = f'SELECT position, id FROM "{profiles.name}" WHERE set_id = {mark}'
    dbapi_error = conn.dialect.loaded_dbapi.Error
    driver = conn.connection.driver_connection
    assert driver is not None  # a live connection inside the write transaction
    cursor = driver.cursor()
    try:
        cursor.execute(sql, [set_id])
        return dict(cursor.fetchall())
    except dbapi_error as exc:
        # Wrapped like SQLAlchemy's own errors, so run_write retries or translates it.
        raise DBAPIError.instance(sql, None, exc, dbapi_error) from exc
    finally:
        cursor.close()


def _provenance_rows(conn: Connection, hashes: Sequence[str]) -> dict[str, int]:
    """``content hash -> id`` of the stored provenances among ``hashes``, through the driver:
    an importer asks once a set, and building the statement in SQLAlchemy cost more than
    running it (a 500-profile set: about 1 ms of the 4 its provenances took)."""
    ids: dict[str, int] = {}
    if not hashes:
        return ids
    mark = "%s" if conn.dialect.name == "postgresql" else "?"
    dbapi_error = conn.dialect.loaded_dbapi.Error
    driver = conn.connection.driver_connection
    assert driver is not None  # a live connection inside the write transaction
    cursor = driver.cursor()
    sql = ""
    try:
        for chunk in chunks(hashes):
            sql = (f'SELECT content_hash, id FROM "{provenances.name}" '
                   f'WHERE content_hash IN ({", ".join([mark] * len(chunk))})')
            cursor.execute(sql, list(chunk))
            ids.update(cursor.fetchall())
    except dbapi_error as exc:
        # Wrapped like SQLAlchemy's own errors, so run_write retries or translates it.
        raise DBAPIError.instance(sql, None, exc, dbapi_error) from exc
    finally:
        cursor.close()
    return ids


def _provenance_row(content_hash: str, pv: Provenance) -> dict[str, Any]:
    sampling = pv.sampling
    return {
        "content_hash": content_hash, "source": pv.source, "run": pv.run,
        "benchmark": pv.benchmark, "prompts": pv.prompts, "hardware": pv.hardware,
        "engine_image": pv.engine_image, "tp": pv.tp,
        "temperature": None if sampling is None else float(sampling.temperature),
        "top_p": None if sampling is None or sampling.top_p is None else float(sampling.top_p),
        "top_k": None if sampling is None else sampling.top_k,
        "max_tokens": None if sampling is None else sampling.max_tokens,
    }
