"""The history grows by what changed: a profile version is stored once and lives over a range of
its set's revisions; an import writes the changed profiles only, a deletion closes ranges, and
every revision still reads back as it was imported, now and as of any time (the versions' reading
equals the plain reading of each revision, on both backends)."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime

from sqlalchemy import text

from registry_db import history
from registry_db.errors import ResolutionRefused
from registry_db.importing.write import import_sets
from registry_db.inputs.run import Request
from registry_db.model import Counts, Profile, ProfileSet
from registry_db.resolve.plan import resolve, resolve_many
from registry_db.store import read
from tests.helpers import broken_foreign_keys, run_cli


def _profile(i: int, al: float = 2.5, **kw) -> Profile:
    return Profile(model=f"m{i % 3}", speculative_method="mtp", num_spec_tokens=3,
                   thinking="on" if i % 2 else "off", category=f"cat{i}", acceptance_length=al,
                   method="assumed", rationale="a guess", **kw)


def _set(name: str, profiles: list[Profile], caveats: tuple[str, ...] = ()) -> ProfileSet:
    return ProfileSet(name=name, caveats=caveats, file=f"{name}.yaml", profiles=tuple(profiles))


def _versions(engine) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT set_name, position, acceptance_length, first_revision, last_revision, "
            "valid_until IS NULL FROM profile_versions ORDER BY set_name, position, "
            "first_revision"))]


def _keys(engine) -> list[tuple]:
    """Each stretch of a key in a set: (set, category, still held)."""
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT set_name, category, CASE WHEN valid_until IS NULL THEN 1 ELSE 0 END "
            "FROM profile_keys ORDER BY set_name, category, valid_from"))]


def _rows(engine, table: str) -> int:
    with engine.connect() as conn:
        return conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar()


def test_an_import_writes_only_the_profiles_that_changed(engine):
    first = [_profile(i, per_position_rates=(0.8, 0.5, 0.2)) if i == 1 else
             _profile(i, counts=Counts(4, 12, 6)) if i == 2 else _profile(i) for i in range(20)]
    import_sets(engine, [_set("s", first)])
    assert _rows(engine, "profile_versions") == 20
    second = list(first)
    second[0] = dataclasses.replace(first[0], acceptance_length=2.75)     # a value
    second[1] = dataclasses.replace(first[1], per_position_rates=(0.8, 0.6, 0.1))  # a rate
    second[2] = dataclasses.replace(first[2], counts=Counts(4, 12, 7))    # its counts
    second[3] = dataclasses.replace(first[3], rationale="another guess")  # any column
    import_sets(engine, [_set("s", second, caveats=("now with a caveat",))])
    versions = _versions(engine)
    # Four new versions, four closed at revision 1; the sixteen others span both revisions.
    assert len(versions) == 24
    assert sorted((p, first_, last) for _, p, _, first_, last, _ in versions
                  if p < 4) == [(p, r, 1 if r == 1 else None) for p in range(4) for r in (1, 2)]
    assert all((first_, last) == (1, None) for _, p, _, first_, last, _ in versions if p >= 4)
    assert _rows(engine, "version_rates") == 6 and _rows(engine, "version_counts") == 2
    assert _keys(engine) == sorted(("s", f"cat{i}", 1) for i in range(20))  # none came or went
    # Each revision reads back as it was imported.
    assert history.load_revision(engine, "s", 1) == _set("s", first)
    assert history.load_revision(engine, "s", 2) == _set("s", second, ("now with a caveat",))
    assert read.load_set(engine, "s") == history.load_revision(engine, "s", 2)
    assert not broken_foreign_keys(engine)


def test_a_moved_or_removed_profile_closes_its_range(engine):
    ps = [_profile(i) for i in range(4)]
    import_sets(engine, [_set("s", ps)])
    # p0 removed: the others move up one file position, which a version keeps.
    import_sets(engine, [_set("s", ps[1:])])
    assert [(p, first_, last) for _, p, _, first_, last, _ in _versions(engine)] == [
        (0, 1, 1), (0, 2, None), (1, 1, 1), (1, 2, None), (2, 1, 1), (2, 2, None), (3, 1, 1)]
    assert history.load_revision(engine, "s", 1) == _set("s", ps)
    assert history.load_revision(engine, "s", 2) == _set("s", ps[1:])
    # Only the removed key's stretch ends; a moved profile's key is still held.
    assert _keys(engine) == [("s", "cat0", 0), ("s", "cat1", 1), ("s", "cat2", 1),
                             ("s", "cat3", 1)]


def test_a_deletion_closes_every_range_and_a_return_opens_new_ones(engine, db_url):
    ps = [_profile(i) for i in range(3)]
    import_sets(engine, [_set("s", ps), _set("t", [_profile(7)])])
    assert run_cli("-d", db_url, "delete", "s").exit_code == 0
    with engine.connect() as conn:
        deleted_at = conn.execute(text(
            "SELECT imported_at FROM revisions WHERE set_name = 's' AND revision = 2")).scalar()
        closed = conn.execute(text(
            "SELECT COUNT(*) FROM profile_versions WHERE set_name = 's' AND last_revision = 1 "
            "AND valid_until = :t"), {"t": deleted_at}).scalar()
    assert closed == 3
    assert [v[3:] for v in _versions(engine) if v[0] == "t"] == [(1, None, 1)]  # untouched
    import_sets(engine, [_set("s", ps)])  # the same content, back as revision 3
    assert [(first_, last) for name, _, _, first_, last, _ in _versions(engine)
            if name == "s"] == [(1, 1), (3, None)] * 3
    assert history.load_revision(engine, "s", 3) == history.load_revision(engine, "s", 1)
    # Each key of s: a stretch the deletion ended and one the return began; t's untouched.
    assert _keys(engine) == [("s", f"cat{i}", o) for i in range(3) for o in (0, 1)] + [
        ("t", "cat7", 1)]
    assert not broken_foreign_keys(engine)


def test_an_unchanged_import_writes_no_version(engine):
    ps = [_profile(i) for i in range(5)]
    import_sets(engine, [_set("s", ps)])
    import_sets(engine, [_set("s", ps)])  # unchanged: no revision at all
    import_sets(engine, [_set("s", ps, caveats=("c",))])  # only the caveats changed
    assert [v[3:] for v in _versions(engine)] == [(1, None, 1)] * 5
    assert _rows(engine, "revisions") == 2


def _times(engine) -> list[datetime]:
    return sorted({r.imported_at for r in history.history(engine)})


def test_as_of_every_time_equals_the_revision_that_held_it(engine):
    """Random edits, removals, additions and deletions over many revisions: at each import's
    time (and between), the versions' one-run and batch answers equal those of the plain
    reading, each set's revision of that time rebuilt and resolved as it was imported."""
    rng = random.Random(7)
    current = {name: [_profile(i, al=2.0) for i in range(12)] for name in ("a", "b")}
    deleted: set[str] = set()
    for _ in range(12):
        for name in current:
            if name in deleted:
                import_sets(engine, [_set(name, current[name])])
                deleted.discard(name)
                continue
            ps = current[name]
            for i in rng.sample(range(len(ps)), 2):
                ps[i] = dataclasses.replace(ps[i], acceptance_length=rng.choice([1.5, 2.0, 3.0]))
            if rng.random() < 0.3:
                ps.pop(rng.randrange(len(ps)))
            if rng.random() < 0.3:
                ps.append(_profile(rng.randrange(12, 20), al=2.5))
            current[name] = list({p.key: p for p in ps}.values())
            import_sets(engine, [_set(name, current[name])])
        if rng.random() < 0.3:
            history.delete_sets(engine, ["b"])
            deleted.add("b")
    times = _times(engine)
    moments = sorted({*times, *(a + (b - a) / 2 for a, b in zip(times, times[1:])),
                      datetime(2020, 1, 1, tzinfo=UTC)})
    keys = sorted({(f"m{i % 3}", "on" if i % 2 else "off", f"cat{i}") for i in range(20)})
    checked = refused = 0
    for at in moments:
        held = {h.set.name: h for h in history.held(engine, as_of=at)} if at >= times[0] else {}
        requests = [Request(model=m, method="mtp", k=3, thinking=t, category=c, as_of=at,
                            sets=(name,))
                    for name in ("a", "b") for m, t, c in keys]
        batch = resolve_many(engine, requests)
        for request, answer in zip(requests, batch):
            (name,) = request.sets
            stored = {p.key: p for p in held[name].set.profiles} if name in held else {}
            want = stored.get((request.model, "mtp", 3, request.thinking, request.category))
            try:
                one = resolve(engine, request)
            except ResolutionRefused as exc:
                assert want is None, (at, request)
                assert answer == exc.refusal
                refused += 1
                if exc.refusal.reason != "no_match":  # the set was not there then
                    assert name not in held, exc.refusal
                    continue
                # What the refusal says was stored then: the revision's own keys.
                ks = {p.num_spec_tokens for p in stored.values() if p.model == request.model}
                said = exc.refusal.message.rsplit("; ", 3)[-3:]
                if ks:
                    modes = sorted({p.thinking for p in stored.values()
                                    if p.model == request.model})
                    cats = sorted({p.category for p in stored.values()
                                   if p.model == request.model})
                    assert said == [f"stored for {request.model}/mtp there: K 3",
                                    f"thinking {', '.join(modes)}",
                                    f"categories {', '.join(cats)}"], exc.refusal.message
                else:
                    assert exc.refusal.message.endswith(
                        f"nothing is stored for {request.model}/mtp there")
                continue
            assert want is not None, (at, request)
            assert (one.acceptance_length, one.revision) == (
                want.acceptance_length, held[name].revision)
            assert answer == one
            checked += 1
    assert checked > 100 and refused > 20


def test_versions_copied_in_the_database_in_small_statements(engine, monkeypatch):
    """The new versions, their rates, counts and key stretches are copied from the current
    tables in statements of at most CHUNK bound values: with CHUNK at 3, sets new, wholly and
    partly changed (some beyond one statement) still read back as imported, and each
    import's versions are numbered in set, then position, order (as when sent row by row)."""
    monkeypatch.setattr(history.record, "CHUNK", 3)

    def sets(al: dict[str, dict[int, float]]) -> list[ProfileSet]:
        return [_set(name, [_profile(i, al=al.get(name, {}).get(i, 2.5),
                                     per_position_rates=(0.8, 0.5, 0.2) if i % 4 == 1 else None,
                                     counts=Counts(4, 12, 6) if i % 4 == 2 else None)
                            for i in range(9)]) for name in ("a", "b", "c", "d")]

    rounds = [{}, {"a": {0: 3.0}, "b": dict.fromkeys(range(9), 2.0),
                   "c": dict.fromkeys((0, 2, 3, 5, 8), 3.0)},
              {"a": {0: 3.0, 1: 3.0}, "b": dict.fromkeys(range(9), 2.0),
               "c": dict.fromkeys((0, 2, 3, 5, 8), 3.0), "d": {4: 3.5, 6: 1.5}}]
    before: dict[str, ProfileSet] = {}
    new = 0
    for al in rounds:
        import_sets(engine, sets(al))
        for s in sets(al):
            latest = history.history(engine, s.name)[0].revision
            assert history.load_revision(engine, s.name, latest) == s
            old = before.get(s.name)
            new += sum(1 for i, p in enumerate(s.profiles) if old is None or old.profiles[i] != p)
            before[s.name] = s
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id, set_name, position, valid_from "
                                 "FROM profile_versions ORDER BY id")).all()
    for moment in {at for *_, at in rows}:
        started = [(name, pos) for _, name, pos, at in rows if at == moment]
        assert started == sorted(started)
    assert len(rows) == new == 36 + 15 + 3
    with engine.connect() as conn:
        with_rates = conn.execute(text(
            "SELECT COUNT(DISTINCT profile_id) FROM version_rates")).scalar()
        with_counts = conn.execute(text("SELECT COUNT(*) FROM version_counts")).scalar()
    assert (with_rates, with_counts) == (
        sum(1 for _, _, pos, _ in rows if pos % 4 == 1),
        sum(1 for _, _, pos, _ in rows if pos % 4 == 2))
    assert _keys(engine) == sorted((n, f"cat{i}", 1) for n in "abcd" for i in range(9))
    assert not broken_foreign_keys(engine)
