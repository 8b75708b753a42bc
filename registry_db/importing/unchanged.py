"""Unchanged files, skipped before they are parsed: what each imported file's bytes held.

After an import writes (or finds unchanged) a file's set, ``import_files`` keeps the file's
path, the SHA-256 of its bytes, the version of the reading rules (:func:`rules_version`) and
what those bytes gave: the set's name, content hash, profile count and the file's warnings. A
later import hashes each file first; a file whose path, bytes and rules match a row is not
parsed while the stored set still has that content hash, since reading it would find it
``unchanged`` (:func:`lookup`). The writer checks that again under the writers' lock
(:func:`stale`), so a set that another import changed in between is read and written as usual.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from registry_db.errors import MAX_FINDINGS_PER_FILE, Finding
from registry_db.store.bulk import chunks, insert_many
from registry_db.store.schema import import_files, profile_sets

__all__ = ["Known", "RULES", "file_hashes", "lookup", "record", "rules_version", "stale"]

#: Raise it when the reading rules change in a way the package's own source does not show
#: (a dependency's behaviour); any edit of the rule modules changes :func:`rules_version` alone.
RULES = 1

#: The modules whose rules decide what a file's bytes give (load, checks, normalisation, hash).
_RULE_SOURCES = ("yaml/*.py", "inputs/*.py", "sources/profile_set.py", "model.py", "errors.py")

#: A path longer than this is not recorded (PostgreSQL's index entries are bounded); it is read.
MAX_PATH_BYTES = 1024


@dataclass(frozen=True)
class Known:
    """A file skipped unread: its set is stored exactly as its bytes give it."""

    name: str
    file: str
    content_hash: str
    profiles: int
    findings: tuple[Finding, ...] = ()


@functools.lru_cache(maxsize=1)  # the rule modules' bytes do not change within one process
def rules_version() -> str:
    """SHA-256 of :data:`RULES`, PyYAML's version and the source of every rule module."""
    import yaml

    return sources_digest(Path(__file__).resolve().parent.parent, _RULE_SOURCES,
                          f"{RULES}\0{yaml.__version__}")


def sources_digest(root: Path, patterns: Sequence[str], salt: str) -> str:
    """SHA-256 of ``salt`` and every file under ``root`` matching ``patterns``, names included."""
    digest = hashlib.sha256(f"{salt}\0".encode())
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            digest.update(f"{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def file_hashes(files: Iterable[Path], max_bytes: int) -> dict[str, str]:
    """``str(path) -> SHA-256 of its bytes`` for each regular file of at most ``max_bytes``;
    a file that cannot be read, is too large or is no regular file is left out (it is parsed,
    and the parser says what is wrong with it)."""
    out: dict[str, str] = {}
    for path in files:
        try:
            with open(path, "rb", buffering=0) as fh:
                info = os.fstat(fh.fileno())
                if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
                    continue
                out[str(path)] = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            continue
    return out


def lookup(conn: Connection, hashes: Mapping[str, str]) -> dict[str, Known]:
    """The files of ``hashes`` that need no reading: same path, bytes and rules as recorded,
    and their set still stored with the content hash those bytes gave."""
    rules = rules_version()
    f, s = import_files.c, profile_sets.c
    out: dict[str, Known] = {}
    for chunk in chunks(sorted(hashes)):
        rows = conn.execute(
            select(f.path, f.bytes_hash, f.rules, f.set_name, f.content_hash, f.profiles,
                   f.findings)
            .join_from(import_files, profile_sets, (s.name == f.set_name)
                       & (s.content_hash == f.content_hash))
            .where(f.path.in_(chunk)))
        for path, bytes_hash, row_rules, name, content_hash, count, findings in rows:
            if bytes_hash == hashes[path] and row_rules == rules:
                out[path] = Known(name, path, content_hash, count, _findings(findings))
    return out


def stale(stored: Mapping[str, tuple[int, str]], known: Sequence[Known]) -> list[Known]:
    """The skipped files whose set no longer has their content (``stored``: name -> (id,
    content hash), read under the writers' lock): those files must be read after all."""
    return [k for k in known if (row := stored.get(k.name)) is None or row[1] != k.content_hash]


def record(conn: Connection, rows: Sequence[tuple[str, str, str, str, int, Sequence[Finding]]],
           ) -> None:
    """Remember what each file held: ``(path, bytes hash, set name, content hash, profiles,
    the file's findings)``. One row per path and per set: a set's older file is forgotten."""
    rules = rules_version()
    kept = [r for r in rows if _recordable(r[0], r[5])]
    if not kept:
        return
    for chunk in chunks([r[0] for r in kept]):
        conn.execute(delete(import_files).where(import_files.c.path.in_(chunk)))
    for chunk in chunks(sorted({r[2] for r in kept})):
        conn.execute(delete(import_files).where(import_files.c.set_name.in_(chunk)))
    insert_many(conn, import_files, [{
        "path": path, "bytes_hash": bytes_hash, "rules": rules, "set_name": name,
        "content_hash": content_hash, "profiles": count,
        "findings": json.dumps([asdict(x) for x in found]) if found else None,
    } for path, bytes_hash, name, content_hash, count, found in kept])


def _recordable(path: str, findings: Sequence[Finding]) -> bool:
    # A capped list of findings would be capped again when replayed; such a file is read.
    if len(findings) >= MAX_FINDINGS_PER_FILE:
        return False
    try:
        return len(path.encode("utf-8")) <= MAX_PATH_BYTES
    except UnicodeEncodeError:  # a file name that is not UTF-8: stored nowhere as text
        return False


def _findings(text: str | None) -> tuple[Finding, ...]:
    return tuple(Finding(**x) for x in json.loads(text)) if text else ()
