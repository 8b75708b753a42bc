"""Labels: names a team gives to states of the registry (``release-2026-12``), read wherever
``--as-of`` takes a time.

A label names a moment: the registry as of that time, every set at the revision it had then
(:func:`registry_db.store.as_of.revision_at`'s rule). Made from ``SET@REVISION``, it names that
revision's ``imported_at`` (so the set reads as exactly that revision, and every other set as
it stood then) and remembers the set and revision it was made from; made from a time, that
time; made from nothing, the moment it is made. ``labels`` holds each label's latest position
and ``label_events`` every position it was ever given: moving one (``force``) keeps where it
was. Writes take the writers' lock, so a label made "now" names a state in which no import that
stamped an earlier time is still to commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection, Engine

from registry_db.errors import NotFound, UsageError
from registry_db.history.record import revision_time
from registry_db.inputs.as_of import LabelName, label_name_problem
from registry_db.inputs.schema import nearest
from registry_db.store.engine import Bind, run_write
from registry_db.store.read import _connect, _utc, unknown_set_message
from registry_db.store.schema import label_events, labels, revisions

__all__ = ["Label", "LabelEvent", "Labelled", "events", "list_labels", "moment", "set_label"]


@dataclass(frozen=True)
class Label:
    """A label at one position: the moment it names, the set's revision it was made from
    (``set``/``revision``, None when made from a time), when and why it was put there."""

    name: str
    as_of: datetime
    set: str | None
    revision: int | None
    labelled_at: datetime
    message: str | None

    def same_place(self, other: Label) -> bool:
        return (self.as_of, self.set, self.revision) == (other.as_of, other.set, other.revision)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "as_of": self.as_of.isoformat(), "set": self.set,
                "revision": self.revision, "labelled_at": self.labelled_at.isoformat(),
                "message": self.message}


@dataclass(frozen=True)
class LabelEvent:
    """One position a label was given: ``created`` or ``moved``."""

    label: Label
    action: str

    def to_json(self) -> dict[str, Any]:
        return {**self.label.to_json(), "action": self.action}


@dataclass(frozen=True)
class Labelled:
    """What :func:`set_label` did: ``created``, ``moved`` or ``unchanged`` (already there),
    the label now, and where it was before (None when new)."""

    action: str
    label: Label
    before: Label | None


def _label(row: Any) -> Label:
    name, as_of, set_name, revision, at, message = row
    return Label(name, _utc(as_of), set_name, revision, _utc(at), message)


_COLUMNS = ("name", "as_of", "set_name", "revision", "labelled_at", "message")


def list_labels(bind: Bind) -> list[Label]:
    """Every label at its latest position, by name."""
    with _connect(bind) as conn:
        rows = conn.execute(select(*(labels.c[c] for c in _COLUMNS))
                            .order_by(labels.c.name)).all()
    return [_label(r) for r in rows]


def events(bind: Bind, name: str | None = None) -> list[LabelEvent]:
    """Every position of label ``name`` (every label's when None), newest first. An unknown
    name raises :class:`NotFound` listing the labels."""
    e = label_events.c
    query = select(*(e[c] for c in _COLUMNS), e.action)
    if name is not None:
        query = query.where(e.name == name)
    with _connect(bind) as conn:
        rows = conn.execute(query.order_by(e.id.desc())).all()
        if name is not None and not rows:
            raise NotFound(unknown_label_message(conn, name))
    return [LabelEvent(_label(r[:-1]), r[-1]) for r in rows]


def moment(bind: Bind, value: datetime | str | None) -> datetime | None:
    """``value`` as the moment it names: a time as it is (None too), a label's name (a
    :class:`~registry_db.inputs.as_of.LabelName`, or any text) as the label's ``as_of``. An
    unknown label raises :class:`NotFound`: one line naming the known labels, or saying there
    are none."""
    if value is None or isinstance(value, datetime):
        return value
    with _connect(bind) as conn:
        found = conn.execute(select(labels.c.as_of).where(labels.c.name == str(value))).scalar()
        if found is None:
            raise NotFound(unknown_label_message(conn, str(value)))
    return _utc(found)


def unknown_label_message(conn: Connection, name: str) -> str:
    """"No label NAME" (nor a time, for ``--as-of``'s sake), with the nearest names and the
    list (or how to make one)."""
    known = list(conn.execute(select(labels.c.name).order_by(labels.c.name)).scalars())
    what = f"no label named {name!r} (nor is it a time such as 2026-11-30T12:00:00Z)"
    if not known:
        return f"{what}: the registry has no labels yet; make one with `registry label NAME`"
    near = nearest(name, known)
    hint = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
    shown = ", ".join(known[:20]) + (f", … ({len(known)} in all)" if len(known) > 20 else "")
    return f"{what}; {hint}known labels: {shown}"


def set_label(engine: Engine, name: str, *, as_of: datetime | LabelName | None = None,
              set_name: str | None = None, revision: int | None = None, force: bool = False,
              message: str | None = None) -> Labelled:
    """Give label ``name`` a position, in one write transaction under the writers' lock: the
    time ``as_of`` (or another label's, given its name), revision ``revision`` of set
    ``set_name``, or (neither) the moment of writing.

    A name that breaks :func:`~registry_db.inputs.as_of.label_name_problem`, both positions at
    once, or a time after now raise :class:`~registry_db.errors.UsageError`; so does moving an
    existing label elsewhere without ``force`` (giving it the position it has is
    ``unchanged``, and writes nothing). An unknown set, revision or label is
    :class:`NotFound`.
    """
    problem = label_name_problem(name)
    if problem is not None:
        raise UsageError(problem)
    if (set_name is None) != (revision is None):
        raise UsageError("a label made from a revision needs both the set and its number "
                         "(SET@REVISION)")
    if set_name is not None and as_of is not None:
        raise UsageError("give SET@REVISION or --as-of, not both")

    def work(conn: Connection) -> Labelled:
        now = revision_time(conn)
        if set_name is not None:
            at = _revision_time(conn, set_name, revision)  # type: ignore[arg-type]
        elif as_of is not None:
            then = moment(conn, as_of)
            assert then is not None
            at = then
            if at > now:
                raise UsageError(f"{at.isoformat()} is after now ({now.isoformat()}): a label "
                                 "names a state the registry has been in, which later imports "
                                 "cannot change")
        else:
            at = now
        new = Label(name, at, set_name, revision, now, message)
        row = conn.execute(select(*(labels.c[c] for c in _COLUMNS))
                           .where(labels.c.name == name)).first()
        before = None if row is None else _label(row)
        if before is not None and before.same_place(new):
            return Labelled("unchanged", before, before)
        if before is not None and not force:
            where = (f"{before.set}@{before.revision}" if before.set is not None
                     else before.as_of.isoformat())
            raise UsageError(f"label {name!r} already names {where}; give --force to move it "
                             "(its earlier position stays in `registry labels --history`)")
        values = {"as_of": at, "set_name": set_name, "revision": revision,
                  "labelled_at": now, "message": message}
        if before is None:
            conn.execute(insert(labels).values(name=name, **values))
        else:
            conn.execute(update(labels).where(labels.c.name == name).values(**values))
        action = "created" if before is None else "moved"
        conn.execute(insert(label_events).values(name=name, action=action, **values))
        return Labelled(action, new, before)

    return run_write(engine, work)


def _revision_time(conn: Connection, name: str, number: int) -> datetime:
    """When revision ``number`` of set ``name`` was written; NotFound naming what there is."""
    v = revisions.c
    found = conn.execute(select(v.imported_at)
                         .where(v.set_name == name, v.revision == number)).scalar()
    if found is not None:
        return _utc(found)
    last = conn.execute(select(func.max(v.revision)).where(v.set_name == name)).scalar()
    if last is None:
        known = list(conn.execute(select(v.set_name).distinct().order_by(v.set_name)).scalars())
        raise NotFound(unknown_set_message(name, known))
    raise NotFound(f"set {name!r} has no revision {number}; its revisions are 1 to {last}")
