"""Unchanged files are skipped before parsing (importing/unchanged.py): a re-import reads only what
changed, and says exactly what a full read says — statuses, JSON, warnings, errors."""

from __future__ import annotations

import hashlib
import shutil

import pytest
from sqlalchemy import delete, func, select

from registry_db import history
from registry_db.errors import InvalidInput
from registry_db.importing import restore, unchanged
from registry_db.importing import write as importer
from registry_db.store.schema import import_files
from tests.helpers import dump, run_cli, set_yaml, write_set


def _read_files(engine, paths, **kw):
    """Import ``paths`` as the library does; the report and the number of files parsed."""
    parsed: list[int] = []

    def known(hashes):
        with engine.connect() as conn:
            return unchanged.lookup(conn, hashes)

    loaded = importer.load_skipping(paths, known, lambda _p, _d, total: parsed.append(total))
    report = importer.import_loaded(engine, loaded, **kw)
    return report, loaded, (parsed[-1] if parsed else 0)


def _plain(engine, paths, **kw):
    """The same import with every file read (the long way the skip must equal)."""
    sets, warnings = importer.load_paths(paths)
    report = importer.import_sets(engine, sets, **kw)
    return [s.to_json() for s in report.sets], warnings + list(report.warnings)


def _seen(report, loaded):
    return [s.to_json() for s in report.sets], list(loaded.warnings + report.warnings)


def _folder(tmp_path):
    folder = tmp_path / "in"
    for name in ("alpha", "beta", "gamma"):
        write_set(folder, name, 4, model=f"model-{name}")
    return folder


def test_a_reimport_of_an_unchanged_folder_reads_no_file(engine, tmp_path):
    folder = _folder(tmp_path)
    first, _, read = _read_files(engine, [folder])
    assert read == 3 and [s.status for s in first.sets] == ["added"] * 3
    before = dump(engine)
    again, _, read = _read_files(engine, [folder])
    assert read == 0
    assert [(s.name, s.status, s.profiles) for s in again.sets] == [
        ("alpha", "unchanged", 4), ("beta", "unchanged", 4), ("gamma", "unchanged", 4)]
    assert dump(engine) == before  # nothing rewritten, no revision


def test_a_changed_file_is_read_and_written_the_others_skipped(engine, tmp_path):
    folder = _folder(tmp_path)
    _read_files(engine, [folder])
    write_set(folder, "beta", 4, model="model-beta", al=3.0)
    report, _, read = _read_files(engine, [folder])
    assert read == 1
    assert {s.name: s.status for s in report.sets} == {
        "alpha": "unchanged", "beta": "updated", "gamma": "unchanged"}
    assert max(r.revision for r in history.history(engine, "beta")) == 2
    _, _, read = _read_files(engine, [folder])
    assert read == 0


def test_a_skip_reports_what_a_full_read_reports(engine, tmp_path):
    """Statuses, JSON and warnings: a name that differs from the file's, keys shared between
    skipped sets, with a set read and with a stored set the import does not name."""
    folder = tmp_path / "in"
    write_set(folder, "one", 3, model="m")                      # shares m/cat0..2 with two
    write_set(folder, "two", 3, model="m", first_category=1)    # and with changed
    (folder / "named-otherwise.yaml").write_text(set_yaml("three", 2, model="x"))
    write_set(folder, "changed", 2, model="m")
    write_set(tmp_path / "apart", "stored", 2, model="m", first_category=2)
    _read_files(engine, [folder, tmp_path / "apart"])
    write_set(folder, "changed", 3, model="m", al=2.0)
    expected = _plain(engine, [folder], dry_run=True)
    report, loaded, read = _read_files(engine, [folder], dry_run=True)
    assert read == 1
    assert _seen(report, loaded) == expected
    assert any("share" in w.message for w in loaded.warnings + report.warnings)
    assert any(w.code == "name_not_file" for w in loaded.warnings)
    report, loaded, _ = _read_files(engine, [folder])
    assert _seen(report, loaded)[0] == expected[0]
    assert _seen(report, loaded)[1] == expected[1]


def test_a_set_another_file_changed_since_is_read_again(engine, tmp_path):
    path = write_set(tmp_path / "a", "shared", 3)
    _read_files(engine, [path])
    write_set(tmp_path / "b", "shared", 3, al=3.0)
    _read_files(engine, [tmp_path / "b"])
    report, _, read = _read_files(engine, [path])
    assert read == 1
    assert [(s.status, s.moved_from) for s in report.sets] == [
        ("updated", str(tmp_path / "b" / "shared.yaml"))]


def test_a_deleted_set_is_added_again_and_a_restored_one_is_unchanged(engine, tmp_path):
    path = write_set(tmp_path, "gone", 3)
    _read_files(engine, [path])
    history.delete_sets(engine, ["gone"])
    report, _, read = _read_files(engine, [path])
    assert (read, report.sets[0].status) == (1, "added")
    history.delete_sets(engine, ["gone"])
    restore.restore(engine, "gone", 3)
    report, _, read = _read_files(engine, [path])
    # Restored to the content the file holds: a full read finds it unchanged too.
    assert (read, report.sets[0].status) == (0, "unchanged")


def test_a_file_moved_with_the_same_bytes_is_read_once_at_its_new_path(engine, tmp_path):
    old = write_set(tmp_path / "old", "mover", 3)
    _read_files(engine, [old])
    new = tmp_path / "new" / "mover.yaml"
    new.parent.mkdir()
    shutil.move(old, new)
    report, _, read = _read_files(engine, [new])
    assert read == 1
    assert [(s.status, s.file, s.moved_from) for s in report.sets] == [
        ("unchanged", str(new), str(old))]
    shutil.move(new, old)  # and back: its row was replaced, so it is read again
    report, _, read = _read_files(engine, [old])
    assert read == 1
    assert [(s.status, s.moved_from) for s in report.sets] == [("unchanged", str(new))]
    report, _, read = _read_files(engine, [old])
    assert (read, report.sets[0].moved_from) == (0, None)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(import_files)).scalar() == 1


def test_new_rules_read_every_file_again(engine, tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    _read_files(engine, [folder])
    monkeypatch.setattr(unchanged, "RULES", unchanged.RULES + 1)
    unchanged.rules_version.cache_clear()
    try:
        _, _, read = _read_files(engine, [folder])
        assert read == 3
        _, _, read = _read_files(engine, [folder])
        assert read == 0
    finally:
        monkeypatch.undo()
        unchanged.rules_version.cache_clear()


def test_a_dry_run_skips_and_records_nothing(engine, tmp_path):
    folder = _folder(tmp_path)
    report, _, read = _read_files(engine, [folder], dry_run=True)
    assert read == 3 and report.dry_run
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(import_files)).scalar() == 0
    _read_files(engine, [folder])
    before = dump(engine)
    report, _, read = _read_files(engine, [folder], dry_run=True)
    assert read == 0 and {s.status for s in report.sets} == {"unchanged"}
    assert dump(engine) == before


def test_a_set_changed_between_the_lookup_and_the_write_is_read_then(engine, tmp_path):
    """The skip is decided again under the writers' lock: another import in between wins
    nothing, the file's content is written as a full read would."""
    path = write_set(tmp_path / "a", "raced", 3)
    _read_files(engine, [path])

    def known(hashes):
        with engine.connect() as conn:
            return unchanged.lookup(conn, hashes)

    loaded = importer.load_skipping([path], known)
    assert [type(s).__name__ for s in loaded.sets] == ["Known"]
    write_set(tmp_path / "b", "raced", 3, al=3.0)
    importer.import_paths(engine, [tmp_path / "b"])
    report = importer.import_loaded(engine, loaded)
    assert [s.status for s in report.sets] == ["updated"]
    _, _, read = _read_files(engine, [path])
    assert read == 0


def test_errors_beside_skipped_files_are_exactly_a_full_reads(engine, tmp_path):
    folder = _folder(tmp_path)
    _read_files(engine, [folder])
    (folder / "broken.yaml").write_text("kind: AcceptanceProfileSet\nname: [oops\n")
    write_set(tmp_path / "dup", "alpha", 2)  # a second file declaring a skipped file's set
    for paths in ([folder], [folder, tmp_path / "dup"], [tmp_path / "dup", folder]):
        with pytest.raises(InvalidInput) as plain:
            importer.load_paths(paths)
        with pytest.raises(InvalidInput) as skipping:
            _read_files(engine, paths)
        assert skipping.value.findings == plain.value.findings


def test_a_duplicate_name_beside_a_skipped_file_is_refused_as_before(engine, tmp_path):
    folder = _folder(tmp_path)
    _read_files(engine, [folder])
    write_set(tmp_path / "dup", "beta", 2)
    with pytest.raises(InvalidInput) as plain:
        importer.load_paths([folder, tmp_path / "dup"])
    with pytest.raises(InvalidInput) as skipping:
        _read_files(engine, [folder, tmp_path / "dup"])
    assert skipping.value.findings == plain.value.findings


@pytest.mark.parametrize("flags", [(), ("--json",), ("--dry-run",), ("--prune",)])
def test_the_command_prints_the_same_with_and_without_the_skip(db_url, tmp_path, flags):
    from registry_db import store

    folder, apart = tmp_path / "in", tmp_path / "apart"
    write_set(folder, "one", 3, model="m")
    write_set(folder, "two", 3, model="m")
    (folder / "other-name.yaml").write_text(set_yaml("three", 1))
    write_set(apart, "extra", 1)
    assert run_cli("-d", db_url, "import", str(folder), str(apart)).exit_code == 0
    skipped = run_cli("-d", db_url, "import", *flags, str(folder))
    engine = store.make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(delete(import_files))
    finally:
        engine.dispose()
    assert run_cli("-d", db_url, "import", str(apart)).exit_code == 0  # --prune deleted it
    full = run_cli("-d", db_url, "import", *flags, str(folder))
    assert (skipped.exit_code, skipped.stdout, skipped.stderr) == (
        full.exit_code, full.stdout, full.stderr)
    assert "unchanged" in skipped.stdout and "warning" in skipped.stderr


def test_a_file_that_changes_after_its_hash_is_recorded_as_the_bytes_parsed(engine, tmp_path):
    """The recorded hash is of the bytes parsed, not of the bytes first hashed: an edit between
    the two is what gets stored and remembered (tests/db/test_import_skip_race.py races it)."""
    path = write_set(tmp_path, "moving", 3)

    def known(hashes):
        with engine.connect() as conn:
            return unchanged.lookup(conn, hashes)

    def edit(_phase, done, _total):
        if done == 0:  # after the hash, before the read
            write_set(tmp_path, "moving", 3, al=3.0)

    loaded = importer.load_skipping([path], known, edit)
    assert loaded.files[str(path)][0] == hashlib.sha256(path.read_bytes()).hexdigest()
    importer.import_loaded(engine, loaded)
    _, _, read = _read_files(engine, [path])
    assert read == 0  # the file still holds what was parsed and stored
    write_set(tmp_path, "moving", 3)  # the revert
    report, _, read = _read_files(engine, [path])
    assert read == 1 and [s.status for s in report.sets] == ["updated"]
