"""Drift in the registry itself: how far a set's new revision moves a value with counts.

A value with counts on both sides moves by z = (new − old) / √(stderr_old² + stderr_new²)
(:func:`registry_db.model.z_score`), old and new being each side's counts' own mean (the error is
about it; a stored AL may be it rounded); ``registry diff`` shows each changed AL's z, and
``registry import`` warns when a set's new content moves one by more than :data:`MAX_Z`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from sqlalchemy import select
from sqlalchemy.engine import Connection

from registry_db.errors import Finding
from registry_db.model import Profile, ProfileSet, z_score
from registry_db.store.bulk import chunks
from registry_db.store.schema import profile_counts, profile_sets, profiles

__all__ = ["MAX_Z", "drift", "drift_warnings"]

#: An import warns of a value moved by more combined standard errors than this.
MAX_Z = 3.0


def drift(old: Profile, new: Profile) -> float | None:
    """How far ``new``'s AL lies from ``old``'s in combined standard errors, when both have
    counts (None otherwise, or when neither has any spread)."""
    if old.counts is None or new.counts is None:
        return None
    return z_score(old.counts.mean, old.counts.uncertainty(old.num_spec_tokens).stderr,
                   new.counts.mean, new.counts.uncertainty(new.num_spec_tokens).stderr)


def drift_warnings(conn: Connection, sets: Sequence[ProfileSet]) -> list[Finding]:
    """A ``value_drift`` warning for each profile of ``sets`` whose AL lies more than
    :data:`MAX_Z` combined standard errors from the stored revision's (both with counts).

    Reads only the stored counts of the sets given that carry counts, so an import without
    counts costs nothing more.
    """
    counted = [s for s in sets if any(p.counts is not None for p in s.profiles)]
    if not counted:
        return []
    p, ps, c = profiles.c, profile_sets.c, profile_counts.c
    stored: dict[tuple, tuple[float, float, int, float]] = {}
    for chunk in chunks(sorted(s.name for s in counted)):
        for r in conn.execute(
                select(ps.name, ps.revision, p.model, p.speculative_method, p.num_spec_tokens,
                       p.thinking, p.category, p.acceptance_length, c.al_stderr, c.drafts,
                       c.accepted_tokens)
                .join_from(profiles, profile_sets, p.set_id == ps.id)
                .join(profile_counts, c.profile_id == p.id).where(ps.name.in_(chunk))):
            key = (r.model, r.speculative_method, r.num_spec_tokens, r.thinking, r.category)
            mean = float(1 + Fraction(r.accepted_tokens, r.drafts))
            stored[(r.name, key)] = (r.acceptance_length, r.al_stderr, r.revision, mean)
    out = []
    for s in counted:
        for i, prof in enumerate(s.profiles):
            old = stored.get((s.name, prof.key))
            if prof.counts is None or old is None:
                continue
            al, stderr, revision, mean = old
            new_stderr = prof.counts.uncertainty(prof.num_spec_tokens).stderr
            z = z_score(mean, stderr, prof.counts.mean, new_stderr)
            if z is not None and abs(z) > MAX_Z:
                out.append(Finding(
                    s.file or "<input>", 0, 0, f"profiles[{i}].acceptance_length", "value_drift",
                    f"{prof.label} moves from {al!r} ± {stderr:.2g} (revision {revision} of "
                    f"{s.name!r}) to {prof.acceptance_length!r} ± {new_stderr:.2g}: z = {z:.1f}, "
                    f"past ±{MAX_Z:g}; check what changed in the run (`registry diff "
                    f"{s.name}` after the import)", severity="warning"))
    return out
