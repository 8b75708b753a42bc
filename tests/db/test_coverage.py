"""The coverage grid on a generated registry with known holes, on SQLite and PostgreSQL.

Two sets, written as YAML and imported like any file:

- ``alpha``: m1/eagle thinking off coding at K 1, 2, 4 (measured; a hole at K 3) and K 6
  (copied); m1/eagle thinking on coding at K 2 (assumed).
- ``beta``: m1/eagle thinking off coding at K 2 (literature: both sets hold that key) and
  m2/mtp thinking on chat at K 1-3 (measured).

So the grid is 2 (model, method) pairs x 2 thinking modes x 2 categories = 8 rows, K 1-6.
"""

from __future__ import annotations

import pytest

from registry_db.analyze.coverage import Selection, read_coverage
from registry_db.errors import EmptySelection, NotFound
from registry_db.importing import write as importer
from tests.helpers import ALPHA, BETA, SEED, write_grid_set


@pytest.fixture
def holes(engine, tmp_path):
    """An engine on the generated registry above."""
    importer.import_paths(engine, [write_grid_set(tmp_path, "alpha", ALPHA),
                                   write_grid_set(tmp_path, "beta", BETA)])
    return engine


def expected_rows(stored: dict[tuple, dict[int, tuple]], keys: list[tuple], max_k: int) -> list:
    """The JSON rows: every key, every K from 1 to ``max_k``, null where nothing is stored."""
    rows = []
    for key in keys:
        cells = []
        for k in range(1, max_k + 1):
            al, method, sets, *values = stored.get(key, {}).get(k, (None, None, []))
            each = values[0] if values else [
                {"profile_set": name, "acceptance_length": al, "method": method,
                 "uncertainty": None} for name in sets]
            cells.append({"k": k, "acceptance_length": al, "method": method, "sets": sets,
                          "uncertainty": None, "values": each})
        rows.append(dict(zip(("model", "speculative_method", "thinking", "category"), key),
                         cells=cells))
    return rows


GRID_KEYS = [(m, x, t, c) for m, x in (("m1", "eagle"), ("m2", "mtp"))
             for t in ("off", "on") for c in ("chat", "coding")]


def test_json_lists_every_present_and_missing_cell(holes):
    got = read_coverage(holes).to_json()
    stored = {
        ("m1", "eagle", "off", "coding"): {
            1: (1.8, "measured", ["alpha"]),
            # Two sets hold K 2 with different values: no one value stands for the cell,
            # and each set is credited with its own.
            2: (None, None, ["alpha", "beta"], [
                {"profile_set": "alpha", "acceptance_length": 2.4, "method": "measured",
                 "uncertainty": None},
                {"profile_set": "beta", "acceptance_length": 2.5, "method": "literature",
                 "uncertainty": None}]),
            4: (3.1, "measured", ["alpha"]),
            6: (3.5, "copied", ["alpha"])},
        ("m1", "eagle", "on", "coding"): {2: (2.0, "assumed", ["alpha"])},
        ("m2", "mtp", "on", "chat"): {1: (1.9, "measured", ["beta"]),
                                      2: (2.6, "measured", ["beta"]),
                                      3: (3.0, "measured", ["beta"])},
    }
    assert got == {"rows": expected_rows(stored, GRID_KEYS, 6)}


def test_cells_know_their_marks(holes):
    cov = read_coverage(holes)
    row = {r.key: r for r in cov.rows}[("m1", "eagle", "off", "coding")]
    # Both sets' values at K 2, each with its method's mark: neither stands for the other.
    assert [c.text() for c in row.cells] == ["1.8", "2.4/2.5l*", "-", "3.1", "-", "3.5c"]
    assert [c.k for c in row.cells if c.shared] == [2]
    assert cov.sets == ("alpha", "beta")
    assert cov.marks() == ["c copied", "a assumed", "l literature",
                           "* held by several sets (resolve refuses it; pick with --set)"]


def test_one_set_is_the_registry(holes):
    """With --set beta, alpha's cells are missing, and K 2 is held by one set only."""
    cov = read_coverage(holes, Selection(sets=("beta",)))
    stored = {("m1", "eagle", "off", "coding"): {2: (2.5, "literature", ["beta"])},
              ("m2", "mtp", "on", "chat"): {k: (al, "measured", ["beta"])
                                            for k, al in ((1, 1.9), (2, 2.6), (3, 3.0))}}
    assert cov.to_json() == {"rows": expected_rows(stored, GRID_KEYS, 3)}
    assert not any(c.shared for r in cov.rows for c in r.cells)


def test_filters_narrow_rows_not_the_grid(holes):
    """--model m2 keeps m2's coding rows (empty): coding is in the registry, m2 has none."""
    cov = read_coverage(holes, Selection(model="m2"))
    assert [r.key for r in cov.rows] == [k for k in GRID_KEYS if k[0] == "m2"]
    assert cov.max_k == 3
    cov = read_coverage(holes, Selection(category="coding", thinking="on"))
    assert [r.key for r in cov.rows] == [("m1", "eagle", "on", "coding"),
                                         ("m2", "mtp", "on", "coding")]
    assert cov.max_k == 2


def test_an_empty_selection_says_what_the_registry_holds(holes):
    with pytest.raises(EmptySelection) as info:
        read_coverage(holes, Selection(model="m3"))
    assert str(info.value) == ("no stored profile matches model 'm3'. The registry holds "
                               "model: m1, m2.")
    with pytest.raises(EmptySelection) as info:
        read_coverage(holes, Selection(model="m2", category="coding"))
    assert str(info.value) == (
        "no stored profile matches model 'm2', category 'coding'. With category 'coding', "
        "the registry holds model: m1. With model 'm2', it holds category: chat.")
    with pytest.raises(EmptySelection) as info:
        read_coverage(holes, Selection(speculative_method="eagle3", sets=("alpha",)))
    assert str(info.value) == (
        "no stored profile matches method 'eagle3'. The set alpha holds method: eagle "
        "(did you mean 'eagle'?).")


def test_an_unknown_set_is_not_found(holes):
    with pytest.raises(NotFound, match="no profile set named 'gamma'; known sets: alpha, beta"):
        read_coverage(holes, Selection(sets=("gamma",)))


def test_an_empty_registry(engine):
    with pytest.raises(EmptySelection, match="the registry holds no profiles yet; add some "
                                             "with `registry import PATH`"):
        read_coverage(engine)


def test_the_seed(engine):
    importer.import_paths(engine, [SEED])
    cov = read_coverage(engine)
    assert [(r.key, [c.text() for c in r.cells]) for r in cov.rows] == [
        (("deepseek-v4.1-flash", "dspark", "off", "coding"), ["-", "-", "-", "-", "4.07"]),
        (("deepseek-v4.1-flash", "dspark", "on", "coding"), ["-", "-", "-", "-", "3.51"]),
        (("glm-5.3", "mtp", "off", "coding"), ["-", "-", "-", "-", "-"]),
        (("glm-5.3", "mtp", "on", "coding"), ["-", "-", "2.99c", "-", "-"]),
    ]


def test_sets_that_agree_show_one_value_and_sets_that_differ_show_each(engine, tmp_path):
    """4.07 held by two sets is one value, marked shared; 4.07 against 4.02 is both values, in
    the table and the JSON, each credited to its own set."""
    importer.import_paths(engine, [
        write_grid_set(tmp_path, "one", [("m", "x", 4, "off", "coding", 4.07),
                                         ("m", "x", 5, "off", "coding", 4.07)]),
        write_grid_set(tmp_path, "two", [("m", "x", 4, "off", "coding", 4.07),
                                         ("m", "x", 5, "off", "coding", 4.02, "copied")])])
    same, differ = next(r for r in read_coverage(engine).rows if r.thinking == "off").cells[3:]
    assert (same.text(), differ.text()) == ("4.07*", "4.07/4.02c*")
    assert same.to_json()["acceptance_length"] == 4.07 and same.agreed and not differ.agreed
    got = differ.to_json()
    assert (got["acceptance_length"], got["method"], got["sets"]) == (None, None, ["one", "two"])
    assert [(v["profile_set"], v["acceptance_length"], v["method"]) for v in got["values"]] == [
        ("one", 4.07, "measured"), ("two", 4.02, "copied")]
