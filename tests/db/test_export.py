"""Export on both backends: YAML in the spec's format that imports back to the same rows."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import text

from registry_db.errors import NotFound, RegistryError
from registry_db.importing import export
from registry_db.importing import write as importer
from registry_db.model import Profile, ProfileSet, Provenance, Sampling
from registry_db.sources.profile_set import check_paths
from registry_db.store import read as store
from registry_db.yaml.load import load_yaml
from tests.helpers import SEED, SEED_FILE, broken_foreign_keys, dump, write_set

#: What differs between two imports of the same content: when, and from which file.
VOLATILE = ("profile_sets.imported_at", "profile_sets.source_file", "revisions.imported_at",
            "revisions.source_file", "profile_versions.valid_from", "profile_keys.valid_from",
            # Where the file was (the seed in this repository's work tree, the export outside).
            "revisions.git_commit", "revisions.git_dirty", "revisions.git_path")


def empty_registry(engine) -> None:
    """Remove every set and provenance, restarting ids, as in a new database."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("TRUNCATE profile_sets, provenances, revisions, profile_keys "
                              "RESTART IDENTITY CASCADE"))
        else:
            conn.execute(text("DELETE FROM profile_sets"))
            conn.execute(text("DELETE FROM revisions"))
            # The history's versions and keys name their set, not a revision row.
            conn.execute(text("DELETE FROM profile_versions"))
            conn.execute(text("DELETE FROM profile_keys"))
            conn.execute(text("DELETE FROM provenances"))


def test_seed_export_matches_the_spec_layout(engine, tmp_path):
    importer.import_paths(engine, [SEED])
    [path] = export.export_sets(engine, out_dir=tmp_path)
    assert path == tmp_path / "inferencex-golden-al.yaml"
    out = path.read_text()
    # The shared provenance is written once, under a readable anchor, then aliased.
    assert out.count("&dsv41flash_dspark") == 1
    assert out.count("*dsv41flash_dspark") == 1
    assert out.count("source: ") == 2
    # Numbers as written; thinking reads back as the string.
    assert "acceptance_length: 4.07\n" in out and "acceptance_length: 3.51\n" in out
    assert "top_p: 0.95\n" in out
    doc = load_yaml(out, str(path))
    assert [p["thinking"] for p in doc["profiles"]] == ["off", "on", "on"]
    assert list(doc) == ["kind", "name", "caveats", "profiles"]
    assert list(doc["profiles"][2]) == [
        "model", "speculative_method", "num_spec_tokens", "thinking", "category",
        "acceptance_length", "method", "provenance", "rationale", "copied_from"]


def test_export_then_validate_is_clean(engine, tmp_path):
    importer.import_paths(engine, [SEED])
    write_set(tmp_path / "in", "second", 4)
    importer.import_paths(engine, [tmp_path / "in"])
    paths = export.export_sets(engine, out_dir=tmp_path / "out")
    assert [p.name for p in paths] == ["inferencex-golden-al.yaml", "second.yaml"]
    sets, findings = check_paths([tmp_path / "out"])
    assert findings == []
    assert len(sets) == 2


def test_round_trip_gives_identical_rows(engine, tmp_path):
    importer.import_paths(engine, [SEED])
    write_set(tmp_path / "in", "second", 4, model="x", source="https://e/x.yaml")
    write_set(tmp_path / "in", "third", 2, model="x", source="https://e/x.yaml",
              first_category=3)  # shares the provenance of "second" and one key
    importer.import_paths(engine, [tmp_path / "in"])
    before = dump(engine, skip=VOLATILE)
    export.export_sets(engine, out_dir=tmp_path / "out")

    empty_registry(engine)
    report = importer.import_paths(engine, [tmp_path / "out"])
    assert {s.status for s in report.sets} == {"added"}
    assert dump(engine, skip=VOLATILE) == before
    assert not broken_foreign_keys(engine)
    # And the export of the re-import is byte for byte the first export.
    again = export.export_sets(engine, out_dir=tmp_path / "again")
    assert [p.read_text() for p in again] == [
        (tmp_path / "out" / p.name).read_text() for p in again]


def test_round_trip_of_every_optional_field(engine, tmp_path):
    pv = Provenance(source="s", run="r", benchmark="b", prompts=0, hardware="h100",
                    engine_image="i", tp=8,
                    sampling=Sampling(temperature=0.7, top_p=1.0, top_k=-1, max_tokens=0),
                    settings=(("flag", False), ("n", 12), ("x", 0.1), ("yes", "y"),
                              ("z", "0x1F")))
    profiles = (
        Profile("m", "eagle3", 3, "off", "chat", 2.2, "measured",
                per_position_rates=(0.7, 0.35, 0.15), provenance=pv),
        Profile("m", "eagle3", 3, "on", "chat", 1.0000000000000002, "literature",
                provenance=Provenance(source="paper"), rationale="multi\nline\n"),
        Profile("m", "eagle3", 3, "on", "math", 4.0, "assumed", rationale="a guess: 'no'"),
    )
    ps = ProfileSet("every-field", ("caveat: with colon", "#not a comment"), profiles)
    importer.import_sets(engine, [ps])
    out = export.export_sets(engine, ["every-field"], tmp_path)
    [back], findings = check_paths(out)
    assert findings == []
    assert back.content_hash() == ps.content_hash()
    assert back.profiles[1].acceptance_length == 1.0000000000000002


def test_shared_provenance_is_one_dict_and_anchor(engine):
    importer.import_paths(engine, [SEED])
    ps = store.load_set(engine, "inferencex-golden-al")
    doc = export.set_document(ps)
    assert doc["profiles"][0]["provenance"] is doc["profiles"][1]["provenance"]
    assert doc["profiles"][2]["provenance"] is not doc["profiles"][0]["provenance"]
    assert "&" not in export.render_set(dataclasses.replace(ps, profiles=ps.profiles[2:]))


def test_anchor_names_stay_unique():
    a = Provenance(source="https://e/run.yaml", hardware="a")
    b = Provenance(source="https://f/run.yaml", hardware="b")
    prof = [Profile("m", "mtp", 1, t, c, 1.5, "literature", provenance=p, rationale="r")
            for p, c in ((a, "x"), (b, "y")) for t in ("on", "off")]
    out = export.render_set(ProfileSet("s", (), tuple(prof)))
    assert "&run\n" in out and "&run-2\n" in out
    assert out.count("*run\n") == 1 and out.count("*run-2\n") == 1


@pytest.mark.parametrize("source", ["https://e/golden_v1.2.yaml", "runs/glm-5.3 (b300).yaml",
                                    "https://e/a.b.c?x=1"])
def test_anchor_names_are_ones_yaml_can_write(source):
    """YAML anchors take letters, digits, '-' and '_' only: a '.' left in a source's stem made
    export (and ingest) fail with a traceback from the emitter."""
    pv = Provenance(source=source, hardware="b300")
    prof = tuple(Profile("m", "mtp", k, "on", "c", 1.5, "literature", provenance=pv,
                         rationale="r") for k in (1, 2))
    ps = ProfileSet("s", (), prof)
    out = export.render_set(ps)
    assert out.count("provenance: &") == 1 and out.count("provenance: *") == 1
    back, findings = check_paths_text(out)
    assert findings == [] and back.content_hash() == ps.content_hash()


def check_paths_text(text: str):
    """The set a rendered text holds, read back as import reads it, and the findings."""
    from registry_db.inputs.profile_set import check_profile_set

    return check_profile_set(load_yaml(text, "s.yaml"), "s.yaml")


def test_export_named_sets_only(engine, tmp_path):
    write_set(tmp_path / "in", "one", model="a")
    write_set(tmp_path / "in", "two", model="b")
    importer.import_paths(engine, [tmp_path / "in"])
    paths = export.export_sets(engine, ["two"], tmp_path / "out")
    assert [p.name for p in paths] == ["two.yaml"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["two.yaml"]


def test_unknown_set_is_not_found(engine, tmp_path):
    importer.import_paths(engine, [SEED])
    with pytest.raises(NotFound, match="known sets: inferencex-golden-al"):
        export.export_sets(engine, ["nope"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "x\\y"])
def test_unsafe_set_names_never_leave_the_folder(engine, tmp_path, name):
    [seed], _ = importer.load_paths([SEED_FILE])
    importer.import_sets(engine, [dataclasses.replace(seed, name=name)])
    out = tmp_path / "out"
    with pytest.raises(RegistryError, match="cannot be exported to a file"):
        export.export_sets(engine, out_dir=out)
    assert not any(tmp_path.rglob("*.yaml"))
    # -o - prints it instead.
    assert load_yaml(export.render_sets(engine, [name]), "-")["name"] == name


def test_render_sets_refuses_several_sets(engine, tmp_path):
    # A stream of several documents is not something `registry import` reads back.
    write_set(tmp_path, "one", model="a")
    write_set(tmp_path, "two", model="b")
    importer.import_paths(engine, [tmp_path])
    for names in (None, ["one", "two"]):
        with pytest.raises(RegistryError, match="-o - prints one set"):
            export.render_sets(engine, names)
    assert export.render_sets(engine, ["two"]).count("kind: AcceptanceProfileSet") == 1


def test_file_name_rules():
    assert export.file_name("inferencex-golden-al") == "inferencex-golden-al.yaml"
    for bad in ("", ".x", "a/b", "a\0b", "x" * 300):
        with pytest.raises(RegistryError):
            export.file_name(bad)
