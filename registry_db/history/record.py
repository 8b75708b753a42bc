"""Recording revisions: each import's or deletion's revision, written inside the writer's one
transaction, after the writers' lock, so numbers have no gap or duplicate under concurrent writers
and a killed writer leaves no half revision. An import writes only what changed: the profiles
equal to their set's open versions extend those ranges, the others close them, and new or changed
profiles become versions (:func:`record_current`); a deletion closes every range of its set."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, insert, or_, select, text, update
from sqlalchemy.engine import Connection, Engine

from registry_db.errors import NotFound
from registry_db.model import NO_GIT_ORIGIN, GitOrigin, Profile, ProfileSet
from registry_db.store.bulk import CHUNK, chunks, counts_row, insert_many
from registry_db.store.engine import run_write
from registry_db.store.read import (
    _utc,
    unknown_set_message,
)
from registry_db.store.schema import (
    profile_counts,
    profile_keys,
    profile_rates,
    profile_sets,
    profile_versions,
    profiles,
    revisions,
    version_counts,
    version_rates,
)


@dataclass(frozen=True)
class Deleted:
    """A set that a deletion removed from the current registry."""

    name: str
    file: str | None
    profiles: int
    revision: int


def revision_time(conn: Connection) -> datetime:
    """The time a write holding the writers' lock stamps on its revisions: the database's clock
    (PostgreSQL's ``clock_timestamp()``, read after the lock; SQLite's clock is this process's),
    and always after the newest revision's. The lock makes revision ids commit order, so ids,
    numbers and times are one order by construction, whatever the clocks of the writers'
    machines (or a clock stepped back) say."""
    if conn.dialect.name == "postgresql":
        now = _utc(conn.execute(text("SELECT clock_timestamp()")).scalar_one())
    else:
        now = datetime.now(UTC)
    last = conn.execute(select(revisions.c.imported_at)
                        .order_by(revisions.c.id.desc()).limit(1)).scalar()
    if last is not None and now <= _utc(last):
        now = _utc(last) + timedelta(microseconds=1)
    return now


def next_revisions(conn: Connection, names: Sequence[str]) -> dict[str, int]:
    """``name -> the number its next revision takes`` (1 for a set never seen)."""
    out = dict.fromkeys(names, 1)
    v = revisions.c
    for chunk in chunks(sorted(set(names))):
        for name, last in conn.execute(select(v.set_name, func.max(v.revision))
                                       .where(v.set_name.in_(chunk)).group_by(v.set_name)):
            out[name] = last + 1
    return out


#: A set :func:`record_current` records: ``(name, revision, action, file, content hash,
#: profiles, whether any profile has rates, whether any has counts)``.
Entry = tuple[str, int, str, str | None, str, int, bool, bool]
#: ``content(name) -> (the set, its provenance objects' row ids by id())``, asked once a set.
Content = Callable[[str], tuple[ProfileSet, Mapping[int, int]]]


def record_current(conn: Connection, entries: Sequence[Entry], content: Content,
                   message: str | None, now: datetime,
                   origins: Mapping[str, GitOrigin] | None = None) -> None:
    """Record a revision of each set in ``entries`` whose content (``content(name)``) was just
    written to the current tables with ``profile_sets.revision`` = that revision.
    ``content`` is asked only for the sets that held versions, one at a time, so an importer
    need not hold every set at once.

    Only what changed is written: a profile equal to the version its set holds now (same file
    position, values, rates, counts and provenance) stays that version, whose range then takes
    in the new revision; every other open version of the set is closed at the revision before,
    and each new or changed profile becomes a version from this revision on. Caveats are copied
    per revision (a few rows a set). ``origins``: each file's place in git, by file, where it
    has one (:mod:`registry_db.importing.git`)."""
    if not entries:
        return
    where_from = origins or {}
    _insert_revisions(conn, [{
        "set_name": name, "revision": rev, "action": action, "imported_at": now,
        "source_file": file, "content_hash": h, "profile_count": n, "message": message,
        **_git_columns(where_from.get(file) if file is not None else None),
    } for name, rev, action, file, h, n, *_ in entries])
    numbers = {name: rev for name, rev, *_ in entries}
    sizes = {name: n for name, _, _, _, _, n, *_ in entries}
    flags = {name: (rates, counts) for name, *_, rates, counts in entries}
    for chunk in chunks(sorted(numbers)):
        marks = ", ".join(f":n{i}" for i in range(len(chunk)))
        params = {f"n{i}": name for i, name in enumerate(chunk)}
        # The revision just recorded is the one profile_sets.revision names.
        conn.execute(text(
            "INSERT INTO revision_caveats (revision_id, position, text) "
            "SELECT v.id, c.position, c.text FROM set_caveats c "
            "JOIN profile_sets s ON s.id = c.set_id "
            "JOIN revisions v ON v.set_name = s.name AND v.revision = s.revision "
            f"WHERE s.name IN ({marks})"), params)
        held = _open_versions(conn, [n for n in chunk if numbers[n] > 1])
        closed: list[dict[str, Any]] = []
        gone: list[dict[str, Any]] = []
        fresh: dict[str, list[int] | None] = {}  # None: every profile of the set
        new_keys: list[dict[str, Any]] = []
        first: list[str] = []  # the sets that held no key: every key begins a stretch
        rates = counts = False  # whether any fresh profile of the chunk has rates / counts
        for name in chunk:
            versions = held.get(name, {})
            if not versions:
                fresh[name] = None
                first.append(name)
                rates, counts = rates or flags[name][0], counts or flags[name][1]
                continue
            held_set, prov_ids = content(name)
            profiles_ = held_set.profiles
            kept = set()
            positions = []
            for i, p in enumerate(profiles_):
                found = versions.get(_content(i, p, prov_ids))
                if found is None:
                    positions.append(i)
                else:
                    kept.add(found)
            fresh[name] = None if len(positions) == len(profiles_) else positions
            picked = _at(profiles_, fresh[name])
            rates = rates or any(p.per_position_rates for p in picked)
            counts = counts or any(p.counts is not None for p in picked)
            closed += [{"vid": vid, "last": numbers[name] - 1}
                       for vid in versions.values() if vid not in kept]
            # The keys the set holds now against those it held: a stretch ends or begins.
            before = {c[1:6] for c in versions}
            after = {p.key for p in profiles_}
            gone += [dict(zip(_KEY_PARAMS, (name, *key))) for key in sorted(before - after)]
            new_keys += [dict(zip(_KEY_NAMES, (name, *key))) for key in sorted(after - before)]
        if closed:
            conn.execute(update(profile_versions).where(profile_versions.c.id == bindparam("vid"))
                         .values(last_revision=bindparam("last"), valid_until=now), closed)
        if gone:
            k = profile_keys.c
            conn.execute(update(profile_keys).where(
                *(k[c] == bindparam(f"k_{c}") for c in _KEY_NAMES), k.valid_until.is_(None))
                .values(valid_until=now), gone)
        # The stretches first: each new version names its key's open one.
        _insert_first_keys(conn, first, sizes, now)
        # SQLite stores a time as text: written in its stored format, as for the versions.
        at: Any = stored_time(now) if conn.dialect.name == "sqlite" else now
        insert_many(conn, profile_keys, [{**row, "valid_from": at} for row in new_keys],
                    plain=True)
        _insert_versions(conn, fresh, {n: sizes[n] for n in chunk}, now, rates, counts)


def _git_columns(origin: GitOrigin | None) -> dict[str, Any]:
    return dict(NO_GIT_ORIGIN) if origin is None else origin.to_json()


def _content(position: int, p: Profile, prov_ids: Mapping[int, int]) -> tuple:
    """What makes profile ``p`` at ``position`` the same version as a stored one: every
    stored column, its rates and its counts (as :func:`_open_versions` reads them back)."""
    counts = None
    if p.counts is not None:
        row = counts_row(0, p)
        counts = tuple(row[c] for c in _COUNT_COLUMNS)
    return (position, p.model, p.speculative_method, p.num_spec_tokens, p.thinking, p.category,
            float(p.acceptance_length), p.method,
            None if p.provenance is None else prov_ids[id(p.provenance)], p.rationale,
            p.copied_from,
            tuple(float(r) for r in p.per_position_rates) if p.per_position_rates else (),
            counts)


_COUNT_COLUMNS = ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_position",
                  "al_stderr")
#: A ``profile_keys`` row's set and key columns, and their bound names in its update.
_KEY_NAMES = ("set_name", "model", "speculative_method", "num_spec_tokens", "thinking",
              "category")
_KEY_PARAMS = tuple(f"k_{c}" for c in _KEY_NAMES)


def _open_versions(conn: Connection, names: Sequence[str]) -> dict[str, dict[tuple, int]]:
    """``name -> {content: version id}`` of the versions the latest revisions of ``names`` hold
    (``ix_profile_versions_set_name_first_revision``, the open ranges, which have no last
    revision, among them)."""
    if not names:
        return {}
    v = profile_versions.c
    open_ = select(v.id).where(v.set_name.in_(names), v.last_revision.is_(None))
    rates: dict[int, list[float]] = defaultdict(list)
    for pid, rate in conn.execute(select(version_rates.c.profile_id, version_rates.c.rate)
                                  .where(version_rates.c.profile_id.in_(open_))
                                  .order_by(version_rates.c.profile_id,
                                            version_rates.c.position)):
        rates[pid].append(rate)
    counts = {pid: tuple(rest) for pid, *rest in conn.execute(
        select(version_counts.c.profile_id, *(version_counts.c[c] for c in _COUNT_COLUMNS))
        .where(version_counts.c.profile_id.in_(open_)))}
    out: dict[str, dict[tuple, int]] = defaultdict(dict)
    for vid, name, *row in conn.execute(
            select(v.id, v.set_name, v.position, v.model, v.speculative_method,
                   v.num_spec_tokens, v.thinking, v.category, v.acceptance_length, v.method,
                   v.provenance_id, v.rationale, v.copied_from)
            .where(v.set_name.in_(names), v.last_revision.is_(None))):
        out[name][(*row, tuple(rates.get(vid, ())), counts.get(vid))] = vid
    return out


def _insert_versions(conn: Connection, fresh: dict[str, list[int] | None],
                     sizes: dict[str, int], now: datetime, rates: bool, counts: bool) -> None:
    """Each set's ``fresh`` profiles (by file position; None: all of them) as versions from the
    set's new revision on, with their rates and counts, copied in the database from the current
    tables the importer has just written (no row goes through Python). In set, then position,
    order: the ids the rows got when they were sent from here. ``rates``/``counts``: whether
    any of them has rates/counts."""
    if not any(positions is None or positions for positions in fresh.values()):
        return
    p, s, v, k = profiles.c, profile_sets.c, profile_versions.c, profile_keys.c
    at = bindparam("at", now, type_=v.valid_from.type)
    # Each row's open stretch, its set's latest of the key, in one probe of the stretches'
    # key index: a subquery rather than a join, which SQLite drove from every open stretch of
    # the set; and by time rather than "valid_until IS NULL", which PostgreSQL searched in the
    # set's open stretches (ix_profile_keys_set_name_valid_until), all of them per row.
    stretch = (select(k.id).where(*(k[c] == p[c] for c in _KEY_NAMES[1:]),
                                  k.set_name == s.name)
               .order_by(k.valid_from.desc()).limit(1).scalar_subquery())
    for where in _fresh_rows(fresh, sizes):
        conn.execute(insert(profile_versions).from_select(
            ["set_name", "first_revision", "valid_from", "position", *_VERSION_COPIED,
             "key_id"],
            select(s.name, s.revision, at, p.position, *(p[c] for c in _VERSION_COPIED), stretch)
            .join_from(profiles, profile_sets, p.set_id == s.id)
            .where(where).order_by(s.name, p.position)))
    # The versions this import began are the open ones from its time on.
    names = sorted(fresh)
    new = (select(v.id, p.id.label("pid"))
           .join_from(profile_versions, profile_sets, s.name == v.set_name)
           .join(profiles, and_(p.set_id == s.id,
                                *(p[c] == v[c] for c in _KEY_NAMES[1:])))
           .where(v.set_name.in_(names), v.first_revision == s.revision,
                  v.last_revision.is_(None), v.valid_from == at)
           .subquery())
    r, c = profile_rates.c, profile_counts.c
    if rates:
        conn.execute(insert(version_rates).from_select(
            ["profile_id", "position", "rate"],
            select(new.c.id, r.position, r.rate)
            .join_from(new, profile_rates, r.profile_id == new.c.pid)
            .order_by(new.c.id, r.position)))
    if counts:
        conn.execute(insert(version_counts).from_select(
            ["profile_id", *_COUNT_COLUMNS],
            select(new.c.id, *(c[x] for x in _COUNT_COLUMNS))
            .join_from(new, profile_counts, c.profile_id == new.c.pid).order_by(new.c.id)))


def _at(items: Sequence[Profile], positions: list[int] | None) -> Sequence[Profile]:
    return items if positions is None else [items[i] for i in positions]


#: The columns a version copies from its current profile row as they are.
_VERSION_COPIED = ("model", "speculative_method", "num_spec_tokens", "thinking", "category",
                   "acceptance_length", "method", "provenance_id", "rationale", "copied_from")


def _fresh_rows(fresh: dict[str, list[int] | None], sizes: dict[str, int]) -> Iterator[Any]:
    """The conditions on ``profiles``/``profile_sets`` that pick the ``fresh`` rows (None: all
    ``sizes[name]`` of the set), in set then position order, each for at most :data:`CHUNK`
    rows and bound values: a statement's journal stays that small (SQLite keeps a writer's in
    memory, ``engine._write_cache``)."""
    s, p = profile_sets.c, profiles.c
    terms: list[Any] = []
    whole: list[str] = []
    size = 0

    def flush() -> Iterator[Any]:
        nonlocal terms, whole, size
        if whole:
            terms.append(s.name.in_(whole))
        if terms:
            yield or_(*terms)
        terms, whole, size = [], [], 0

    def add(term: Any, weight: int) -> Iterator[Any]:
        nonlocal size
        if size + weight > CHUNK:
            yield from flush()
        if whole:  # keep set order: the whole sets before this one go first
            terms.append(s.name.in_(whole))
            whole.clear()
        terms.append(term)
        size += weight

    for name in sorted(fresh):
        positions, n = fresh[name], sizes[name]
        if positions is None and size + max(n, 1) <= CHUNK:
            whole.append(name)
            size += max(n, 1)
        elif positions is None:
            for start in range(0, n, CHUNK):
                yield from add(and_(s.name == name, p.position >= start,
                                    p.position < start + CHUNK), min(CHUNK, n - start))
        else:
            for part in chunks(positions, CHUNK - 1):  # with its set's name
                yield from add(and_(s.name == name, p.position.in_(part)), 1 + len(part))
    yield from flush()


def _insert_first_keys(conn: Connection, names: Sequence[str], sizes: dict[str, int],
                       now: datetime) -> None:
    """A stretch beginning now for every key of the sets ``names`` (which held none), copied
    from their current profiles in the database (as few rows a statement as the versions)."""
    p, s = profiles.c, profile_sets.c
    key = [p[c] for c in _KEY_NAMES[1:]]
    at = bindparam("at", now, type_=profile_keys.c.valid_from.type)
    for where in _fresh_rows(dict.fromkeys(names), sizes):
        conn.execute(insert(profile_keys).from_select(
            [*_KEY_NAMES, "valid_from"],
            select(s.name, *key, at).join_from(profiles, profile_sets, p.set_id == s.id)
            .where(where).order_by(s.name, *key)))


def stored_time(moment: datetime) -> str:
    """An aware UTC time as SQLite stores it (SQLAlchemy's ``DateTime`` text), which sorts as
    the times do. Not strftime: its %Y writes year 1 as "1" on glibc."""
    m = moment.astimezone(UTC)
    return (f"{m.year:04d}-{m.month:02d}-{m.day:02d} {m.hour:02d}:{m.minute:02d}:"
            f"{m.second:02d}.{m.microsecond:06d}")


def _insert_revisions(conn: Connection, rows: list[dict[str, Any]]) -> None:
    conn.execute(insert(revisions), rows)


def delete_in(conn: Connection, names: Sequence[str], message: str | None,
              now: datetime) -> list[Deleted]:
    """Delete the stored sets ``names`` inside the caller's write transaction, recording a
    ``deleted`` revision of each. Every name must be stored (checked first: nothing is deleted
    when one is not)."""
    names = list(dict.fromkeys(names))
    ps = profile_sets.c
    found: dict[str, tuple[int, str | None]] = {}
    for chunk in chunks(sorted(names)):
        found.update((n, (i, f)) for n, i, f in conn.execute(
            select(ps.name, ps.id, ps.source_file).where(ps.name.in_(chunk))))
    missing = [n for n in names if n not in found]
    if missing:
        known = list(conn.execute(select(ps.name).order_by(ps.name)).scalars())
        raise NotFound("; ".join(unknown_set_message(n, known) for n in missing)
                       + "; nothing was deleted")
    counts: dict[int, int] = {}
    ids = [found[n][0] for n in names]
    for chunk in chunks(ids):
        counts.update(conn.execute(select(profiles.c.set_id, func.count())
                                   .where(profiles.c.set_id.in_(chunk))
                                   .group_by(profiles.c.set_id)).all())
    numbers = next_revisions(conn, names)
    if names:
        _insert_revisions(conn, [{
            "set_name": n, "revision": numbers[n], "action": "deleted", "imported_at": now,
            "source_file": found[n][1], "content_hash": None, "profile_count": 0,
            "message": message, **NO_GIT_ORIGIN} for n in names])
    # The deletion closes every range of the set: its versions end at the revision before.
    conn.execute(update(profile_versions)
                 .where(profile_versions.c.set_name == bindparam("n"),
                        profile_versions.c.last_revision.is_(None))
                 .values(last_revision=bindparam("last"), valid_until=now),
                 [{"n": n, "last": numbers[n] - 1} for n in names])
    conn.execute(update(profile_keys)
                 .where(profile_keys.c.set_name == bindparam("n"),
                        profile_keys.c.valid_until.is_(None))
                 .values(valid_until=now), [{"n": n} for n in names])
    for chunk in chunks(ids):
        # Caveats, profiles and rates go with the set (ON DELETE CASCADE); provenances stay,
        # cited by the history.
        conn.execute(delete(profile_sets).where(ps.id.in_(chunk)))
    return [Deleted(n, found[n][1], counts.get(found[n][0], 0), numbers[n]) for n in names]


def delete_sets(engine: Engine, names: Sequence[str], message: str | None = None,
                ) -> list[Deleted]:
    """Delete the stored sets ``names`` from the current registry, in ONE write transaction.

    Each deletion is a revision (``deleted``); the sets' earlier revisions stay. An unknown
    name raises :class:`~registry_db.errors.NotFound` naming the nearest stored names, and
    nothing is deleted.
    """
    if not names:
        return []
    return run_write(engine, lambda conn: delete_in(conn, names, message, revision_time(conn)))


# --- reading -------------------------------------------------------------------------------------

