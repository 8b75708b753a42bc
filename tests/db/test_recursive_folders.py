"""``import -r`` and ``validate -r``: a folder read with its subfolders (a team grouping its
sets by vendor or lab), hidden folders skipped; without ``-r`` the subfolders are skipped with
a warning, as before."""

from __future__ import annotations

import json

from tests.helpers import run_cli, run_on, write_set


def tree(root):
    write_set(root, "top", 1, model="top")
    write_set(root / "nvidia", "nv", 1, model="nv")
    write_set(root / "amd" / "mi400", "amd", 1, model="amd")
    write_set(root / ".drafts", "draft", 1, model="draft")  # hidden: never read
    return root


def test_validate_r_reads_every_level_and_skips_hidden_folders(tmp_path):
    root = tree(tmp_path / "acceptance")
    flat = run_cli("validate", root)
    assert flat.exit_code == 0
    assert "1 file(s), 1 set(s)" in flat.stderr
    assert "subfolder with 1 YAML file(s) skipped: folders are read one level deep, not " \
        "recursively; add -r, or pass it as a PATH of its own, to read them" in flat.stderr
    deep = run_cli("validate", "-r", root)
    assert deep.exit_code == 0
    assert deep.stderr == "3 file(s), 3 set(s), 3 profile(s): valid\n"


def test_a_folder_whose_files_are_all_below_says_to_add_r(tmp_path):
    root = tmp_path / "acceptance"
    write_set(root / "lab", "lab", 1)
    result = run_cli("validate", root)
    assert result.exit_code == 1
    assert "the folder holds no *.yaml or *.yml file (add -r to read its subfolders)" in \
        result.stderr
    assert run_cli("validate", "-r", root).exit_code == 0


def test_import_r_imports_every_level(db_url, tmp_path):
    root = tree(tmp_path / "acceptance")
    result = run_on(db_url, "import", "-r", "--json", str(root))
    assert result.exit_code == 0, result.stderr
    assert sorted(s["name"] for s in json.loads(result.stdout)["sets"]) == ["amd", "nv", "top"]
    again = run_on(db_url, "import", "-r", "--json", str(root))
    assert {s["status"] for s in json.loads(again.stdout)["sets"]} == {"unchanged"}
    flat = run_on(db_url, "import", "--json", "--prune", str(root))
    assert {s["name"]: s["status"] for s in json.loads(flat.stdout)["sets"]} == {
        "top": "unchanged", "amd": "deleted", "nv": "deleted"}
