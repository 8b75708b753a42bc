"""The reading rules' version (importing/unchanged.py): any edit of a rule module changes it, so a
re-import after new rules reads every file again; an edit elsewhere does not."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

import registry_db
from registry_db.importing import unchanged

PACKAGE = Path(registry_db.__file__).resolve().parent


def test_the_version_is_the_digest_of_every_rule_module():
    for pattern in unchanged._RULE_SOURCES:
        assert list(PACKAGE.glob(pattern)), pattern  # each pattern names real modules
    assert unchanged.rules_version() == unchanged.sources_digest(
        PACKAGE, unchanged._RULE_SOURCES, f"{unchanged.RULES}\0{yaml.__version__}")


def test_an_edited_rule_changes_it_and_an_edit_elsewhere_does_not(tmp_path):
    copy = tmp_path / "registry_db"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))

    def version() -> str:
        return unchanged.sources_digest(copy, unchanged._RULE_SOURCES, "salt")

    first = version()
    assert first == unchanged.sources_digest(PACKAGE, unchanged._RULE_SOURCES, "salt")
    with open(copy / "store" / "write.py", "a") as fh:
        fh.write("\n# not a reading rule\n")
    assert version() == first
    for rule in ("inputs/profile_set.py", "yaml/load.py", "sources/profile_set.py", "model.py"):
        with open(copy / rule, "a") as fh:
            fh.write("\n# a new rule\n")
        assert version() != first, rule
        first = version()
    assert unchanged.sources_digest(copy, unchanged._RULE_SOURCES, "other") != first
