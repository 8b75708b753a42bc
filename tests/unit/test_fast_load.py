"""The import's fast first pass (plain values, no positions) against the positional loader.

Every YAML file of the test corpus and the seed goes each way: ``ryaml`` behind its byte guard
(:mod:`registry_db.yaml.fast`), libyaml's events (:mod:`registry_db.yaml.plain`, ``ryaml``
switched off) and the positional loader. Where a fast pass answers, its value equals the
loader's (the libyaml pass shares aliases the same way; ``ryaml`` copies them); where it
declines, the long way is taken. Whole-corpus checks prove the findings, the sets and the rows
do not depend on it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.errors import InvalidInput
from registry_db.importing.write import import_paths
from registry_db.sources import profile_set as source
from registry_db.sources.profile_set import check_paths
from registry_db.yaml import fast as fast_yaml
from registry_db.yaml.load import load_file
from registry_db.yaml.plain import load_plain, load_plain_file
from tests.helpers import dump, typed_value, value_shape

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CORPUS = sorted(p for folder in (DATA, ROOT / "seed") for p in folder.rglob("*")
                if p.suffix in (".yaml", ".yml"))
INVALID = sorted((DATA / "invalid").iterdir())


def _positional(path: Path):
    try:
        return load_file(path)
    except InvalidInput:
        return None


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(ROOT)))
def test_fast_pass_equals_the_positional_loader_or_declines(path, monkeypatch):
    """Where the libyaml pass gives a value, the positional loader gives the same (aliases
    shared alike), no finding."""
    monkeypatch.setattr(fast_yaml, "RAPID", False)
    plain = load_plain_file(path)
    if plain is None:
        return  # declined: the caller takes the long way (compared below, by findings)
    located = _positional(path)
    assert located is not None, "the fast pass read a file the loader refuses"
    assert value_shape(plain) == value_shape(located)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(ROOT)))
def test_rapid_pass_equals_the_positional_loader_or_declines(path):
    """Where ``ryaml`` gives a value, the positional loader gives the same value, no finding."""
    rapid = fast_yaml.load_rapid(path.read_bytes())
    if rapid is None:
        return
    located = _positional(path)
    assert located is not None, "the rapid pass read a file the loader refuses"
    assert typed_value(rapid) == typed_value(located)


def test_fast_passes_answer_the_valid_files_and_the_seed(monkeypatch):
    """The comparisons above are not vacuous: every valid file and seed set takes the libyaml
    pass, and ``ryaml`` takes each one its byte guard passes: most of them."""
    files = sorted((DATA / "valid").iterdir()) + sorted((ROOT / "seed").rglob("*.yaml"))
    guarded = [f.name for f in files if fast_yaml.risk(f.read_bytes()) is not None]
    assert [f.name for f in files if load_plain_file(f) is None] == []
    assert [f.name for f in files if fast_yaml.load_rapid(f.read_bytes()) is None] == guarded
    assert len(guarded) * 2 < len(files)
    monkeypatch.setattr(fast_yaml, "RAPID", False)
    assert [f.name for f in files if load_plain_file(f) is None] == []
    assert all(fast_yaml.load_rapid(f.read_bytes()) is None for f in files)


@pytest.mark.parametrize("text", [
    "a: 1\na: 2\n",                      # duplicate key
    "? [a]\n: 1\n",                      # complex key
    "a: !!python/name:os.system x\n",    # a tag
    "a: !!str 1\n",                      # even a standard one: the loader's rules apply
    "a: *nowhere\n",                     # unknown alias
    "a: &x [*x]\n",                      # recursive alias
    "a: [1\n",                           # syntax error
    "a: 1\n---\nb: 2\n",                 # two documents
    "",                                  # no document
    "a: 0x\u0007\n",                     # a control character
    "a: !!int 1.5\n",                    # a bad tagged value
])
def test_fast_pass_declines_what_the_loader_reports(text):
    """Anything that may draw a loader finding is left to the positional loader."""
    assert load_plain(text) is None


def test_fast_pass_declines_an_alias_bomb():
    """Alias expansion is counted as the loader counts it."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    assert load_plain("\n".join(lines) + "\n") is None


#: The three ways of reading a file: (ryaml first, libyaml's events first, positions only).
WAYS = {"ryaml": (True, True), "libyaml": (True, False), "positional": (False, False)}


def _set_way(monkeypatch, way):
    fast_path, rapid = WAYS[way]
    monkeypatch.setattr(source, "FAST_PATH", fast_path)
    monkeypatch.setattr(fast_yaml, "RAPID", rapid)


def _each_way(monkeypatch, paths):
    """``check_paths`` each way: the sets and rendered findings, by way."""
    results = {}
    for way in WAYS:
        _set_way(monkeypatch, way)
        sets, findings = check_paths(paths)
        results[way] = (sets, [f.render() for f in findings])
    return results


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_findings_are_the_same_each_way_on_every_invalid_file(monkeypatch, path):
    """Byte-identical findings on each invalid file of the corpus, whichever pass reads it."""
    results = _each_way(monkeypatch, [path])
    assert results["positional"][1]
    assert results["ryaml"] == results["libyaml"] == results["positional"]


def test_sets_and_findings_are_the_same_each_way_on_whole_folders(monkeypatch):
    """Whole folders at once (set names across files included): same sets, same findings."""
    folders = [DATA / "valid", DATA / "invalid", ROOT / "seed" / "acceptance"]
    results = _each_way(monkeypatch, folders)
    assert results["ryaml"] == results["libyaml"] == results["positional"]
    assert len(results["ryaml"][0]) > 10


def test_duplicate_set_name_finding_keeps_both_lines(monkeypatch, tmp_path):
    """A set name declared twice still names the first file's line when both took the fast path."""
    body = "kind: AcceptanceProfileSet\n\n\nname: twice\nprofiles: []\n"
    (tmp_path / "a.yaml").write_text(body)
    (tmp_path / "b.yaml").write_text("# another\n" + body)
    results = _each_way(monkeypatch, [tmp_path])
    rendered = results["ryaml"][1]
    assert rendered == results["libyaml"][1] == results["positional"][1]
    assert any("(line 4)" in r and "b.yaml:5:" in r for r in rendered)


def _generated(folder):
    """A generated registry (benchmarks/generate.py): every other file shares provenances by
    anchors and aliases, which ``ryaml`` copies where the loader shares."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import generate
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    paths = generate.write_registry(generate.default_layout(2_000, 4, seed=5), folder)
    assert any(b"*" in p.read_bytes() for p in paths)
    return folder


def test_values_and_content_hashes_are_the_same_each_way(monkeypatch, tmp_path):
    """The valid corpus, the seed and a generated registry with aliases, imported each way into
    its own SQLite file: the same rows, so the same values and content hashes of every set."""
    # The seed's golden set is also a valid test file under the same name: the seed once.
    paths = [DATA / "valid", *(p for p in sorted((ROOT / "seed" / "acceptance").iterdir())
                               if not (DATA / "valid" / p.name).exists()),
             _generated(tmp_path / "generated")]
    dumps, hashes = {}, {}
    for way in WAYS:
        _set_way(monkeypatch, way)
        engine = store.open_registry(f"sqlite:///{tmp_path / f'{way}.db'}")
        try:
            import_paths(engine, paths)
            dumps[way] = dump(engine, skip=("profile_sets.imported_at", "revisions.imported_at",
                                            "profile_versions.valid_from",
                                            "profile_keys.valid_from"))
            with engine.connect() as conn:
                hashes[way] = sorted(conn.execute(text(
                    "SELECT name, content_hash FROM profile_sets")).all())
        finally:
            engine.dispose()
    assert dumps["ryaml"] == dumps["libyaml"] == dumps["positional"]
    assert hashes["ryaml"] == hashes["libyaml"] == hashes["positional"]
    assert len(hashes["ryaml"]) > 10 and dumps["ryaml"]["profiles"]
