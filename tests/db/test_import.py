"""The importer on both backends: added/updated/unchanged, replacement, provenance dedupe,
overlap warnings, and all-or-nothing.

The shared helpers (a set's YAML text, a full dump of every table, foreign-key checks) live in
tests/helpers.py.
"""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from sqlalchemy import select, text

from registry_db.errors import InvalidInput, NotFound, RegistryError
from registry_db.importing import write as importer
from registry_db.store import read as store
from registry_db.store.schema import profile_sets, profiles, provenances
from tests.helpers import (
    SEED,
    SEED_FILE,
    broken_foreign_keys,
    dump,
    orphan_provenances,
    set_yaml,
    write_set,
)


def profile_count(engine, set_name: str) -> int:
    with engine.connect() as conn:
        return conn.execute(text(
            "SELECT COUNT(*) FROM profiles p JOIN profile_sets s ON s.id = p.set_id "
            "WHERE s.name = :n"), {"n": set_name}).scalar()


def statuses(report) -> dict[str, str]:
    return {s.name: s.status for s in report.sets}


# --- the seed ------------------------------------------------------------------------------------

def test_seed_imports_and_reads_back(engine):
    report = importer.import_paths(engine, [SEED])
    assert statuses(report) == {"inferencex-golden-al": "added"}
    assert [s.profiles for s in report.sets] == [3]
    loaded = store.load_set(engine, "inferencex-golden-al")
    [given], _ = importer.load_paths([SEED_FILE])
    assert loaded.content_hash() == given.content_hash()
    assert [p.label for p in loaded.profiles] == [p.label for p in given.profiles]
    assert loaded.caveats == given.caveats
    assert not broken_foreign_keys(engine)


def test_seed_shared_provenance_is_one_row(engine):
    importer.import_paths(engine, [SEED])
    with engine.connect() as conn:
        n_prov = conn.execute(select(text("COUNT(*)")).select_from(provenances)).scalar()
        cited = conn.execute(select(profiles.c.provenance_id).order_by(profiles.c.position)).all()
    # Two profiles cite &dsv41, the third its own: two rows, the first two share an id.
    assert n_prov == 2
    assert cited[0] == cited[1] != cited[2]


def test_reimport_is_unchanged_and_not_rewritten(engine):
    importer.import_paths(engine, [SEED])
    before = dump(engine)
    report = importer.import_paths(engine, [SEED])
    assert statuses(report) == {"inferencex-golden-al": "unchanged"}
    assert dump(engine) == before  # imported_at included: nothing was rewritten


def test_editing_one_al_updates_exactly_that_row(engine, tmp_path):
    importer.import_paths(engine, [SEED])
    skip = ("profile_sets.imported_at", "profile_sets.content_hash", "profile_sets.source_file",
            "profile_sets.revision")
    before = dump(engine, skip=skip)
    edited = tmp_path / SEED_FILE.name
    edited.write_text(SEED_FILE.read_text().replace("acceptance_length: 3.51",
                                                    "acceptance_length: 3.55"))
    report = importer.import_paths(engine, [edited])
    assert statuses(report) == {"inferencex-golden-al": "updated"}
    after = dump(engine, skip=skip)

    def by_key(rows):  # position + key columns -> the row without its (new) id
        return {r[2:8]: r[1:] for r in rows}

    old, new = by_key(before["profiles"]), by_key(after["profiles"])
    assert old.keys() == new.keys()
    changed = [k for k in old if old[k] != new[k]]
    al = [c.name for c in profiles.columns].index("acceptance_length") - 1
    assert [(k[1:], new[k][al]) for k in changed] == [
        (("deepseek-v4.1-flash", "dspark", 5, "on", "coding"), 3.55)]
    assert after["provenances"] == before["provenances"]
    assert after["provenance_settings"] == before["provenance_settings"]
    assert after["set_caveats"] == before["set_caveats"]
    assert after["profile_sets"] == before["profile_sets"]


def test_removing_a_profile_removes_it_and_keeps_its_provenance_for_history(engine, tmp_path):
    importer.import_paths(engine, [SEED])
    text_ = SEED_FILE.read_text()
    trimmed = tmp_path / SEED_FILE.name
    trimmed.write_text(text_[:text_.index("  - model: glm-5.3")])
    report = importer.import_paths(engine, [trimmed])
    assert statuses(report) == {"inferencex-golden-al": "updated"}
    assert [p.model for p in store.load_set(engine, "inferencex-golden-al").profiles] == [
        "deepseek-v4.1-flash", "deepseek-v4.1-flash"]
    assert profile_count(engine, "inferencex-golden-al") == 2
    assert orphan_provenances(engine) == 0
    with engine.connect() as conn:
        # The removed profile's provenance is still cited by revision 1.
        assert conn.execute(text("SELECT COUNT(*) FROM provenances")).scalar() == 2
        assert conn.execute(text(
            "SELECT COUNT(DISTINCT p.provenance_id) FROM profiles p")).scalar() == 1


def test_replacing_a_set_keeps_caveat_order_and_rates(engine):
    [seed], _ = importer.load_paths([SEED_FILE])
    p0 = dataclasses.replace(seed.profiles[0], per_position_rates=(1.0, 1.0, 0.9, 0.17, 0.0))
    changed = dataclasses.replace(seed, caveats=("z last?", "a first?", "m"),
                                  profiles=(p0,) + seed.profiles[1:])
    importer.import_sets(engine, [seed])
    assert statuses(importer.import_sets(engine, [changed])) == {seed.name: "updated"}
    back = store.load_set(engine, seed.name)
    assert back.caveats == ("z last?", "a first?", "m")
    assert back.profiles[0].per_position_rates == (1.0, 1.0, 0.9, 0.17, 0.0)
    assert back.content_hash() == changed.content_hash()


def test_provenance_is_shared_across_sets(engine, tmp_path):
    write_set(tmp_path, "one", 3, model="a")
    write_set(tmp_path, "two", 2, model="b")
    importer.import_paths(engine, [tmp_path])
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM provenances")).scalar() == 1
        assert conn.execute(text("SELECT COUNT(*) FROM provenance_settings")).scalar() == 2
    # Replacing one set keeps the provenance the other still cites.
    write_set(tmp_path, "one", 3, model="a", source="https://example.org/other.yaml")
    importer.import_paths(engine, [tmp_path / "one.yaml"])
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM provenances")).scalar() == 2
    assert orphan_provenances(engine) == 0
    assert not broken_foreign_keys(engine)


def test_settings_keep_their_types(engine):
    [seed], _ = importer.load_paths([SEED_FILE])
    pv = dataclasses.replace(seed.profiles[0].provenance,
                             settings=(("a_flag", True), ("b_int", 3), ("c_num", 0.5),
                                       ("d_text", "007")))
    one = dataclasses.replace(seed, profiles=(dataclasses.replace(seed.profiles[0],
                                                                  provenance=pv),))
    importer.import_sets(engine, [one])
    back = store.load_set(engine, seed.name).profiles[0].provenance
    assert back.settings == (("a_flag", True), ("b_int", 3), ("c_num", 0.5), ("d_text", "007"))
    assert [type(v) for _, v in back.settings] == [bool, int, float, str]


# --- names and overlaps --------------------------------------------------------------------------

def test_two_sets_with_one_name_are_refused(engine):
    [seed], _ = importer.load_paths([SEED_FILE])
    twin = dataclasses.replace(seed, file="elsewhere.yaml")
    with pytest.raises(InvalidInput) as exc:
        importer.import_sets(engine, [seed, twin])
    [finding] = exc.value.findings
    assert finding.code == "duplicate_set_name"
    assert "elsewhere.yaml" in finding.file and str(SEED_FILE) in finding.message
    assert store.list_sets(engine) == []


def test_two_files_declaring_one_name_name_both(engine, tmp_path):
    write_set(tmp_path, "same")
    (tmp_path / "copy.yaml").write_text(set_yaml("same"))
    with pytest.raises(InvalidInput) as exc:
        importer.import_paths(engine, [tmp_path])
    text_ = " ".join(f.render() for f in exc.value.findings)
    assert "copy.yaml" in text_ and "same.yaml" in text_
    assert store.list_sets(engine) == []


def test_overlapping_keys_are_imported_with_a_warning(engine, tmp_path):
    write_set(tmp_path, "one", 3)
    write_set(tmp_path, "two", 2, first_category=2)  # cat2 is in both
    report = importer.import_paths(engine, [tmp_path])
    assert statuses(report) == {"one": "added", "two": "added"}
    [warning] = [w for w in report.warnings if w.code == "profile_key_overlap"]
    assert warning.severity == "warning"
    assert "model-a/mtp/k3/thinking-on/cat2" in warning.message
    assert "one" in warning.message and "two" in warning.message
    assert [(c.label, c.sets) for c in store.conflicts(engine)] == [
        ("model-a/mtp/k3/thinking-on/cat2", ("one", "two"))]


def test_overlap_with_a_stored_set_is_warned(engine, tmp_path):
    importer.import_paths(engine, [write_set(tmp_path / "a", "stored", 3)])
    report = importer.import_paths(engine, [write_set(tmp_path / "b", "incoming", 1)])
    [warning] = report.warnings
    assert "stored" in warning.message and "incoming" in warning.message
    # A set that replaces the stored one is not compared with its own old rows.
    again = importer.import_paths(engine, [write_set(tmp_path / "c", "stored", 3, al=2.6)])
    assert [w.message for w in again.warnings if "stored" in w.message] == [warning.message]


def test_no_warning_without_overlap(engine, tmp_path):
    write_set(tmp_path, "one", 2, model="a")
    write_set(tmp_path, "two", 2, model="b")
    assert importer.import_paths(engine, [tmp_path]).warnings == ()


# --- all or nothing, dry run ---------------------------------------------------------------------

def test_one_invalid_file_in_ten_writes_nothing(engine, tmp_path):
    importer.import_paths(engine, [SEED])
    before = dump(engine)
    for i in range(10):
        write_set(tmp_path, f"set-{i:02d}", 4, model=f"m{i}",
                  al=9.5 if i == 6 else 2.5)  # the seventh: AL outside [1, K + 1]
    with pytest.raises(InvalidInput) as exc:
        importer.import_paths(engine, [tmp_path])
    assert {f.file for f in exc.value.findings if f.is_error} == {
        str(tmp_path / "set-06.yaml")}
    assert dump(engine) == before


def test_database_refusal_rolls_back_every_set(engine):
    """A set the database refuses (a CHECK) undoes the sets written before it."""
    [seed], _ = importer.load_paths([SEED_FILE])
    good = dataclasses.replace(seed, name="good")
    bad_profile = dataclasses.replace(seed.profiles[0], acceptance_length=99.0)
    bad = dataclasses.replace(seed, name="zz-bad", profiles=(bad_profile,))
    before = dump(engine)
    with pytest.raises(RegistryError):
        importer.import_sets(engine, [good, bad])
    assert dump(engine) == before


def test_database_refusal_in_a_bulk_insert_is_a_registry_error(engine):
    """The bulk path (COPY on PostgreSQL) reports a refused row like any other statement."""
    [seed], _ = importer.load_paths([SEED_FILE])
    rows = tuple(dataclasses.replace(seed.profiles[0], category=f"c{i}",
                                     acceptance_length=99.0 if i == 70 else 2.0)
                 for i in range(100))
    before = dump(engine)
    with pytest.raises(RegistryError, match="al_range"):
        importer.import_sets(engine, [dataclasses.replace(seed, profiles=rows)])
    assert dump(engine) == before


def test_dry_run_reports_and_writes_nothing(engine, tmp_path):
    importer.import_paths(engine, [SEED])
    before = dump(engine)
    edited = tmp_path / "edited" / SEED_FILE.name
    edited.parent.mkdir()
    edited.write_text(SEED_FILE.read_text().replace("4.07", "4.08"))
    write_set(tmp_path / "new", "brand-new")
    report = importer.import_paths(engine, [edited, tmp_path / "new"], dry_run=True)
    assert statuses(report) == {"inferencex-golden-al": "updated", "brand-new": "added"}
    assert report.dry_run
    assert dump(engine) == before
    same = importer.import_paths(engine, [SEED], dry_run=True)
    assert statuses(same) == {"inferencex-golden-al": "unchanged"}


def test_preview_without_a_database_calls_everything_added(tmp_path):
    write_set(tmp_path, "one", 2)
    write_set(tmp_path, "two", 2)  # same keys: warned
    sets, _ = importer.load_paths([tmp_path])
    report = importer.preview_sets(sets)
    assert statuses(report) == {"one": "added", "two": "added"}
    assert len(report.warnings) == 1  # one per pair of sets, naming both shared keys
    assert "share 2 profile key(s)" in report.warnings[0].message


def test_report_json_is_the_contracts(engine):
    report = importer.import_paths(engine, [SEED])
    assert report.to_json() == {"sets": [{
        "name": "inferencex-golden-al", "file": str(SEED_FILE), "status": "added", "profiles": 3,
    }]}


def test_many_profiles_in_one_import(engine, tmp_path):
    """More rows than one statement batch (and one IN list) holds."""
    for i in range(3):
        write_set(tmp_path, f"big-{i}", 1200, model=f"m{i}", source=f"https://e/{i}.yaml")
    report = importer.import_paths(engine, [tmp_path])
    assert [s.profiles for s in report.sets] == [1200] * 3
    assert [s.profiles for s in store.list_sets(engine)] == [1200] * 3
    again = importer.import_paths(engine, [tmp_path])
    assert set(statuses(again).values()) == {"unchanged"}
    assert not broken_foreign_keys(engine)


def test_unknown_set_names_the_known_ones(engine):
    importer.import_paths(engine, [SEED])
    with pytest.raises(NotFound) as exc:
        store.load_set(engine, "inferencex-golden")
    assert "did you mean 'inferencex-golden-al'" in str(exc.value)


def test_seed_copy_folder_is_sorted_and_hidden_files_skipped(engine, tmp_path):
    shutil.copy(SEED_FILE, tmp_path / SEED_FILE.name)
    (tmp_path / ".hidden.yaml").write_text("not: [valid")
    write_set(tmp_path, "a-first")
    report = importer.import_paths(engine, [tmp_path])
    assert [s.name for s in report.sets] == ["a-first", "inferencex-golden-al"]
    with engine.connect() as conn:
        assert conn.execute(select(profile_sets.c.name).order_by(profile_sets.c.id)
                            ).scalars().all() == ["a-first", "inferencex-golden-al"]


def test_large_set_with_rates_round_trips_exactly(engine):
    """Enough rows for the bulk path (COPY on PostgreSQL): rates, settings, floats exact."""
    [seed], _ = importer.load_paths([SEED_FILE])
    base = seed.profiles[0]
    rated = []
    for i in range(120):
        al = 1.0 + (i % 7) / 3  # 1.0, 1.333..., ... 3.0: floats that print long
        rest = al - 1.0
        rates = (min(rest, 1.0), max(rest - 1.0, 0.0), 0.0, 0.0, 0.0)
        rated.append(dataclasses.replace(base, category=f"c{i}", acceptance_length=al,
                                         per_position_rates=rates))
    big = dataclasses.replace(seed, name="big", profiles=tuple(rated))
    importer.import_sets(engine, [big])
    back = store.load_set(engine, "big")
    assert back.content_hash() == big.content_hash()
    assert [p.per_position_rates for p in back.profiles] == [p.per_position_rates for p in rated]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM profile_rates")).scalar() == 600
