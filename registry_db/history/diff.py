"""What changed between two revisions of a set, per profile and field by field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

from registry_db.errors import NotFound
from registry_db.history.drift import drift
from registry_db.history.read import load_revision, unknown_set
from registry_db.model import Profile, ProfileSet
from registry_db.store.engine import Bind
from registry_db.store.read import (
    _connect,
)
from registry_db.store.schema import (
    revisions,
)


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


def diff(bind: Bind, name: str, from_: int | None = None, to: int | None = None) -> Diff:
    """What changed in set ``name`` from revision ``from_`` to ``to``.

    By default ``to`` is the latest revision and ``from_`` the one before it (none when ``to``
    is the first: every profile is then ``added``). A deletion is a revision with no profiles.
    """
    with _connect(bind) as conn:
        last = conn.execute(select(func.max(revisions.c.revision))
                            .where(revisions.c.set_name == name)).scalar()
        if last is None:
            raise NotFound(unknown_set(conn, name))
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

