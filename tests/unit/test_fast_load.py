"""The import's fast first pass (plain values, no positions) against the positional loader.

Every YAML file of the test corpus and the seed goes both ways: where the fast pass answers, its
value equals the positional loader's (aliases shared the same way); where it declines, the long
way is taken. Whole-corpus checks prove the findings, the sets and the rows do not depend on it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_db import store
from registry_db.errors import InvalidInput
from registry_db.importing.write import import_paths
from registry_db.sources import profile_set as source
from registry_db.sources.profile_set import check_paths
from registry_db.yaml.load import load_file
from registry_db.yaml.plain import load_plain, load_plain_file
from tests.helpers import dump, value_shape

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
def test_fast_pass_equals_the_positional_loader_or_declines(path):
    """Where the fast pass gives a value, the positional loader gives the same, no finding."""
    plain = load_plain_file(path)
    if plain is None:
        return  # declined: the caller takes the long way (compared below, by findings)
    located = _positional(path)
    assert located is not None, "the fast pass read a file the loader refuses"
    assert value_shape(plain) == value_shape(located)


def test_fast_pass_answers_every_valid_file_and_the_seed():
    """The comparison above is not vacuous: every valid file and seed set takes the fast pass."""
    files = sorted((DATA / "valid").iterdir()) + sorted((ROOT / "seed").rglob("*.yaml"))
    assert files and [f.name for f in files if load_plain_file(f) is None] == []


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


def _both_ways(monkeypatch, paths):
    results = []
    for fast in (True, False):
        monkeypatch.setattr(source, "FAST_PATH", fast)
        results.append(check_paths(paths))
    return results


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_findings_are_the_same_both_ways_on_every_invalid_file(monkeypatch, path):
    """Byte-identical findings on each invalid file of the corpus, fast path on or off."""
    (fast_sets, fast), (slow_sets, slow) = _both_ways(monkeypatch, [path])
    assert [f.render() for f in fast] == [f.render() for f in slow]
    assert slow and fast_sets == slow_sets


def test_sets_and_findings_are_the_same_both_ways_on_whole_folders(monkeypatch):
    """Whole folders at once (set names across files included): same sets, same findings."""
    folders = [DATA / "valid", DATA / "invalid", ROOT / "seed" / "acceptance"]
    (fast_sets, fast), (slow_sets, slow) = _both_ways(monkeypatch, folders)
    assert [f.render() for f in fast] == [f.render() for f in slow]
    assert fast_sets == slow_sets and len(fast_sets) > 10


def test_duplicate_set_name_finding_keeps_both_lines(monkeypatch, tmp_path):
    """A set name declared twice still names the first file's line when both took the fast path."""
    body = "kind: AcceptanceProfileSet\n\n\nname: twice\nprofiles: []\n"
    (tmp_path / "a.yaml").write_text(body)
    (tmp_path / "b.yaml").write_text("# another\n" + body)
    (_, fast), (_, slow) = _both_ways(monkeypatch, [tmp_path])
    rendered = [f.render() for f in fast]
    assert rendered == [f.render() for f in slow]
    assert any("(line 4)" in r and "b.yaml:5:" in r for r in rendered)


def test_rows_are_the_same_both_ways(monkeypatch, tmp_path):
    """The valid corpus and the seed, imported each way into its own SQLite file: same rows."""
    # The seed's golden set is also a valid test file under the same name: the seed once.
    paths = [DATA / "valid", *(p for p in sorted((ROOT / "seed" / "acceptance").iterdir())
                               if not (DATA / "valid" / p.name).exists())]
    dumps = []
    for fast in (True, False):
        monkeypatch.setattr(source, "FAST_PATH", fast)
        engine = store.open_registry(f"sqlite:///{tmp_path / f'{fast}.db'}")
        try:
            import_paths(engine, paths)
            dumps.append(dump(engine, skip=("profile_sets.imported_at", "revisions.imported_at",
                                            "profile_versions.valid_from",
                                            "profile_keys.valid_from")))
        finally:
            engine.dispose()
    assert dumps[0] == dumps[1] and dumps[0]["profiles"]
