"""``registry list``, ``show``, ``conflicts`` and ``export`` on both backends."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from registry_db import store
from registry_db.importing import write as importer
from registry_db.yaml.load import load_yaml
from tests.helpers import SEED, SEED_FILE, write_set
from tests.helpers import run_on as run


def _load(db_url: str, tmp_path: Path) -> str:
    """The seed plus two sets that share one key (imported z first, to prove the ordering)."""
    write_set(tmp_path / "z", "zeta", 2, model="m")
    write_set(tmp_path / "a", "alpha", 3, model="m", first_category=1, caveats=())
    for folder in (tmp_path / "z", tmp_path / "a", SEED):
        assert run(db_url, "import", str(folder)).exit_code == 0
    return db_url


@pytest.fixture
def loaded(shared_url, tmp_path_factory):
    """:func:`_load`'s registry, built once a session for the tests that only read it."""
    return shared_url("read-cli", lambda engine: _load(
        engine.url.render_as_string(hide_password=False), tmp_path_factory.mktemp("loaded")))


@pytest.fixture
def own_loaded(db_url, tmp_path):
    """:func:`_load`'s registry of the test's own, for a test that imports into it."""
    return _load(db_url, tmp_path)


def test_list_table_json_csv(loaded):
    table = run(loaded, "list")
    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["name", "file", "profiles", "caveats", "imported_at"]
    assert [ln.split()[0] for ln in lines[2:]] == ["alpha", "inferencex-golden-al", "zeta"]

    rows = json.loads(run(loaded, "list", "--json").stdout)
    assert [(r["name"], r["profiles"], r["caveats"]) for r in rows] == [
        ("alpha", 3, 0), ("inferencex-golden-al", 3, 3), ("zeta", 2, 1)]
    assert rows[1]["file"] == str(SEED_FILE)
    assert rows[1]["imported_at"].endswith("+00:00")

    parsed = list(csv.DictReader(io.StringIO(run(loaded, "list", "--csv").stdout)))
    assert [r["name"] for r in parsed] == ["alpha", "inferencex-golden-al", "zeta"]


@pytest.mark.parametrize("flag", ["--model", "--k", "--set"])
def test_list_given_a_profile_filter_points_at_profiles(loaded, flag):
    """`list --model M` is what a new user tries first (issue 16): the usage error says which
    command takes it; any other unknown option keeps click's own message."""
    result = run(loaded, "list", flag, "x")
    assert result.exit_code == 2
    assert f"No such option: {flag}; `list` lists the sets, and `registry profiles {flag} ...`" \
        in result.stderr
    other = run(loaded, "list", "--frobnicate")
    assert other.exit_code == 2 and "registry profiles" not in other.stderr


def test_list_of_an_empty_database(db_url):
    assert json.loads(run(db_url, "list", "--json").stdout) == []
    assert "(no rows)" in run(db_url, "list").stdout


def test_show_human_and_json(loaded):
    human = run(loaded, "show", "inferencex-golden-al")
    assert human.exit_code == 0
    assert "Measured on B300." in human.stdout
    # The table's rows (the notes after it name a profile with a trailing colon).
    labels = [ln.split()[0] for ln in human.stdout.splitlines()
              if "/thinking-" in ln.split(" ", 1)[0] and not ln.split()[0].endswith(":")]
    assert labels == ["deepseek-v4.1-flash/dspark/k5/thinking-off/coding",
                      "deepseek-v4.1-flash/dspark/k5/thinking-on/coding",
                      "glm-5.3/mtp/k3/thinking-on/coding"]

    doc = json.loads(run(loaded, "show", "inferencex-golden-al", "--json").stdout)
    assert doc["name"] == "inferencex-golden-al" and doc["file"] == str(SEED_FILE)
    assert len(doc["caveats"]) == 3
    seed = load_yaml(SEED_FILE.read_bytes(), str(SEED_FILE))
    # The spec's form, plus each profile's counts and uncertainty (the seed has no counts).
    assert doc["profiles"] == [{**p, "counts": None, "uncertainty": None}
                               for p in json.loads(json.dumps(seed["profiles"]))]


def test_show_unknown_set_names_the_known_ones(loaded):
    result = run(loaded, "show", "inferencex")
    assert result.exit_code == 1
    assert "did you mean 'inferencex-golden-al'" in result.stderr
    assert "alpha" in result.stderr and "zeta" in result.stderr
    assert result.stdout == ""


def test_conflicts_listing(loaded):
    rows = json.loads(run(loaded, "conflicts", "--json").stdout)
    assert rows == [{
        "profile": "m/mtp/k3/thinking-on/cat1", "model": "m", "speculative_method": "mtp",
        "num_spec_tokens": 3, "thinking": "on", "category": "cat1", "set_count": 2,
        "sets": ["alpha", "zeta"],
    }]
    [row] = list(csv.DictReader(io.StringIO(run(loaded, "conflicts", "--csv").stdout)))
    assert row["sets"] == "alpha zeta" and row["set_count"] == "2"
    assert "m/mtp/k3/thinking-on/cat1" in run(loaded, "conflicts").stdout


def test_conflicts_are_ordered_by_key(db_url, tmp_path):
    write_set(tmp_path, "one", 3, model="b")
    write_set(tmp_path, "two", 3, model="b")
    write_set(tmp_path, "three", 1, model="a")
    write_set(tmp_path, "four", 1, model="a")
    run(db_url, "import", str(tmp_path))
    rows = json.loads(run(db_url, "conflicts", "--json").stdout)
    assert [(r["profile"], r["sets"]) for r in rows] == [
        ("a/mtp/k3/thinking-on/cat0", ["four", "three"]),
        ("b/mtp/k3/thinking-on/cat0", ["one", "two"]),
        ("b/mtp/k3/thinking-on/cat1", ["one", "two"]),
        ("b/mtp/k3/thinking-on/cat2", ["one", "two"]),
    ]


def test_no_conflicts(db_url):
    run(db_url, "import", str(SEED))
    assert json.loads(run(db_url, "conflicts", "--json").stdout) == []


def test_export_to_a_folder_and_back(own_loaded, tmp_path):
    out = tmp_path / "exported"
    result = run(own_loaded, "export", "-o", str(out))
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [str(out / f"{n}.yaml")
                                          for n in ("alpha", "inferencex-golden-al", "zeta")]
    again = run(own_loaded, "import", "--json", str(out))
    assert {s["status"] for s in json.loads(again.stdout)["sets"]} == {"unchanged"}


def test_export_named_set_to_stdout(loaded):
    result = run(loaded, "export", "zeta", "-o", "-")
    assert result.exit_code == 0
    assert load_yaml(result.stdout, "-")["name"] == "zeta"
    assert "&run" in result.stdout and "*run" in result.stdout


def test_export_unknown_set_is_exit_1(loaded, tmp_path):
    result = run(loaded, "export", "nope", "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert "known sets: alpha" in result.stderr
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_name_that_would_leave_the_folder(db_url, tmp_path):
    [seed], _ = importer.load_paths([SEED_FILE])
    engine = store.open_registry(db_url)
    importer.import_sets(engine, [seed.__class__(name="../up", caveats=(),
                                                 profiles=seed.profiles)])
    engine.dispose()
    out = tmp_path / "out"
    result = run(db_url, "export", "-o", str(out))
    assert result.exit_code == 1
    assert "cannot be exported to a file" in result.stderr
    assert not (tmp_path / "up.yaml").exists()
    assert not list(tmp_path.rglob("*.yaml"))


def test_export_into_an_unwritable_place_is_exit_1(loaded, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = run(loaded, "export", "-o", str(blocker / "sub"))
    assert result.exit_code == 1
    assert "cannot write to" in result.stderr and "a-file" in result.stderr
