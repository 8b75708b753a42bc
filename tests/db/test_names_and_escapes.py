"""Names as a careless or hostile user writes them (issue 27.2, 27.9).

Control characters (terminal escapes, line breaks, bidirectional overrides) are refused where a
name enters (a set's name, a model or method, a deployment's pool, a `-m` message) and escaped
where one is printed (tables, `show`, FILE:LINE:COL lines): a model stored with ESC sequences
was printed raw by `profiles`, and a file named with a newline split every finding line. A set's
name is short enough for export's temporary file (a 237-250-byte name was imported, then no
export could write it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.importing import write as importer
from registry_db.model import MAX_SET_NAME_BYTES
from tests.helpers import DATA, SEED, run_cli, set_yaml, write_set

ESC = "\x1b]0;owned\x07\x1b[2J\x1b[31m"
HOSTILE_TEXT = [ESC, "a\nb", "a\rb", "\u202eevil", "a\x7fb", "a\x9bb", "a\u2028b"]


# --- refused where names enter ----------------------------------------------------------------

@pytest.mark.parametrize("value", HOSTILE_TEXT, ids=repr)
@pytest.mark.parametrize("field", ["model", "speculative_method", "name"])
def test_a_name_with_a_control_character_is_refused(field, value, tmp_path):
    path = tmp_path / "s.yaml"
    doc = set_yaml("s").replace("model: model-a", f"model: {json.dumps('m' + value)}"
                                if field == "model" else "model: model-a")
    if field == "speculative_method":
        doc = doc.replace("speculative_method: mtp", f"speculative_method: {json.dumps(value)}")
    if field == "name":
        doc = doc.replace("name: s", f"name: {json.dumps('s' + value)}")
    path.write_text(doc, encoding="utf-8")
    result = run_cli("validate", "--json", str(path))
    assert result.exit_code == 1, result.stdout
    codes = {(p["path"].rsplit(".", 1)[-1], p["code"]) for p in json.loads(result.stdout)[
        "problems"]}
    assert (field, "bad_name" if field == "name" else "control_character") in codes, codes


@pytest.mark.parametrize("value", HOSTILE_TEXT, ids=repr)
def test_a_pool_name_with_a_control_character_is_refused(value, tmp_path):
    path = tmp_path / "deployment.yaml"
    path.write_text(json.dumps({"pools": [{"name": "decode" + value, "engine": {
        "speculative": {"method": "mtp", "num_spec_tokens": 3}}}]}), encoding="utf-8")
    result = run_cli("resolve", "--model", "glm-5.3", "--thinking", "on", "--category", "coding",
                     "--deployment", str(path))
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "pools[0].name" in result.stderr and "control character" in result.stderr
    assert "\x1b" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("value", [v for v in HOSTILE_TEXT if v != "a\nb"], ids=repr)
def test_a_message_with_a_control_character_is_a_usage_error(value, db_url, tmp_path):
    """A message may span lines (docs/history.md); every other control character is refused."""
    written = write_set(tmp_path, "alpha")
    assert run_cli("-d", db_url, "import", "-m", "why" + value, str(written)).exit_code == 2
    assert run_cli("-d", db_url, "import", str(written)).exit_code == 0
    assert run_cli("-d", db_url, "delete", "alpha", "-m", value).exit_code == 2
    assert run_cli("-d", db_url, "list", "--json").stdout.count('"name"') == 1


# --- escaped where printed --------------------------------------------------------------------

@pytest.fixture
def stored_raw(db_url, engine, tmp_path):
    """A registry whose set, model and file names hold terminal escapes: stored before the
    rule that refuses them (or by SQL), which every printer must still show safely."""
    importer.import_paths(engine, [write_set(tmp_path, "alpha")])
    with engine.begin() as conn:
        conn.execute(text("UPDATE profiles SET model = :m"), {"m": "model" + ESC})
        conn.execute(text("UPDATE profile_sets SET name = :n, source_file = :f"),
                     {"n": "alpha" + ESC, "f": "a\nb.yaml"})
        conn.execute(text("UPDATE revisions SET set_name = :n, message = :m"),
                     {"n": "alpha" + ESC, "m": "m\x1b[2J"})
    return db_url


@pytest.mark.parametrize("args", [["profiles"], ["list"], ["show", "alpha" + ESC],
                                  ["conflicts"], ["coverage"], ["history"],
                                  ["query", "SELECT model, profile_set FROM acceptance_profiles"]],
                         ids=lambda a: a[0])
def test_tables_show_control_characters_escaped(args, stored_raw, backend, request):
    if backend == "postgresql" and args[0] == "query":
        reader = request.getfixturevalue("reader_url")
        args = ["query", "--query-url", reader, *args[1:]]
    result = run_cli("-d", stored_raw, *args)
    assert result.exit_code == 0, result.stderr
    for raw in ("\x1b", "\x07"):
        assert raw not in result.stdout + result.stderr
    if args[0] not in ("conflicts", "history"):
        assert "\\x1b" in result.stdout, result.stdout
    if args[0] == "list":
        assert "a\\nb.yaml" in result.stdout


def test_json_keeps_the_stored_value_exactly(stored_raw):
    """JSON is data for programs: the value as stored (JSON escapes it itself)."""
    result = run_cli("-d", stored_raw, "profiles", "--json")
    assert json.loads(result.stdout)[0]["model"] == "model" + ESC
    assert "\x1b" not in result.stdout


@pytest.fixture
def reader_url(stored_raw):
    from tests.helpers import reader_role

    with reader_role(stored_raw) as url:
        yield url


def test_a_file_name_with_a_line_break_stays_on_its_finding_line(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    bad = folder / "bad\nname.yaml"
    bad.write_text("kind: AcceptanceProfileSet\nname: x\nprofiles: []\nsurplus: 1\n")
    result = run_cli("validate", str(folder))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    findings = [line for line in lines if "surplus" in line or "profiles" in line]
    assert findings and all(line.startswith(str(folder / "bad\\nname.yaml:")) for line in findings)
    assert not any(line.startswith("name.yaml") for line in lines), lines


def test_an_error_naming_a_path_stays_on_one_line(tmp_path):
    result = run_cli("-d", str(tmp_path / "no\nsuch.db"), "list")
    assert result.exit_code == 3
    assert len(result.stderr.strip().splitlines()) == 1 and "no\\nsuch.db" in result.stderr


# --- 27.9: a set's name fits export's temporary file --------------------------------------------

def test_the_longest_name_accepted_is_one_export_can_write(db_url, engine, tmp_path):
    """The temporary file export writes first is `.NAME.yaml.XXXXXXXX.tmp`: 19 bytes more than
    the name, within a file system's 255."""
    assert MAX_SET_NAME_BYTES == 236
    names = ["n" * MAX_SET_NAME_BYTES, "é" * (MAX_SET_NAME_BYTES // 2)]
    files = [write_set(tmp_path / "in", f"s{i}", model=f"m{i}") for i in range(2)]
    for path, name in zip(files, names):
        path.write_text(path.read_text().replace(f"name: {path.stem}", f"name: {name}"))
    assert run_cli("-d", db_url, "import", *map(str, files)).exit_code == 0
    out = tmp_path / "out"
    result = run_cli("-d", db_url, "export", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{n}.yaml" for n in names)


@pytest.mark.parametrize("name", ["n" * (MAX_SET_NAME_BYTES + 1), "n" * 250,
                                  "é" * (MAX_SET_NAME_BYTES // 2 + 1)], ids=len)
def test_a_name_export_could_not_write_is_refused_at_import(name, db_url, tmp_path):
    path = write_set(tmp_path, "s")
    path.write_text(path.read_text().replace("name: s", f"name: {name}"))
    result = run_cli("-d", db_url, "import", str(path))
    assert result.exit_code == 1, result.stderr
    assert "bytes long in UTF-8" in result.stderr and "at most 236" in result.stderr


def test_ingest_name_is_held_to_the_same_limit(tmp_path):
    curve = DATA / "sources" / "inferencex" / "example_eagle3.yaml"
    long = "n" * (MAX_SET_NAME_BYTES + 1)
    result = run_cli("ingest", "inferencex", str(curve), "--name", long, "-o", str(tmp_path))
    assert result.exit_code == 2, result.stderr
    assert "at most 236" in result.stderr and list(tmp_path.iterdir()) == []
    ok = run_cli("ingest", "inferencex", str(curve), "--name", "n" * MAX_SET_NAME_BYTES,
                 "--engine-image", "vllm/vllm-openai:v0.31.0", "-o", str(tmp_path))
    assert ok.exit_code == 0, ok.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["n" * MAX_SET_NAME_BYTES + ".yaml"]


def test_a_stored_name_too_long_stops_the_export_before_any_file(db_url, engine, tmp_path):
    """A name stored before the rule (240 bytes): the all-sets export names it and writes
    nothing, instead of failing half way."""
    importer.import_paths(engine, [write_set(tmp_path / "in", "alpha"),
                                   write_set(tmp_path / "in", "beta", model="b")])
    with engine.begin() as conn:
        conn.execute(text("UPDATE profile_sets SET name = :n WHERE name = 'beta'"),
                     {"n": "b" * 240})
    out = tmp_path / "out"
    result = run_cli("-d", db_url, "export", "-o", str(out))
    assert result.exit_code == 1, result.stderr
    assert "cannot be exported to a file" in result.stderr and "-o -" in result.stderr
    assert not out.exists() or list(out.iterdir()) == []


def test_the_seed_names_are_well_within_the_limit():
    for path in SEED.glob("*.yaml"):
        assert len(path.stem.encode()) <= MAX_SET_NAME_BYTES
        assert Path(path).read_text().count("\x1b") == 0
        _ = store  # the store is what the other tests read through
