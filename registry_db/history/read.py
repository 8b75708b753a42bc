"""Reading history back: :func:`history` lists revisions newest first, :func:`load_revision`
rebuilds one as a :class:`~registry_db.model.ProfileSet`, :func:`held` gives the sets as the
registry held them at a time or a revision."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, select, text
from sqlalchemy.engine import Connection

from registry_db.errors import NotFound, UsageError
from registry_db.model import GitOrigin, Profile, ProfileSet
from registry_db.store.as_of import revision_at
from registry_db.store.engine import Bind
from registry_db.store.read import (
    ProfileSummary,
    _connect,
    _provenances,
    _utc,
    read_counts,
    unknown_set_message,
)
from registry_db.store.schema import (
    profile_versions,
    revision_caveats,
    revisions,
    version_counts,
    version_rates,
)
from registry_db.store.summaries import Revision, git_origin

ACTIONS: tuple[str, ...] = ("added", "updated", "deleted")


def origin_of(bind: Bind, name: str, number: int) -> GitOrigin | None:
    """Where revision ``number`` of set ``name`` came from in git (None: nowhere known)."""
    v = revisions.c
    with _connect(bind) as conn:
        row = conn.execute(select(v.git_commit, v.git_dirty, v.git_path)
                           .where(v.set_name == name, v.revision == number)).first()
    return None if row is None else git_origin(*row)


def history(bind: Bind, name: str | None = None) -> list[Revision]:
    """The revisions of set ``name`` (every set's when None), newest first.

    An unknown name (one with no revision at all) raises :class:`NotFound` with the nearest
    names that have a history.
    """
    v = revisions.c
    query = select(v.set_name, v.revision, v.action, v.imported_at, v.source_file,
                   v.profile_count, v.content_hash, v.message, v.git_commit, v.git_dirty,
                   v.git_path)
    if name is not None:
        query = query.where(v.set_name == name)
    query = query.order_by(v.imported_at.desc(), v.set_name, v.revision.desc())
    with _connect(bind) as conn:
        rows = conn.execute(query).all()
        if name is not None and not rows:
            raise NotFound(unknown_set(conn, name))
    return [Revision(s, r, a, _utc(t), f, n, h, m, git_origin(*git))
            for s, r, a, t, f, n, h, m, *git in rows]


def unknown_set(conn: Connection, name: str) -> str:
    """The message for ``name``, which no revision names: the nearest names the history holds."""
    return unknown_set_message(name, _history_names(conn))


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
        return unknown_set(conn, name)
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
    registry at T is its revision stamped last at or before T, unless that is a deletion: the
    resolver's rule, in its text (``store.as_of.revision_at``). A named set not held then, a
    revision that is a deletion or does not exist raise :class:`NotFound` saying what the
    history does hold.
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
            # The resolver's own rule, as its text (one rule for "as of T" in every reader).
            at = text("revisions.revision = " + revision_at("revisions.set_name", ":as_of"))
            at = at.bindparams(bindparam("as_of", as_of, type_=v.imported_at.type))
            query = select(*_COLUMNS).where(at, v.action != "deleted")
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
            raise NotFound(unknown_set(conn, name))
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
        return unknown_set(conn, name)
    earlier = [r for r in rows if _utc(r.imported_at) <= as_of]
    if not earlier:
        return (f"set {name!r} was not in the registry at {when}: it was first added at "
                f"{_utc(rows[0].imported_at).isoformat()} (revision 1)")
    gone = max(earlier, key=lambda r: r.revision)
    return (f"set {name!r} was not in the registry at {when}: it was deleted at "
            f"{_utc(gone.imported_at).isoformat()} (revision {gone.revision})")


