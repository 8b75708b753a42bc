"""The listings of :mod:`registry_db.store.read` on a bare DB-API cursor, for the command line's
read commands (``list``, ``profiles``, ``conflicts``, ``db current``), which open the registry
with :mod:`.sqlite_read` or :mod:`.pg_read` and so never import SQLAlchemy.

Each function runs the statement :mod:`.read` builds, written out here once for both drivers
(``?`` markers, made ``%s`` for psycopg), and builds the same objects from its rows, which a test
holds equal to :mod:`.read`'s on both backends. ``cur`` is a ``sqlite3`` or psycopg cursor and
``dialect`` its SQL (``sqlite`` or ``postgresql``), as
:func:`registry_db.resolve.lookup.cursor` yields them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from registry_db.errors import NotFound
from registry_db.model import (
    PROFILE_KEY_FIELDS,
    Profile,
    ProfileSet,
    Provenance,
    Sampling,
    setting_value,
)
from registry_db.store.messages import unknown_set_message
from registry_db.store.sqlite_read import OUT_OF_ORDER
from registry_db.store.stored_counts import counts_from_row
from registry_db.store.summaries import (
    Conflict,
    ProfileSummary,
    Revision,
    SetSummary,
    git_origin,
    utc,
)

__all__ = ["conflicts", "current_revision", "history", "list_profiles", "list_sets",
           "load_set", "set_names", "set_summary", "times_out_of_order"]

_KEY = ", ".join(f"profiles.{k}" for k in PROFILE_KEY_FIELDS)

_LIST_SETS = (
    "SELECT profile_sets.name, profile_sets.source_file, "
    "(SELECT count(*) FROM profiles WHERE profiles.set_id = profile_sets.id), "
    "(SELECT count(*) FROM set_caveats WHERE set_caveats.set_id = profile_sets.id), "
    "profile_sets.imported_at, profile_sets.content_hash "
    "FROM profile_sets ORDER BY profile_sets.name")

_CONFLICTS = (
    f"SELECT {_KEY}, profile_sets.name FROM profiles "
    f"JOIN (SELECT {_KEY.replace('profiles.', '')} FROM profiles "
    f"GROUP BY {_KEY.replace('profiles.', '')} HAVING count(*) > 1) AS dup ON "
    + " AND ".join(f"profiles.{k} = dup.{k}" for k in PROFILE_KEY_FIELDS)
    + f" JOIN profile_sets ON profile_sets.id = profiles.set_id "
      f"ORDER BY {_KEY}, profile_sets.name")

_PROFILES = (
    f"SELECT {_KEY}, profile_sets.name, profiles.acceptance_length, profiles.method, "
    "provenances.source, profile_counts.drafts, profile_counts.draft_tokens, "
    "profile_counts.accepted_tokens, profile_counts.accepted_per_position "
    "FROM profiles JOIN profile_sets ON profiles.set_id = profile_sets.id "
    "LEFT OUTER JOIN provenances ON provenances.id = profiles.provenance_id "
    "LEFT OUTER JOIN profile_counts ON profile_counts.profile_id = profiles.id")



def _sql(statement: str, dialect: str) -> str:
    """``statement``'s ``?`` markers as the driver takes them (the statements hold no other
    ``?`` and no ``%``)."""
    return statement if dialect == "sqlite" else statement.replace("?", "%s")


def read_time(value: Any) -> datetime:
    """A stored time as SQLAlchemy's ``DateTime`` reads it: SQLite's text by ``fromisoformat``
    (SQLAlchemy 2's own reading), PostgreSQL's ``timestamptz`` as it comes; then UTC."""
    return utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def set_names(cur: Any, dialect: str) -> list[str]:
    """The stored sets' names, sorted (:func:`.read.set_names`)."""
    cur.execute("SELECT profile_sets.name FROM profile_sets ORDER BY profile_sets.name")
    return [n for (n,) in cur.fetchall()]


def list_sets(cur: Any, dialect: str) -> list[SetSummary]:
    """Every stored set by name (:func:`.read.list_sets`)."""
    cur.execute(_LIST_SETS)
    return [SetSummary(n, f, int(np), int(nc), read_time(t), h)
            for n, f, np, nc, t, h in cur.fetchall()]


def conflicts(cur: Any, dialect: str) -> list[Conflict]:
    """Profile keys held by two or more sets (:func:`.read.conflicts`)."""
    grouped: dict[tuple, list[str]] = defaultdict(list)
    cur.execute(_CONFLICTS)
    for *key, name in cur.fetchall():
        grouped[tuple(key)].append(name)
    return [Conflict(key[0], key[1], key[2], key[3], key[4], tuple(names))
            for key, names in grouped.items()]


def list_profiles(cur: Any, dialect: str, *, model: str | None = None,
                  method: str | None = None, k: int | None = None,
                  thinking: str | None = None, category: str | None = None,
                  sets: Sequence[str] | None = None) -> list[ProfileSummary]:
    """The stored profiles that match the filters, by key then set
    (:func:`.read.list_profiles`, whose unknown set is the same :class:`NotFound`)."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("model", model), ("speculative_method", method),
                          ("num_spec_tokens", k), ("thinking", thinking),
                          ("category", category)):
        if value is not None:
            where.append(f"profiles.{column} = ?")
            params.append(value)
    if sets:
        wanted = sorted(set(sets))
        cur.execute(_sql("SELECT profile_sets.name FROM profile_sets WHERE profile_sets.name "
                         f"IN ({', '.join('?' * len(wanted))})", dialect), wanted)
        known = {n for (n,) in cur.fetchall()}
        missing = [n for n in sets if n not in known]
        if missing:
            raise NotFound(unknown_set_message(missing[0], set_names(cur, dialect)))
        where.append(f"profile_sets.name IN ({', '.join('?' * len(known))})")
        params.extend(sorted(known))
    statement = _PROFILES + (" WHERE " + " AND ".join(where) if where else "") + \
        f" ORDER BY {_KEY}, profile_sets.name"
    cur.execute(_sql(statement, dialect), params)
    return [ProfileSummary(
        m, sm, kk, t, c, profile_set=name, acceptance_length=al, method=how, source=source,
        counts=None if drafts is None else counts_from_row(drafts, dt, at, per))
        for m, sm, kk, t, c, name, al, how, source, drafts, dt, at, per in cur.fetchall()]


def set_summary(cur: Any, dialect: str, name: str) -> SetSummary | None:
    """The summary of the stored set ``name`` (:func:`.read.set_summary`); None when there is
    no such set (the engine path words the error)."""
    cur.execute(_sql(_LIST_SETS.replace(" ORDER BY", " WHERE profile_sets.name = ? ORDER BY"),
                     dialect), (name,))
    return next((SetSummary(n, f, int(np), int(nc), read_time(t), h)
                 for n, f, np, nc, t, h in cur.fetchall()), None)


def history(cur: Any, dialect: str, name: str | None = None) -> list[Revision]:
    """The revisions of ``name`` (every set's when None), newest first
    (:func:`registry_db.history.history`; an unknown name gives [] here)."""
    where = "" if name is None else " WHERE revisions.set_name = ?"
    cur.execute(_sql(
        "SELECT revisions.set_name, revisions.revision, revisions.action, revisions.imported_at, "
        "revisions.source_file, revisions.profile_count, revisions.content_hash, "
        "revisions.message, revisions.git_commit, revisions.git_dirty, revisions.git_path "
        f"FROM revisions{where} ORDER BY revisions.imported_at DESC, "
        "revisions.set_name, revisions.revision DESC", dialect), () if name is None else (name,))
    return [Revision(s, r, a, read_time(t), f, n, h, m, git_origin(*git))
            for s, r, a, t, f, n, h, m, *git in cur.fetchall()]



def load_set(cur: Any, dialect: str, name: str) -> ProfileSet | None:
    """The stored set ``name`` exactly as imported (:func:`.read.load_set`, the same queries);
    None when there is no such set (the engine path words the error)."""
    cur.execute(_sql("SELECT profile_sets.id, profile_sets.source_file FROM profile_sets "
                     "WHERE profile_sets.name = ?", dialect), (name,))
    found = cur.fetchall()
    if not found:
        return None
    [(sid, file)] = found
    one = _sql("?", dialect)

    cur.execute(f"SELECT set_caveats.text FROM set_caveats WHERE set_caveats.set_id = {one} "
                "ORDER BY set_caveats.position", (sid,))
    caveats = tuple(t for (t,) in cur.fetchall())
    cur.execute("SELECT profiles.id, profiles.model, profiles.speculative_method, "
                "profiles.num_spec_tokens, profiles.thinking, profiles.category, "
                "profiles.acceptance_length, profiles.method, profiles.provenance_id, "
                "profiles.rationale, profiles.copied_from FROM profiles "
                f"WHERE profiles.set_id = {one} ORDER BY profiles.position", (sid,))
    rows = cur.fetchall()
    in_set = f"(SELECT profiles.id FROM profiles WHERE profiles.set_id = {one})"
    rates: dict[int, list[float]] = defaultdict(list)
    cur.execute("SELECT profile_rates.profile_id, profile_rates.rate FROM profile_rates "
                f"WHERE profile_rates.profile_id IN {in_set} "
                "ORDER BY profile_rates.profile_id, profile_rates.position", (sid,))
    for pid, rate in cur.fetchall():
        rates[pid].append(rate)
    cited = f"(SELECT profiles.provenance_id FROM profiles WHERE profiles.set_id = {one})"
    settings: dict[int, list[tuple[str, object]]] = defaultdict(list)
    cur.execute("SELECT provenance_settings.provenance_id, provenance_settings.name, "
                "provenance_settings.value, provenance_settings.value_type "
                f"FROM provenance_settings WHERE provenance_settings.provenance_id IN {cited} "
                "ORDER BY provenance_settings.provenance_id, provenance_settings.name", (sid,))
    for pid, setting, value, type_ in cur.fetchall():
        settings[pid].append((setting, setting_value(value, type_)))
    provs: dict[int, Provenance] = {}
    cur.execute("SELECT provenances.id, provenances.source, provenances.run, "
                "provenances.benchmark, provenances.prompts, provenances.hardware, "
                "provenances.engine_image, provenances.tp, provenances.temperature, "
                "provenances.top_p, provenances.top_k, provenances.max_tokens "
                f"FROM provenances WHERE provenances.id IN {cited}", (sid,))
    for (pid, source, run, benchmark, prompts, hardware, image, tp, temperature, top_p, top_k,
         max_tokens) in cur.fetchall():
        sampling = None if temperature is None else Sampling(temperature, top_p, top_k,
                                                             max_tokens)
        provs[pid] = Provenance(source=source, run=run, benchmark=benchmark, prompts=prompts,
                                hardware=hardware, engine_image=image, tp=tp,
                                sampling=sampling, settings=tuple(settings[pid]))
    cur.execute("SELECT profile_counts.profile_id, profile_counts.drafts, "
                "profile_counts.draft_tokens, profile_counts.accepted_tokens, "
                "profile_counts.accepted_per_position FROM profile_counts "
                f"WHERE profile_counts.profile_id IN {in_set}", (sid,))
    counts = {pid: counts_from_row(d, dt, a, per) for pid, d, dt, a, per in cur.fetchall()}
    profiles = tuple(Profile(
        model=model, speculative_method=smethod, num_spec_tokens=k, thinking=thinking,
        category=category, acceptance_length=al, method=method,
        per_position_rates=tuple(rates[pid]) if pid in rates else None,
        provenance=None if prov_id is None else provs[prov_id],
        rationale=rationale, copied_from=copied, counts=counts.get(pid))
        for (pid, model, smethod, k, thinking, category, al, method, prov_id, rationale,
             copied) in rows)
    return ProfileSet(name=name, caveats=caveats, profiles=profiles, file=file)


def current_revision(cur: Any, dialect: str) -> str | None:
    """The schema revision ``alembic_version`` holds (the reader opened it at the head)."""
    cur.execute("SELECT version_num FROM alembic_version")
    row = cur.fetchone()
    return row[0] if row else None


def times_out_of_order(cur: Any, dialect: str) -> bool:
    """:func:`.migrate.times_out_of_order` at the head (where ``revisions`` always exists)."""
    cur.execute(OUT_OF_ORDER)
    return cur.fetchone() is not None
