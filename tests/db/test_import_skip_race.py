"""An edit (and its revert) while an import reads a file: the skip records the bytes it parsed.

``load_skipping`` hashes each file to decide what to skip, then parses the files it reads. The
hash recorded for a parsed file must be the hash of exactly the bytes parsed: a file that held
A when first hashed, B when parsed and A again afterwards is recorded as B's bytes, so the next
import of A reads it (and stores A) instead of saying ``unchanged`` for good.

The edits are injected deterministically between the import's own reads (by wrapping
``unchanged.file_hashes``, the hash the skip decides on), through the real import code.
"""

from __future__ import annotations

import hashlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from registry_db.importing import unchanged
from registry_db.importing import write as importer
from registry_db.store.schema import import_files, profile_sets
from tests.helpers import set_yaml

#: Three contents of one set, each with its own meaning.
VERSIONS = [set_yaml("raced", 2, al=al) for al in (2.5, 3.0, 3.5)]


def _content_hashes(tmp_path) -> list[str]:
    out = []
    for i, text in enumerate(VERSIONS):
        path = tmp_path / f"v{i}" / "raced.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        sets, _ = importer.load_paths([path])
        out.append(sets[0].content_hash())
    return out


def _import(engine, paths) -> None:
    def known(hashes):
        with engine.connect() as conn:
            return unchanged.lookup(conn, hashes)

    importer.import_loaded(engine, importer.load_skipping(paths, known))


def _edited_between_reads(monkeypatch, path, mid: str, end: str) -> None:
    """The skip's first hash sees the file as it is, then it holds ``mid`` (so the parse reads
    ``mid``); any later hash of it sees ``end`` (the revert, as early as it can be)."""
    real = unchanged.file_hashes
    calls = {"n": 0}

    def racing(files, max_bytes):
        calls["n"] += 1
        if calls["n"] > 1:
            path.write_text(end)
        out = real(files, max_bytes)
        if calls["n"] == 1:
            path.write_text(mid)
        return out

    monkeypatch.setattr(unchanged, "file_hashes", racing)


def _stored(engine) -> tuple[str | None, list[tuple[str, str]]]:
    with engine.connect() as conn:
        stored = conn.execute(select(profile_sets.c.content_hash)
                              .where(profile_sets.c.name == "raced")).scalar()
        recorded = [tuple(r) for r in conn.execute(
            select(import_files.c.bytes_hash, import_files.c.content_hash))]
    return stored, recorded


def test_an_edit_and_its_revert_during_an_import_are_not_hidden(engine, tmp_path, monkeypatch):
    """A at the first hash, B while parsed, A again: the next import of A stores A."""
    content = _content_hashes(tmp_path)
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "raced.yaml"
    neighbour = folder / "neighbour.yaml"
    neighbour.write_text(set_yaml("neighbour", 1, model="other"))
    path.write_text(VERSIONS[0])
    with monkeypatch.context() as m:
        _edited_between_reads(m, path, VERSIONS[1], VERSIONS[0])
        _import(engine, [folder])
    assert _stored(engine)[0] == content[1]  # what was parsed is what was stored
    path.write_text(VERSIONS[0])  # the revert, whenever it landed
    _import(engine, [folder])
    assert _stored(engine)[0] == content[0]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)),
                min_size=1, max_size=4))
def test_every_recorded_hash_is_of_the_bytes_that_gave_its_content(engine, tmp_path,
                                                                   monkeypatch, steps):
    """Random edit/revert schedules around each import: every ``import_files`` row pairs a
    file's bytes with the content those bytes give, and a quiet import of whatever the file
    finally holds stores exactly that."""
    content = _content_hashes(tmp_path)
    by_bytes = {hashlib.sha256(v.encode()).hexdigest(): c for v, c in zip(VERSIONS, content)}
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    path = folder / "raced.yaml"
    for start, mid, end in steps:
        path.write_text(VERSIONS[start])
        with monkeypatch.context() as m:
            _edited_between_reads(m, path, VERSIONS[mid], VERSIONS[end])
            _import(engine, [folder])
        path.write_text(VERSIONS[end])
        for bytes_hash, content_hash in _stored(engine)[1]:
            assert by_bytes[bytes_hash] == content_hash
        _import(engine, [folder])
        assert _stored(engine)[0] == content[end]
