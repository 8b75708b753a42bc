"""Validated profile sets into the database, all or nothing.

:func:`import_paths` validates every file first and refuses the lot when any is invalid, keeping
each valid set packed until the write (:mod:`registry_db.importing.held`: memory bounded by the
largest file, not the folder); :func:`import_sets` writes already-validated
:class:`~registry_db.model.ProfileSet` objects. Either writes in ONE write transaction
(:func:`registry_db.store.run_write`), unpacking one set at a time. Inside that transaction,
after the writers' lock, each set is classified ``added``, ``updated`` (its old rows are
replaced) or ``unchanged`` (same content hash: not rewritten), so concurrent importers agree
with some serial order.
Each added or updated set is also recorded as a new revision of itself
(:mod:`registry_db.history`), in the same transaction; a value with counts that moves by
more than 3 combined standard errors draws a warning (:mod:`registry_db.history.drift`);
``prune`` deletes the stored sets the import does not declare, as ``deleted`` revisions.
Provenances are deduplicated by content hash across profiles and sets, and kept while any
revision cites them. Rows go in with Core ``executemany`` (``COPY`` on PostgreSQL), never one
statement per row, and ids are read back per set, so a large import costs a few statements a
file.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from pathlib import Path
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, select, update
from sqlalchemy.engine import Connection, Engine

from registry_db import history
from registry_db.errors import Finding, InvalidInput
from registry_db.history.drift import drift_warnings
from registry_db.importing import git, unchanged
from registry_db.importing.held import Held, KeyCodes
from registry_db.importing.unchanged import Known
from registry_db.model import (
    GitOrigin,
    ImportStatus,
    ProfileSet,
    profile_label,
)
from registry_db.store import read
from registry_db.store.bulk import (
    CHUNK,
    chunks,
    counts_row,
    insert_many,
    profile_ids,
    provenance_ids,
)
from registry_db.store.engine import run_write
from registry_db.store.schema import (
    profile_counts,
    profile_rates,
    profile_sets,
    profiles,
    set_caveats,
)

#: Shared keys named in an overlap warning; the rest are counted.
OVERLAP_SHOWN = 3

#: Provenance row ids an import keeps by content hash between sets (about 200 bytes each).
MAX_PROVENANCES_KEPT = 100_000

#: ``progress(phase, done, total)``, called after each set is written (phase ``write``).
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class SetResult:
    """What the import did (or, in a dry run, would do) with one set."""

    name: str
    file: str | None
    status: str
    profiles: int
    #: The file the set was imported from before, when it now comes from another one.
    moved_from: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The contract's per-set object, plus ``moved_from`` for a set that moved."""
        out: dict[str, Any] = {"name": self.name, "file": self.file, "status": self.status,
                               "profiles": self.profiles}
        if self.moved_from is not None:
            out["moved_from"] = self.moved_from
        return out


@dataclass(frozen=True)
class ImportReport:
    """The outcome of one import: a result per set, in input order, and the warnings."""

    sets: tuple[SetResult, ...]
    warnings: tuple[Finding, ...] = ()
    dry_run: bool = False
    #: For a dry run: each set that would be updated, with its per-profile changes.
    changes: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def count(self, status: str) -> int:
        """How many sets got ``status``."""
        return sum(1 for s in self.sets if s.status == status)

    def to_json(self) -> dict[str, Any]:
        """The contract's ``{"sets": [...]}`` object (warnings are reported apart)."""
        return {"sets": [s.to_json() for s in self.sets]}


# --- entry points --------------------------------------------------------------------------------

def load_paths(paths: Sequence[str | Path], progress: Progress | None = None,
               ) -> tuple[list[ProfileSet], list[Finding]]:
    """Load and validate every file under ``paths``: the sets and the warnings.

    Raises :class:`~registry_db.errors.InvalidInput` carrying every finding when any file has
    an error, so nothing is written for a partly invalid folder.
    """
    from registry_db.sources import get_source

    sets, findings = get_source("profile-set").read(list(paths), progress=progress)
    if any(f.is_error for f in findings):
        raise InvalidInput(findings)
    return list(sets), list(findings)


def import_paths(engine: Engine, paths: Sequence[str | Path], *, dry_run: bool = False,
                 progress: Progress | None = None, prune: bool = False,
                 message: str | None = None) -> ImportReport:
    """Validate every file under ``paths``, then import all of them in one transaction.

    Raises :class:`~registry_db.errors.InvalidInput` before the database is written when any
    file has an error. Warnings (the validator's and the importer's) come back on the report.
    A file unchanged since it was last imported is not read (:func:`load_skipping`).
    """
    def known(hashes: Mapping[str, str]) -> Mapping[str, Known]:
        with engine.connect() as conn:
            return unchanged.lookup(conn, hashes)

    loaded = load_skipping(paths, known)
    report = import_loaded(engine, loaded, dry_run=dry_run, progress=progress, prune=prune,
                           message=message)
    return ImportReport(report.sets, loaded.warnings + report.warnings, report.dry_run,
                        report.changes)


def import_sets(engine: Engine, sets: Sequence[ProfileSet], *, dry_run: bool = False,
                progress: Progress | None = None, prune: bool = False,
                message: str | None = None, from_git: bool = True) -> ImportReport:
    """Write ``sets`` (already valid) in one transaction; ``dry_run`` only reports.

    A set whose name is in the database is replaced by the given content, unless its content
    hash is the same (``unchanged``, not rewritten). Every added or updated set gets a new
    revision carrying ``message``; with ``prune``, every stored set that ``sets`` do not name
    is deleted (status ``deleted``, a revision too). Two sets with one name raise
    :class:`~registry_db.errors.InvalidInput`. A profile key held by two sets (given ones, or a
    given one and one already stored) is allowed and reported as a warning. A dry run also
    reports each updated set's per-profile changes. Each revision records where its file is in
    git (:mod:`registry_db.importing.git`) unless ``from_git`` is false (content that did not
    come from its file now, as a restore's).
    """
    table = KeyCodes()
    return _import_sets(engine, [Held.of(s, table, pack=False) for s in sets], dry_run,
                        progress, prune, message, from_git=from_git)


def _import_sets(engine: Engine, given: Sequence[Held | Known], dry_run: bool,
                 progress: Progress | None, prune: bool, message: str | None,
                 files: Mapping[str, tuple[str, tuple[Finding, ...]]] | None = None,
                 from_git: bool = True) -> ImportReport:
    _refuse_duplicate_names(given)
    sets = [s for s in given if isinstance(s, Held)]
    known = [s for s in given if isinstance(s, Known)]
    hashes = {s.name: s.content_hash for s in sets}
    # Read before the writers' lock is taken: git's time is not every other writer's wait.
    origins = {} if dry_run or not from_git else git.origins(
        s.file for s in sets if s.file is not None)

    def work(conn: Connection) -> ImportReport:
        stored = _stored_sets(conn, [s.name for s in given])
        if gone_stale := unchanged.stale(stored, known):
            raise _Stale(gone_stale)
        moved = _moved_from(conn, [s for s in given if s.name in stored])
        results = []
        for s in given:
            old = stored.get(s.name)
            status = (ImportStatus.ADDED if old is None else ImportStatus.UNCHANGED
                      if old[1] == s.content_hash else ImportStatus.UPDATED)
            results.append(SetResult(s.name, s.file, status, s.profiles, moved.get(s.name)))
        pruned = _undeclared(conn, given) if prune else []
        # Prune first, so that the overlap warnings do not name sets about to go. The time is
        # the database's, taken under the writers' lock (history.revision_time).
        now = history.revision_time(conn)
        if pruned and not dry_run:
            gone = history.delete_in(conn, pruned, message, now)
            results += [SetResult(d.name, d.file, ImportStatus.DELETED, d.profiles)
                        for d in gone]
        elif pruned:
            summaries = {s.name: s for s in read.list_sets(conn) if s.name in set(pruned)}
            results += [SetResult(n, summaries[n].file, ImportStatus.DELETED,
                                  summaries[n].profiles) for n in pruned]
        statuses = {r.name: r.status for r in results}
        updated = [s for s in sets if statuses[s.name] == ImportStatus.UPDATED]
        changed_names = {n for n, st in statuses.items()
                         if st in (ImportStatus.ADDED, ImportStatus.UPDATED)}
        warnings = (_overlap_warnings(conn, sets, ignore=pruned, known=known,
                                      changed=changed_names)
                    + [w for s in updated if s.counts
                       for w in drift_warnings(conn, [s.set()])])
        changes: list[tuple[str, tuple]] = []
        if dry_run:
            # One set at a time, old and new: a dry run holds no more than an import.
            for s in updated:
                old_set, = read.load_sets(conn, [s.name])
                changes.append((s.name, tuple(history.diff_sets(old_set, s.set()))))
        else:
            changed = [(s, hashes[s.name], statuses[s.name]) for s in sets
                       if statuses[s.name] != ImportStatus.UNCHANGED]
            _write(conn, changed, stored, progress, message, now, origins)
            _rehome_unchanged(conn, [r for r in results
                                     if r.status == ImportStatus.UNCHANGED
                                     and r.moved_from is not None])
            _record_files(conn, sets, hashes, files or {})
        return ImportReport(tuple(results), tuple(warnings), dry_run, tuple(changes))

    if dry_run:
        with engine.connect() as conn, conn.begin():
            return work(conn)
    return run_write(engine, work)


def preview_sets(sets: Sequence[ProfileSet | Held]) -> ImportReport:
    """What a dry run reports against an empty database (every set ``added``), with no database.

    ``registry import --dry-run`` uses it when the SQLite file does not exist yet, so that a
    dry run does not create one.
    """
    table = KeyCodes()
    held = [s if isinstance(s, Held) else Held.of(s, table, pack=False) for s in sets]
    _refuse_duplicate_names(held)
    results = tuple(SetResult(s.name, s.file, ImportStatus.ADDED, s.profiles) for s in held)
    return ImportReport(results, tuple(_overlap_warnings(None, held)), dry_run=True)


# --- checks --------------------------------------------------------------------------------------

def _refuse_duplicate_names(sets: Sequence[Held | Known]) -> None:
    first: dict[str, Held | Known] = {}
    findings = []
    for s in sets:
        if s.name in first:
            findings.append(Finding(
                s.file or "<input>", 0, 0, "name", "duplicate_set_name",
                f"set {s.name!r} is also declared by {first[s.name].file or '<input>'}; "
                "a set name may be declared by one file only"))
        else:
            first[s.name] = s
    if findings:
        raise InvalidInput(findings)


def _undeclared(conn: Connection, sets: Sequence[Held | Known]) -> list[str]:
    """The stored sets that none of ``sets`` declares, by name (what ``--prune`` deletes)."""
    declared = {s.name for s in sets}
    return [n for n in conn.execute(select(profile_sets.c.name)
                                    .order_by(profile_sets.c.name)).scalars()
            if n not in declared]


def _overlap_warnings(conn: Connection | None, sets: Sequence[Held],
                      ignore: Sequence[str] = (), known: Sequence[Known] = (),
                      changed: set[str] | None = None) -> list[Finding]:
    """One warning per pair of sets that share profile keys: how many, and the first few.
    With ``changed``, only pairs of which this import adds or updates a set: an import that
    changed nothing repeats no warning (``registry conflicts`` lists them all).

    A pair is two incoming sets, or an incoming one and a stored one that this import does not
    replace; the resolver refuses a shared key while both sets count as the registry. One line
    per pair, not per key: re-importing fifty sets that share hundreds of keys stays readable.
    A ``known`` set (a file skipped unread) holds the keys stored for it.
    """
    # By key code (one int a key, KeyCodes): the holder's name, a list from a second holder on.
    holders: dict[int, str | list[str]] = {}
    tables = {id(s.table): s.table for s in sets}
    table = next(iter(tables.values())) if len(tables) == 1 else KeyCodes()
    for s in sets:
        name = s.name
        codes = s.keys if s.table is table else [table.code(s.table.key(c)) for c in s.keys]
        for code in codes:
            got = holders.setdefault(code, name)
            if got is not name:
                if isinstance(got, str):
                    holders[code] = [got, name]
                else:
                    got.append(name)
    parsed = {s.name for s in sets}
    incoming: dict[str, Held | Known] = {s.name: s for s in sets}
    incoming.update((k.name, k) for k in known)
    gone = set(ignore)  # sets this import deletes (--prune)

    def hold(name: str, code: int) -> None:
        got = holders.get(code)
        if got is None:
            holders[code] = name
        elif isinstance(got, str):
            if got != name:
                holders[code] = [got, name]
        elif name not in got:
            got.append(name)

    models = table.models() if conn is not None and holders else []
    p, ps = profiles.c, profile_sets.c
    for chunk in chunks(models):
        query = (select(ps.name, p.model, p.speculative_method, p.num_spec_tokens, p.thinking,
                        p.category)
                 .join_from(profiles, profile_sets, p.set_id == ps.id)
                 .where(p.model.in_(chunk)))
        if len(parsed) <= CHUNK:
            # Re-importing a large registry should not read every row it is about to replace.
            query = query.where(ps.name.not_in(sorted(parsed)))
        assert conn is not None
        for name, *cols in conn.execute(query):
            # Only the keys an incoming set holds (a stored set holds each key once).
            found = table.known(tuple(cols))
            if found is not None and found in holders and name not in parsed and name not in gone:
                hold(name, found)
    if known and conn is not None:
        for name, key in _stored_shared_keys(conn):
            if name not in parsed and name not in gone:
                hold(name, table.code(key))
    shared: dict[tuple[str, str], list[str]] = defaultdict(list)
    for code, names in holders.items():
        if isinstance(names, str):  # most keys: one holder, no pair
            continue
        label = None
        for pair in combinations(sorted(set(names)), 2):
            # Two stored sets that share a key are not this import's doing.
            if (pair[0] in incoming or pair[1] in incoming) and (
                    changed is None or pair[0] in changed or pair[1] in changed):
                label = label or profile_label(*table.key(code))
                shared[pair].append(label)
    warnings = []
    for (a, b), labels in shared.items():
        first = incoming.get(a) or incoming[b]
        labels.sort()
        shown = ", ".join(labels[:OVERLAP_SHOWN]) + (
            f" and {len(labels) - OVERLAP_SHOWN} more" if len(labels) > OVERLAP_SHOWN else "")
        warnings.append(Finding(
            first.file or "<input>", 0, 0, "profiles", "profile_key_overlap",
            f"sets {a!r} and {b!r} share {len(labels)} profile key(s): {shown}; the resolver "
            "refuses these keys while both sets are in use (see `registry conflicts`)",
            severity="warning"))
    return sorted(warnings, key=lambda f: (f.file, f.message))


def _moved_from(conn: Connection, sets: Sequence[Held | Known]) -> dict[str, str]:
    """``name -> old file`` for the stored sets that now come from another file."""
    files: dict[str, str | None] = {}
    for chunk in chunks(sorted(s.name for s in sets)):
        files.update(conn.execute(select(profile_sets.c.name, profile_sets.c.source_file)
                                  .where(profile_sets.c.name.in_(chunk))).all())
    return {s.name: old for s in sets
            if (old := files.get(s.name)) is not None and s.file is not None
            and not _same_file(old, s.file)}


def _same_file(a: str, b: str) -> bool:
    # Paths are stored as the importer was given them: `seed/x.yaml` and `./seed/x.yaml`, or a
    # relative and an absolute spelling of one file, are the same file, not a move.
    if os.path.normpath(a) == os.path.normpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _rehome_unchanged(conn: Connection, moved: Sequence[SetResult]) -> None:
    """Point an unchanged set that moved at its new file (its rows stay as they are)."""
    if moved:
        conn.execute(update(profile_sets).where(profile_sets.c.name == bindparam("n"))
                     .values(source_file=bindparam("f")),
                     [{"n": r.name, "f": r.file} for r in moved])


# --- writing -------------------------------------------------------------------------------------

def _stored_sets(conn: Connection, names: Sequence[str]) -> dict[str, tuple[int, str]]:
    """``name -> (id, content_hash)`` for the names already in the database."""
    out: dict[str, tuple[int, str]] = {}
    for chunk in chunks(sorted(set(names))):
        rows = conn.execute(select(profile_sets.c.name, profile_sets.c.id,
                                   profile_sets.c.content_hash)
                            .where(profile_sets.c.name.in_(chunk)))
        out.update((n, (i, h)) for n, i, h in rows)
    return out


def _write(conn: Connection, changed: Sequence[tuple[Held, str, str]],
           stored: dict[str, tuple[int, str]], progress: Progress | None,
           message: str | None, now: datetime,
           origins: Mapping[str, GitOrigin] | None = None) -> None:
    if not changed:
        return
    # Numbered under the writers' lock, so concurrent importers never share a number.
    numbers = history.next_revisions(conn, [s.name for s, _, _ in changed])
    replaced = [stored[s.name][0] for s, _, _ in changed if s.name in stored]
    for chunk in chunks(replaced):
        # profile_rates go with their profiles (ON DELETE CASCADE).
        conn.execute(delete(profiles).where(profiles.c.set_id.in_(chunk)))
        conn.execute(delete(set_caveats).where(set_caveats.c.set_id.in_(chunk)))
    if replaced:
        conn.execute(
            update(profile_sets).where(profile_sets.c.id == bindparam("set_id"))
            .values(content_hash=bindparam("h"), source_file=bindparam("f"),
                    imported_at=bindparam("t"), revision=bindparam("r")),
            [{"set_id": stored[s.name][0], "h": h, "f": s.file, "t": now, "r": numbers[s.name]}
             for s, h, _ in changed if s.name in stored])
    added = [{"name": s.name, "source_file": s.file, "content_hash": h, "imported_at": now,
              "revision": numbers[s.name]}
             for s, h, _ in changed if s.name not in stored]
    if added:
        # Plain executemany, then read the ids back: RETURNING in parameter order would make
        # SQLite run one statement per row.
        insert_many(conn, profile_sets, added)
    set_ids = {n: i for n, (i, _) in _stored_sets(conn, [s.name for s, _, _ in changed]).items()}

    total = len(changed)
    # Provenance row ids by content hash, found or inserted in this transaction.
    prov_rows: dict[str, int] = {}

    def prov_ids(s: ProfileSet) -> dict[int, int]:
        if len(prov_rows) > MAX_PROVENANCES_KEPT:  # bounded: past it, look them up again
            prov_rows.clear()
        return provenance_ids(conn, [s], prov_rows)

    for done, (held, _, _) in enumerate(changed, 1):
        # One set unpacked at a time; its provenances are looked up (and the new ones
        # inserted) as it is written, in the order one lookup of every set would give them.
        s = held.set()
        _write_set(conn, s, set_ids[s.name], prov_ids(s))
        del s
        if progress:
            progress("write", done, total)
    by_name = {held.name: held for held, _, _ in changed}

    def content(name: str) -> tuple[ProfileSet, dict[int, int]]:
        s = by_name[name].set()
        return s, prov_ids(s)

    # Replaced provenances stay: the earlier revisions cite them.
    history.record_current(conn, [(s.name, numbers[s.name], str(status), s.file, h, s.profiles,
                                   s.rates, s.counts)
                                  for s, h, status in changed], content, message, now, origins)


#: The current profiles' columns in the order :func:`_write_set` gives them.
PROFILE_COLUMNS = ("set_id", "position", "model", "speculative_method", "num_spec_tokens",
                   "thinking", "category", "acceptance_length", "method", "provenance_id",
                   "rationale", "copied_from")
RATE_COLUMNS = ("profile_id", "position", "rate")


def _write_set(conn: Connection, s: ProfileSet, set_id: int, prov_ids: dict[int, int]) -> None:
    if s.caveats:
        insert_many(conn, set_caveats, [
            {"set_id": set_id, "position": i, "text": c} for i, c in enumerate(s.caveats)])
    insert_many(conn, profiles, [
        (set_id, i, p.model, p.speculative_method, p.num_spec_tokens, p.thinking, p.category,
         float(p.acceptance_length), p.method,
         None if p.provenance is None else prov_ids[id(p.provenance)], p.rationale,
         p.copied_from)
        for i, p in enumerate(s.profiles)], columns=PROFILE_COLUMNS)
    with_rates = any(p.per_position_rates for p in s.profiles)
    with_counts = any(p.counts is not None for p in s.profiles)
    if not (with_rates or with_counts):
        return
    ids = profile_ids(conn, set_id)
    if with_rates:
        insert_many(conn, profile_rates, [
            (ids[i], k, float(r)) for i, p in enumerate(s.profiles) if p.per_position_rates
            for k, r in enumerate(p.per_position_rates, 1)], columns=RATE_COLUMNS)
    if with_counts:
        insert_many(conn, profile_counts, [counts_row(ids[i], p) for i, p in enumerate(s.profiles)
                                           if p.counts is not None])


# --- unchanged files -----------------------------------------------------------------------------

#: ``known(hashes) -> {path: Known}``: which files of ``{path: bytes hash}`` need no reading.
Lookup = Callable[[Mapping[str, str]], Mapping[str, Known]]


@dataclass(frozen=True)
class Loaded:
    """The files of an import, read or skipped: what :func:`import_loaded` writes."""

    paths: tuple[str | Path, ...]
    #: In file order: a set read from its file (held compressed), or a file skipped unread
    #: (unchanged).
    sets: tuple[Held | Known, ...]
    warnings: tuple[Finding, ...]
    #: Each file read: (SHA-256 of the very bytes parsed, its findings).
    files: Mapping[str, tuple[str, tuple[Finding, ...]]]
    #: Whether folders were read with their subfolders (``import -r``).
    recursive: bool = False


def load_skipping(paths: Sequence[str | Path], known: Lookup,
                  progress: Progress | None = None, *, recursive: bool = False) -> Loaded:
    """:func:`load_paths`, except that a file ``known`` says is stored as its bytes give it is
    not parsed. Anything out of the ordinary (an error, a set name two files declare) reads
    every file, so that the findings are exactly :func:`load_paths`' ones."""
    from registry_db.errors import cap_findings, sort_findings
    from registry_db.sources.profile_set import check_paths, collect_files
    from registry_db.yaml import load as loader

    collected: list[Finding] = []
    files = collect_files(paths, collected, recursive=recursive)
    before = {} if any(f.is_error for f in collected) else unchanged.file_hashes(
        files, loader.MAX_FILE_BYTES)
    skip = dict(known(before)) if before else {}
    to_read = [f for f in files if str(f) not in skip]
    parsed_hashes: dict[str, str] = {}  # of the very bytes parsed: an edit between reads is kept
    if skip:
        sets, findings = (check_paths(to_read, progress, parsed_hashes, keep=_holder())
                          if to_read else ([], []))
        names = [s.name for s in sets] + [k.name for k in skip.values()]
        plain = any(f.is_error for f in findings) or len(set(names)) < len(names)
    if not skip or plain:
        skip, to_read, parsed_hashes = {}, files, {}
        sets, findings = check_paths(paths, progress, parsed_hashes, recursive=recursive,
                                     keep=_holder())
        collected = []  # check_paths collects them again
    if any(f.is_error for f in findings):
        raise InvalidInput(findings)
    by_file: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_file[f.file].append(f)
    # Only regular files within the limit (``before`` has those) are ever looked up again.
    held = {p: (h, tuple(by_file[p])) for p, h in parsed_hashes.items() if p in before}
    parsed: dict[str | None, Held | Known] = {s.file: s for s in sets}
    ordered = [skip.get(str(f)) or parsed.get(str(f)) for f in files]
    replayed = [*collected, *findings, *(x for k in skip.values() for x in k.findings)]
    return Loaded(tuple(paths), tuple(s for s in ordered if s is not None),
                  tuple(cap_findings(sort_findings(replayed)) if skip else findings), held,
                  recursive)


def _holder() -> Callable[[ProfileSet], Held]:
    """What :func:`load_skipping` keeps of each set it reads: the set held compressed."""
    table = KeyCodes()
    return lambda s: Held.of(s, table)


def import_loaded(engine: Engine, loaded: Loaded, *, dry_run: bool = False,
                  progress: Progress | None = None, prune: bool = False,
                  message: str | None = None) -> ImportReport:
    """:func:`import_sets` of what :func:`load_skipping` found, remembering what each file read
    held; a skipped file whose set another writer changed since is read after all."""
    try:
        return _import_sets(engine, loaded.sets, dry_run, progress, prune, message,
                            loaded.files)
    except _Stale:
        again = read_all(loaded, progress)
        return _import_sets(engine, again.sets, dry_run, progress, prune, message, again.files)


def preview_loaded(loaded: Loaded) -> ImportReport:
    """:func:`preview_sets` of every file of ``loaded`` (a skipped one is read after all)."""
    return preview_sets([s for s in read_all(loaded).sets if isinstance(s, Held)])


def read_all(loaded: Loaded, progress: Progress | None = None) -> Loaded:
    """``loaded`` with every file read, none skipped (itself when none was)."""
    if not any(isinstance(s, Known) for s in loaded.sets):
        return loaded
    return load_skipping(loaded.paths, lambda _hashes: {}, progress,
                         recursive=loaded.recursive)


class _Stale(Exception):
    """Skipped files whose set no longer has their content (found under the writers' lock)."""


def _record_files(conn: Connection, sets: Sequence[Held], hashes: Mapping[str, str],
                  files: Mapping[str, tuple[str, tuple[Finding, ...]]]) -> None:
    unchanged.record(conn, [(s.file, files[s.file][0], s.name, hashes[s.name], s.profiles,
                             files[s.file][1]) for s in sets
                            if s.file is not None and s.file in files])


def _stored_shared_keys(conn: Connection) -> list[tuple[str, tuple]]:
    """``(set name, key)`` for every stored key that two or more sets hold (over the key index)."""
    p, ps = profiles.c, profile_sets.c
    key = (p.model, p.speculative_method, p.num_spec_tokens, p.thinking, p.category)
    shared = select(*key).group_by(*key).having(func.count() > 1).subquery()
    rows = conn.execute(select(ps.name, *key)
                        .join_from(profiles, profile_sets, p.set_id == ps.id)
                        .join(shared, and_(*(c == shared.c[c.name] for c in key))))
    return [(name, tuple(cols)) for name, *cols in rows]
