"""Every revision of every set: recording them, deleting sets, listing, diffing, reading back.

The current registry (``profile_sets`` … ``profile_rates``) is what resolution reads; beside it
the ``revisions`` table holds one row per import that added or changed a set and per deletion,
numbered 1, 2, … per set; ``profile_versions`` holds each version of a profile once, over the
range of its set's revisions that held it (``first_revision`` … ``last_revision``, current from
``valid_from`` to ``valid_until``), with ``version_rates`` and ``version_counts`` beside it, and
``revision_caveats`` each revision's caveats (profiles cite the shared ``provenances``, which
are therefore never deleted). Revisions are written inside the importer's (or the deleter's) one
write transaction, after the writers' lock, so numbers have no gap or duplicate under concurrent
writers and a killed writer leaves no half revision. An import writes only what changed: the
profiles equal to their set's open versions extend those ranges, the others close them, and
new or changed profiles become versions (:func:`record_current`); a deletion closes every
range of its set.

Reading: :func:`history` lists revisions newest first, :func:`load_revision` rebuilds one as a
:class:`~registry_db.model.ProfileSet`, :func:`diff` and :func:`diff_sets` name what changed
per profile, field by field.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, delete, func, insert, or_, select, text, update
from sqlalchemy.engine import Connection, Engine

from registry_db.errors import NotFound, UsageError
from registry_db.model import Profile, ProfileSet
from registry_db.store.bulk import CHUNK, chunks, counts_row, insert_many
from registry_db.store.drift import drift
from registry_db.store.engine import Bind, run_write
from registry_db.store.read import (
    ProfileSummary,
    _connect,
    _provenances,
    _utc,
    read_counts,
    unknown_set_message,
)
from registry_db.store.schema import (
    profile_counts,
    profile_keys,
    profile_rates,
    profile_sets,
    profile_versions,
    profiles,
    revision_caveats,
    revisions,
    version_counts,
    version_rates,
)

ACTIONS: tuple[str, ...] = ("added", "updated", "deleted")


@dataclass(frozen=True)
class Revision:
    """One revision of one set, as ``registry history`` shows it."""

    set: str
    revision: int
    action: str
    imported_at: datetime
    file: str | None
    profiles: int
    content_hash: str | None
    message: str | None

    def to_json(self) -> dict[str, Any]:
        """The contract's revision object."""
        return {"set": self.set, "revision": self.revision, "action": self.action,
                "imported_at": self.imported_at.isoformat(), "file": self.file,
                "profiles": self.profiles, "content_hash": self.content_hash,
                "message": self.message}


@dataclass(frozen=True)
class Deleted:
    """A set that a deletion removed from the current registry."""

    name: str
    file: str | None
    profiles: int
    revision: int


@dataclass(frozen=True)
class Change:
    """One profile that differs between two revisions (``profile`` None: the set's caveats).

    ``fields`` maps each changed field to its ``(old, new)`` values.
    """

    profile: str | None
    change: str  # added | removed | changed
    fields: dict[str, tuple[Any, Any]]
    #: How far a changed AL moved, in combined standard errors (both sides with counts).
    z: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The contract's change object; a changed AL with counts on both sides has its ``z``."""
        out: dict[str, Any] = {k: {"from": a, "to": b} for k, (a, b) in self.fields.items()}
        if self.z is not None and "acceptance_length" in out:
            out["acceptance_length"]["z"] = self.z
        return {"profile": self.profile, "change": self.change, "fields": out}

    def lines(self) -> list[str]:
        """The text form: one line per changed field, ``old → new`` (and the AL's z)."""
        label = self.profile if self.profile is not None else "(set)"
        if not self.fields:
            return [f"{self.change:<8} {label}"]
        z = "" if self.z is None else f"  (z = {self.z:.1f})"
        return [f"{self.change:<8} {label}  {name}: {_show(a)} → {_show(b)}"
                + (z if name == "acceptance_length" else "")
                for name, (a, b) in self.fields.items()]


@dataclass(frozen=True)
class Diff:
    """What changed in one set between two revisions (``from_`` None: from nothing)."""

    set: str
    from_: int | None
    to: int
    changes: tuple[Change, ...]

    def to_json(self) -> dict[str, Any]:
        """The contract's diff object."""
        return {"set": self.set, "from": self.from_, "to": self.to,
                "changes": [c.to_json() for c in self.changes]}


def _show(value: Any) -> str:
    return "–" if value is None else str(value)


# --- writing (inside the caller's write transaction) --------------------------------------------

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


def record_current(conn: Connection, entries: Sequence[tuple[str, int, str, str | None, str, int]],
                   sets: Sequence[ProfileSet], prov_ids: dict[int, int], message: str | None,
                   now: datetime) -> None:
    """Record a revision of each set in ``entries`` — ``(name, revision, action, file, hash,
    profiles)`` — whose content is ``sets`` (by name), just written to the current tables with
    ``profile_sets.revision`` = that revision and provenances ``prov_ids``.

    Only what changed is written: a profile equal to the version its set holds now (same file
    position, values, rates, counts and provenance) stays that version, whose range then takes
    in the new revision; every other open version of the set is closed at the revision before,
    and each new or changed profile becomes a version from this revision on. Caveats are copied
    per revision (a few rows a set)."""
    if not entries:
        return
    _insert_revisions(conn, [{
        "set_name": name, "revision": rev, "action": action, "imported_at": now,
        "source_file": file, "content_hash": h, "profile_count": n, "message": message,
    } for name, rev, action, file, h, n in entries])
    by_name = {s.name: s for s in sets}
    numbers = {name: rev for name, rev, *_ in entries}
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
        for name in chunk:
            versions = held.get(name, {})
            if not versions:
                fresh[name] = None
                first.append(name)
                continue
            kept = set()
            positions = []
            for i, p in enumerate(by_name[name].profiles):
                found = versions.get(_content(i, p, prov_ids))
                if found is None:
                    positions.append(i)
                else:
                    kept.add(found)
            fresh[name] = None if len(positions) == len(by_name[name].profiles) else positions
            closed += [{"vid": vid, "last": numbers[name] - 1}
                       for vid in versions.values() if vid not in kept]
            # The keys the set holds now against those it held: a stretch ends or begins.
            before = {content[1:6] for content in versions}
            after = {p.key for p in by_name[name].profiles}
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
        picked = [p for name in chunk for p in _at(by_name[name].profiles, fresh[name])]
        sizes = {name: len(by_name[name].profiles) for name in chunk}
        # The stretches first: each new version names its key's open one.
        _insert_first_keys(conn, first, sizes, now)
        # SQLite stores a time as text: written in its stored format, as for the versions.
        at: Any = stored_time(now) if conn.dialect.name == "sqlite" else now
        insert_many(conn, profile_keys, [{**row, "valid_from": at} for row in new_keys],
                    plain=True)
        _insert_versions(conn, fresh, sizes, now, any(p.per_position_rates for p in picked),
                         any(p.counts is not None for p in picked))


def _content(position: int, p: Profile, prov_ids: dict[int, int]) -> tuple:
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
            "message": message} for n in names])
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

def history(bind: Bind, name: str | None = None) -> list[Revision]:
    """The revisions of set ``name`` (every set's when None), newest first.

    An unknown name (one with no revision at all) raises :class:`NotFound` with the nearest
    names that have a history.
    """
    v = revisions.c
    query = select(v.set_name, v.revision, v.action, v.imported_at, v.source_file,
                   v.profile_count, v.content_hash, v.message)
    if name is not None:
        query = query.where(v.set_name == name)
    query = query.order_by(v.imported_at.desc(), v.set_name, v.revision.desc())
    with _connect(bind) as conn:
        rows = conn.execute(query).all()
        if name is not None and not rows:
            raise NotFound(unknown_set_message(name, _history_names(conn)))
    return [Revision(s, r, a, _utc(t), f, n, h, m) for s, r, a, t, f, n, h, m in rows]


def _history_names(conn: Connection) -> list[str]:
    return list(conn.execute(select(revisions.c.set_name).distinct()
                             .order_by(revisions.c.set_name)).scalars())


def load_revision(bind: Bind, name: str, number: int) -> ProfileSet | None:
    """Revision ``number`` of set ``name`` as it was imported (None for a deletion).

    Raises :class:`NotFound` when the set has no such revision.
    """
    v = revisions.c
    with _connect(bind) as conn:
        row = conn.execute(select(v.id, v.action, v.source_file)
                           .where(v.set_name == name, v.revision == number)).first()
        if row is None:
            raise NotFound(_no_revision(conn, name, number))
        rid, action, file = row
        if action == "deleted":
            return None
        return _build(conn, rid, name, number, file)


def _no_revision(conn: Connection, name: str, number: int) -> str:
    last = conn.execute(select(func.max(revisions.c.revision))
                        .where(revisions.c.set_name == name)).scalar()
    if last is None:
        return unknown_set_message(name, _history_names(conn))
    return f"set {name!r} has no revision {number}; its revisions are 1 to {last}"


def _build(conn: Connection, rid: int, name: str, number: int, file: str | None
           ) -> ProfileSet:
    """Revision ``number`` (id ``rid``) of set ``name``: its caveats, and the versions whose
    range holds it."""
    caveats = tuple(conn.execute(select(revision_caveats.c.text)
                                 .where(revision_caveats.c.revision_id == rid)
                                 .order_by(revision_caveats.c.position)).scalars())
    p = profile_versions.c
    holds = (p.set_name == name, p.first_revision <= number,
             (p.last_revision.is_(None)) | (p.last_revision >= number))
    rows = conn.execute(select(p.id, p.model, p.speculative_method, p.num_spec_tokens,
                               p.thinking, p.category, p.acceptance_length, p.method,
                               p.provenance_id, p.rationale, p.copied_from)
                        .where(*holds).order_by(p.position)).all()
    rates: dict[int, list[float]] = defaultdict(list)
    in_revision = select(p.id).where(*holds)
    for pid, rate in conn.execute(select(version_rates.c.profile_id, version_rates.c.rate)
                                  .where(version_rates.c.profile_id.in_(in_revision))
                                  .order_by(version_rates.c.profile_id,
                                            version_rates.c.position)):
        rates[pid].append(rate)
    provs = _provenances(conn, select(p.provenance_id).where(*holds))
    counts = read_counts(conn, version_counts, in_revision)
    return ProfileSet(name=name, caveats=caveats, file=file, profiles=tuple(Profile(
        model=model, speculative_method=smethod, num_spec_tokens=k, thinking=thinking,
        category=category, acceptance_length=al, method=method,
        per_position_rates=tuple(rates[pid]) if pid in rates else None,
        provenance=None if prov is None else provs[prov], rationale=rationale,
        copied_from=copied, counts=counts.get(pid))
        for pid, model, smethod, k, thinking, category, al, method, prov, rationale, copied
        in rows))


# --- the registry at a time or a revision -------------------------------------------------------

@dataclass(frozen=True)
class Held:
    """One set as the registry held it: its content, and the revision (and time) holding it."""

    set: ProfileSet
    revision: int
    imported_at: datetime


class _Row(NamedTuple):
    id: int
    set_name: str
    revision: int
    action: str
    imported_at: datetime
    source_file: str | None


def _rows(conn: Connection, query: Any) -> list[_Row]:
    return [_Row(*r) for r in conn.execute(query)]


_COLUMNS = (revisions.c.id, revisions.c.set_name, revisions.c.revision, revisions.c.action,
            revisions.c.imported_at, revisions.c.source_file)


def held(bind: Bind, names: Sequence[str] | None = None, *, as_of: datetime | None = None,
         revision: int | None = None) -> list[Held]:
    """The sets as the registry held them at ``as_of`` (an aware time; every set held then
    when ``names`` is None, by name), or the one set ``names[0]`` at ``revision``.

    The one place that reads a set's content as of a time or at a revision (``show``,
    ``profiles``, ``export``, ``coverage``, ``plot`` and ``restore`` all come here), so a
    change in how the history is stored changes this function and :func:`_build`. A set's
    registry at T is its latest revision (by number) written at or before T, unless that is a
    deletion: the resolver's rule. A named set not held then, a revision that is a deletion or
    does not exist raise :class:`NotFound` saying what the history does hold.
    """
    v = revisions.c
    with _connect(bind) as conn:
        if revision is not None:
            if names is None or len(names) != 1:
                raise ValueError("a revision names one set")
            name = names[0]
            rows = _rows(conn, select(*_COLUMNS).where(v.set_name == name,
                                                      v.revision == revision))
            if not rows:
                raise NotFound(_no_revision(conn, name, revision))
            if rows[0].action == "deleted":
                raise NotFound(_deletion(conn, name, revision))
        else:
            if as_of is None:
                raise ValueError("held() needs as_of or revision")
            n = revisions.alias("n")
            latest = (select(func.max(n.c.revision))
                      .where(n.c.set_name == v.set_name, n.c.imported_at <= as_of)
                      .scalar_subquery())
            query = select(*_COLUMNS).where(v.revision == latest, v.action != "deleted")
            if names is not None:
                query = query.where(v.set_name.in_(sorted(set(names))))
            found = {r.set_name: r for r in _rows(conn, query.order_by(v.set_name))}
            missing = [n for n in (names or ()) if n not in found]
            if missing:
                raise NotFound(_not_held(conn, missing[0], as_of))
            rows = [found[n] for n in names] if names is not None else list(found.values())
        return [Held(_build(conn, r.id, r.set_name, r.revision, r.source_file), r.revision,
                     _utc(r.imported_at)) for r in rows]


def profiles_as_of(bind: Bind, as_of: datetime, *, model: str | None = None,
                   method: str | None = None, k: int | None = None,
                   thinking: str | None = None, category: str | None = None,
                   sets: Sequence[str] | None = None) -> list[ProfileSummary]:
    """:func:`registry_db.store.read.list_profiles` against the registry as of ``as_of``: the
    same filters, rows and order (by key, then set)."""
    wanted = {"model": model, "speculative_method": method, "num_spec_tokens": k,
              "thinking": thinking, "category": category}
    found = [ProfileSummary(
        model=p.model, speculative_method=p.speculative_method, num_spec_tokens=p.num_spec_tokens,
        thinking=p.thinking, category=p.category, profile_set=h.set.name,
        acceptance_length=float(p.acceptance_length), method=p.method,
        source=p.provenance.source if p.provenance else None, counts=p.counts)
        for h in held(bind, list(sets) if sets else None, as_of=as_of) for p in h.set.profiles
        if all(v is None or getattr(p, f) == v for f, v in wanted.items())]
    return sorted(found, key=lambda r: (*r.key, r.profile_set))


def last_content(bind: Bind, name: str) -> int:
    """The revision holding the last content of set ``name``, which is deleted.

    :class:`NotFound` when the set has no history (naming the nearest that have one);
    :class:`~registry_db.errors.UsageError` when it is in the registry now: which earlier
    revision to go back to is then the caller's to say.
    """
    with _connect(bind) as conn:
        rows = _history_rows(conn, name)
        if not rows:
            raise NotFound(unknown_set_message(name, _history_names(conn)))
        if rows[-1].action != "deleted":
            raise UsageError(f"set {name!r} is in the registry (revision {rows[-1].revision}); "
                             f"give --revision N to go back to an earlier one (`registry "
                             f"history {name}` lists them)")
        return next(r.revision for r in reversed(rows) if r.action != "deleted")


def deleted_message(bind: Bind, name: str) -> str | None:
    """For a set that is deleted now: when, and which revision holds its last content (None
    for a set with no history, or one in the registry)."""
    with _connect(bind) as conn:
        rows = _history_rows(conn, name)
    if not rows or rows[-1].action != "deleted":
        return None
    last = next(r.revision for r in reversed(rows) if r.action != "deleted")
    return (f"set {name!r} was deleted at {_utc(rows[-1].imported_at).isoformat()} (revision "
            f"{rows[-1].revision}); revision {last} holds its last content: `registry export "
            f"{name} --revision {last}` writes it, `registry restore {name}` brings it back")


def _history_rows(conn: Connection, name: str) -> list[_Row]:
    return _rows(conn, select(*_COLUMNS).where(revisions.c.set_name == name)
                 .order_by(revisions.c.revision))


def _deletion(conn: Connection, name: str, number: int) -> str:
    before = [r for r in _history_rows(conn, name) if r.revision < number
              and r.action != "deleted"]
    held_by = f"; revision {before[-1].revision} holds its last content" if before else ""
    return f"revision {number} of {name!r} is its deletion, which holds no profiles{held_by}"


def _not_held(conn: Connection, name: str, as_of: datetime) -> str:
    """Why set ``name`` was not in the registry at ``as_of``: not yet added, or deleted."""
    when = as_of.isoformat()
    rows = _history_rows(conn, name)
    if not rows:
        return unknown_set_message(name, _history_names(conn))
    earlier = [r for r in rows if _utc(r.imported_at) <= as_of]
    if not earlier:
        return (f"set {name!r} was not in the registry at {when}: it was first added at "
                f"{_utc(rows[0].imported_at).isoformat()} (revision 1)")
    gone = max(earlier, key=lambda r: r.revision)
    return (f"set {name!r} was not in the registry at {when}: it was deleted at "
            f"{_utc(gone.imported_at).isoformat()} (revision {gone.revision})")


def diff(bind: Bind, name: str, from_: int | None = None, to: int | None = None) -> Diff:
    """What changed in set ``name`` from revision ``from_`` to ``to``.

    By default ``to`` is the latest revision and ``from_`` the one before it (none when ``to``
    is the first: every profile is then ``added``). A deletion is a revision with no profiles.
    """
    with _connect(bind) as conn:
        last = conn.execute(select(func.max(revisions.c.revision))
                            .where(revisions.c.set_name == name)).scalar()
        if last is None:
            raise NotFound(unknown_set_message(name, _history_names(conn)))
        to = last if to is None else to
        if from_ is None:
            from_ = to - 1 if to > 1 else None
        old = None if from_ is None or from_ == 0 else load_revision(conn, name, from_)
        new = load_revision(conn, name, to)
    return Diff(name, from_, to, tuple(diff_sets(old, new)))


def diff_sets(old: ProfileSet | None, new: ProfileSet | None) -> list[Change]:
    """The changes from ``old`` to ``new`` (None: no set), profiles in label order after any
    change of the caveats."""
    changes = []
    old_caveats = list(old.caveats) if old is not None else []
    new_caveats = list(new.caveats) if new is not None else []
    if old_caveats != new_caveats and old is not None and new is not None:
        changes.append(Change(None, "changed", {"caveats": (old_caveats, new_caveats)}))
    before = {p.key: p for p in (old.profiles if old is not None else ())}
    after = {p.key: p for p in (new.profiles if new is not None else ())}
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if a is None and b is not None:
            changes.append(Change(b.label, "added", {
                "acceptance_length": (None, float(b.acceptance_length))}))
        elif b is None and a is not None:
            changes.append(Change(a.label, "removed", {
                "acceptance_length": (float(a.acceptance_length), None)}))
        elif a is not None and b is not None:
            fields = _fields(a, b)
            if fields:
                changes.append(Change(a.label, "changed", fields,
                                      drift(a, b) if "acceptance_length" in fields else None))
    return changes


def _fields(a: Profile, b: Profile) -> dict[str, tuple[Any, Any]]:
    flat_a, flat_b = _flatten(a), _flatten(b)
    return {name: (flat_a.get(name), flat_b.get(name))
            for name in dict.fromkeys([*flat_a, *flat_b])
            if flat_a.get(name) != flat_b.get(name)}


def _flatten(p: Profile) -> dict[str, Any]:
    """A profile's comparable fields by the spec's names (provenance's as dotted paths)."""
    out: dict[str, Any] = {
        "acceptance_length": float(p.acceptance_length),
        "per_position_rates": None if p.per_position_rates is None
        else [float(r) for r in p.per_position_rates],
        "method": p.method, "rationale": p.rationale, "copied_from": p.copied_from,
    }
    if p.counts is not None:
        out.update((f"counts.{k}", v) for k, v in p.counts.to_json().items())
    pv = p.provenance
    if pv is not None:
        for name in ("source", "run", "benchmark", "prompts", "hardware", "engine_image", "tp"):
            out[f"provenance.{name}"] = getattr(pv, name)
        if pv.sampling is not None:
            for name in ("temperature", "top_p", "top_k", "max_tokens"):
                value = getattr(pv.sampling, name)
                out[f"provenance.sampling.{name}"] = float(value) if isinstance(
                    value, float) else value
        for name, value in pv.settings:
            out[f"provenance.settings.{name}"] = value
    return {k: v for k, v in out.items() if v is not None}


__all__ = ["ACTIONS", "Change", "Deleted", "Diff", "Held", "Revision", "delete_in",
           "delete_sets", "deleted_message", "diff", "diff_sets", "held", "history",
           "last_content", "load_revision", "next_revisions", "profiles_as_of",
           "record_current", "revision_time"]
