"""Reading profile sets back out of the database.

Rows never leave this module: callers get :class:`~registry_db.model.ProfileSet` (rebuilt exactly
as it was imported: profiles and caveats in file order, rates by position, provenance with its
sampling and typed settings) or the small frozen :class:`SetSummary` and :class:`Conflict`.
Every listing has a deterministic order. Each function takes an engine or an open connection,
so it can also read inside a caller's transaction.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Table, and_, func, select
from sqlalchemy.engine import Connection

from registry_db.errors import NotFound
from registry_db.model import (
    PROFILE_KEY_FIELDS,
    Counts,
    Profile,
    ProfileSet,
    Provenance,
    Sampling,
    setting_value,
)
from registry_db.store.engine import Bind
from registry_db.store.messages import unknown_set_message
from registry_db.store.schema import (
    profile_counts,
    profile_rates,
    profile_sets,
    profiles,
    provenance_settings,
    provenances,
    set_caveats,
)
from registry_db.store.stored_counts import counts_from_row
from registry_db.store.summaries import Conflict, ProfileSummary, SetSummary, utc

__all__ = ["Conflict", "ProfileSummary", "SetSummary", "conflicts", "key_values", "list_profiles",
           "list_sets", "load_set", "load_sets", "read_counts", "set_names", "set_summary"]


@contextlib.contextmanager
def _connect(bind: Bind) -> Iterator[Connection]:
    if isinstance(bind, Connection):
        yield bind
        return
    with bind.connect() as conn:
        yield conn


_utc = utc


# --- listings ------------------------------------------------------------------------------------

def set_names(bind: Bind) -> list[str]:
    """The stored sets' names, sorted."""
    with _connect(bind) as conn:
        return list(conn.execute(select(profile_sets.c.name)
                                 .order_by(profile_sets.c.name)).scalars())


def key_values(bind: Bind, column: str) -> list[str]:
    """The distinct stored values of a profile key column (``model``, ``speculative_method``,
    ``category``), sorted: what shell completion offers."""
    if column not in PROFILE_KEY_FIELDS:
        raise ValueError(f"{column!r} is not a profile key column")
    with _connect(bind) as conn:
        return list(conn.execute(select(profiles.c[column]).distinct()
                                 .order_by(profiles.c[column])).scalars())


def list_sets(bind: Bind) -> list[SetSummary]:
    """Every stored set with its file, counts and import time, by name."""
    return _summaries(bind, None)


def set_summary(bind: Bind, name: str) -> SetSummary:
    """The summary of the stored set ``name``; :class:`NotFound` names the known sets."""
    found = _summaries(bind, name)
    if not found:
        raise NotFound(unknown_set_message(name, set_names(bind)))
    return found[0]


def _summaries(bind: Bind, name: str | None) -> list[SetSummary]:
    ps = profile_sets.c
    n_profiles = (select(func.count()).where(profiles.c.set_id == ps.id)
                  .correlate(profile_sets).scalar_subquery())
    n_caveats = (select(func.count()).where(set_caveats.c.set_id == ps.id)
                 .correlate(profile_sets).scalar_subquery())
    query = select(ps.name, ps.source_file, n_profiles, n_caveats, ps.imported_at,
                   ps.content_hash).order_by(ps.name)
    if name is not None:
        query = query.where(ps.name == name)
    with _connect(bind) as conn:
        return [SetSummary(n, f, int(np), int(nc), _utc(t), h)
                for n, f, np, nc, t, h in conn.execute(query)]


def conflicts(bind: Bind) -> list[Conflict]:
    """Profile keys held by two or more sets, by key, each with its sets by name."""
    key_cols = [profiles.c[k] for k in PROFILE_KEY_FIELDS]
    dup = (select(*key_cols).group_by(*key_cols).having(func.count() > 1)
           .subquery("dup"))
    on = and_(*(profiles.c[k] == dup.c[k] for k in PROFILE_KEY_FIELDS))
    query = (select(*key_cols, profile_sets.c.name)
             .join_from(profiles, dup, on)
             .join(profile_sets, profile_sets.c.id == profiles.c.set_id)
             .order_by(*key_cols, profile_sets.c.name))
    grouped: dict[tuple, list[str]] = defaultdict(list)
    with _connect(bind) as conn:
        for *key, name in conn.execute(query):
            grouped[tuple(key)].append(name)
    return [Conflict(key[0], key[1], key[2], key[3], key[4], tuple(names))
            for key, names in grouped.items()]


def list_profiles(bind: Bind, *, model: str | None = None, method: str | None = None,
                  k: int | None = None, thinking: str | None = None,
                  category: str | None = None, sets: Sequence[str] | None = None,
                  ) -> list[ProfileSummary]:
    """Every stored profile that matches the given filters, ordered by key, then set.

    A filter left None matches everything; ``sets`` keeps the profiles of the named sets (an
    unknown name raises :class:`NotFound` naming the known sets). One query; the model and
    method filters use the profile key's index.
    """
    p, ps, pr, c = profiles.c, profile_sets.c, provenances.c, profile_counts.c
    query = (select(p.model, p.speculative_method, p.num_spec_tokens, p.thinking, p.category,
                    ps.name, p.acceptance_length, p.method, pr.source, c.drafts,
                    c.draft_tokens, c.accepted_tokens, c.accepted_per_position)
             .join_from(profiles, profile_sets, p.set_id == ps.id)
             .outerjoin(provenances, pr.id == p.provenance_id)
             .outerjoin(profile_counts, c.profile_id == p.id)
             .order_by(p.model, p.speculative_method, p.num_spec_tokens, p.thinking,
                       p.category, ps.name))
    for column, value in ((p.model, model), (p.speculative_method, method),
                          (p.num_spec_tokens, k), (p.thinking, thinking),
                          (p.category, category)):
        if value is not None:
            query = query.where(column == value)
    with _connect(bind) as conn:
        if sets:
            known = set(conn.execute(select(ps.name).where(ps.name.in_(sorted(set(sets)))))
                        .scalars())
            missing = [n for n in sets if n not in known]
            if missing:
                raise NotFound(unknown_set_message(missing[0], set_names(conn)))
            query = query.where(ps.name.in_(sorted(known)))
        return [ProfileSummary(
            r.model, r.speculative_method, r.num_spec_tokens, r.thinking, r.category,
            profile_set=r.name, acceptance_length=r.acceptance_length, method=r.method,
            source=r.source, counts=None if r.drafts is None else counts_from_row(
                r.drafts, r.draft_tokens, r.accepted_tokens, r.accepted_per_position))
            for r in conn.execute(query)]


# --- whole sets ----------------------------------------------------------------------------------

def load_set(bind: Bind, name: str) -> ProfileSet:
    """The stored set ``name``, exactly as imported; :class:`NotFound` names the known sets."""
    return load_sets(bind, [name])[0]


def load_sets(bind: Bind, names: Sequence[str] | None = None) -> list[ProfileSet]:
    """The named sets (in the order given; every set by name when ``names`` is None).

    Reads with a fixed number of queries however many sets and profiles there are.
    """
    with _connect(bind) as conn:
        ps = profile_sets.c
        query = select(ps.id, ps.name, ps.source_file)
        if names is not None:
            query = query.where(ps.name.in_(sorted(set(names))))
        found = {n: (i, f) for i, n, f in conn.execute(query)}
        if names is None:
            names = sorted(found)
        missing = [n for n in names if n not in found]
        if missing:
            raise NotFound(unknown_set_message(missing[0], set_names(conn)))
        ids = [found[n][0] for n in names]
        return _build(conn, ids, names, [found[n][1] for n in names])


def _build(conn: Connection, ids: list[int], names: Sequence[str],
           files: Sequence[str | None]) -> list[ProfileSet]:
    caveats: dict[int, list[str]] = defaultdict(list)
    for sid, text in conn.execute(select(set_caveats.c.set_id, set_caveats.c.text)
                                  .where(set_caveats.c.set_id.in_(ids))
                                  .order_by(set_caveats.c.set_id, set_caveats.c.position)):
        caveats[sid].append(text)

    p = profiles.c
    rows = conn.execute(select(p.id, p.set_id, p.model, p.speculative_method, p.num_spec_tokens,
                               p.thinking, p.category, p.acceptance_length, p.method,
                               p.provenance_id, p.rationale, p.copied_from)
                        .where(p.set_id.in_(ids)).order_by(p.set_id, p.position)).all()

    rates: dict[int, list[float]] = defaultdict(list)
    in_sets = select(p.id).where(p.set_id.in_(ids))
    for pid, rate in conn.execute(select(profile_rates.c.profile_id, profile_rates.c.rate)
                                  .where(profile_rates.c.profile_id.in_(in_sets))
                                  .order_by(profile_rates.c.profile_id,
                                            profile_rates.c.position)):
        rates[pid].append(rate)

    provs = _provenances(conn, select(p.provenance_id).where(p.set_id.in_(ids)))
    counts = read_counts(conn, profile_counts, in_sets)

    by_set: dict[int, list[Profile]] = defaultdict(list)
    for (pid, sid, model, smethod, k, thinking, category, al, method, prov_id, rationale,
         copied) in rows:
        by_set[sid].append(Profile(
            model=model, speculative_method=smethod, num_spec_tokens=k, thinking=thinking,
            category=category, acceptance_length=al, method=method,
            per_position_rates=tuple(rates[pid]) if pid in rates else None,
            provenance=None if prov_id is None else provs[prov_id],
            rationale=rationale, copied_from=copied, counts=counts.get(pid)))
    return [ProfileSet(name=n, caveats=tuple(caveats[i]), profiles=tuple(by_set[i]), file=f)
            for i, n, f in zip(ids, names, files)]


def read_counts(conn: Connection, table: Table, cited: Any) -> dict[int, Counts]:
    """``profile id -> Counts`` for the profiles ``cited`` (a subquery of ids) in ``table``
    (``profile_counts`` or ``version_counts``, which have the same columns)."""
    c = table.c
    return {pid: counts_from_row(d, dt, a, per) for pid, d, dt, a, per in conn.execute(
        select(c.profile_id, c.drafts, c.draft_tokens, c.accepted_tokens,
               c.accepted_per_position).where(c.profile_id.in_(cited)))}


def _provenances(conn: Connection, cited) -> dict[int, Provenance]:  # noqa: ANN001
    settings: dict[int, list[tuple[str, object]]] = defaultdict(list)
    st = provenance_settings.c
    for pid, name, value, type_ in conn.execute(
            select(st.provenance_id, st.name, st.value, st.value_type)
            .where(st.provenance_id.in_(cited)).order_by(st.provenance_id, st.name)):
        settings[pid].append((name, setting_value(value, type_)))
    pr = provenances.c
    out: dict[int, Provenance] = {}
    for row in conn.execute(select(pr.id, pr.source, pr.run, pr.benchmark, pr.prompts,
                                   pr.hardware, pr.engine_image, pr.tp, pr.temperature,
                                   pr.top_p, pr.top_k, pr.max_tokens)
                            .where(pr.id.in_(cited))):
        (pid, source, run, benchmark, prompts, hardware, image, tp, temperature, top_p, top_k,
         max_tokens) = row
        sampling = None if temperature is None else Sampling(temperature, top_p, top_k,
                                                             max_tokens)
        out[pid] = Provenance(source=source, run=run, benchmark=benchmark, prompts=prompts,
                              hardware=hardware, engine_image=image, tp=tp, sampling=sampling,
                              settings=tuple(settings[pid]))
    return out
