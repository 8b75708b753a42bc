"""The acceptance-curve picture, read from the figure's artists rather than its pixels.

No database: a :class:`Coverage` is built by hand, so each test states the grid it draws. The
command line, on both backends, is in tests/db/test_pictures_cli.py.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import pytest

from registry_db.analyze.coverage import Cell, Coverage, Entry, Row, Selection
from registry_db.analyze.plot import (
    DPI,
    MAX_LINES_PER_PANEL,
    build_figure,
    curves,
    require_matplotlib,
    save_figure,
)
from registry_db.errors import MissingExtra, RegistryError
from tests.helpers import png_size

pytest.importorskip("matplotlib")


def grid(stored: dict[tuple, dict[int, list[tuple]]], sets: tuple[str, ...] = ("s",),
         selection: Selection | None = None) -> Coverage:
    """A Coverage of the rows in ``stored``: key -> {K: [(set, AL, method), ...]}."""
    max_k = max(k for cells in stored.values() for k in cells)
    rows = tuple(Row(*key, cells=tuple(
        Cell(k, tuple(Entry(*e) for e in cells.get(k, []))) for k in range(1, max_k + 1)))
        for key, cells in sorted(stored.items()))
    return Coverage(selection=selection or Selection(), max_k=max_k, rows=rows, sets=sets)


def m(al: float, method: str = "measured", set_name: str = "s") -> list[tuple]:
    return [(set_name, al, method)]


#: Two lines with a hole each, one copied point, and one empty row (nothing to draw).
HOLES = grid({
    ("m1", "eagle", "off", "coding"): {1: m(1.8), 2: m(2.4), 4: m(3.1), 5: m(3.4),
                                       6: m(3.5, "copied")},
    ("m1", "eagle", "on", "coding"): {2: m(2.0, "assumed")},
    ("m1", "eagle", "on", "chat"): {},
    ("m2", "mtp", "on", "coding"): {1: m(1.9), 2: m(2.6), 3: m(3.0)},
})


def by_gid(fig, prefix: str) -> dict[str, list]:
    """Line artists of every axes whose gid starts with ``prefix:``, by the rest of the gid."""
    out: dict[str, list] = {}
    for ax in fig.axes:
        for line in ax.lines:
            gid = line.get_gid() or ""
            if gid.startswith(prefix + ":"):
                out.setdefault(gid.split(":", 1)[1], []).append(line)
    return out


def ks(line) -> list[int]:
    """The K of each of a line's points."""
    return [round(x) for x in line.get_xdata()]


def test_one_line_per_model_method_and_thinking():
    fig = build_figure(HOLES)
    assert sorted(by_gid(fig, "points")) == [
        "m1 · eagle · thinking off", "m1 · eagle · thinking on", "m2 · mtp · thinking on"]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["m1 · eagle · thinking off", "m1 · eagle · thinking on",
                      "m2 · mtp · thinking on", "ceiling K + 1: every draft accepted",
                      "hollow: not measured (assumed, copied)"]


def test_no_line_is_drawn_across_a_missing_k():
    fig = build_figure(HOLES)
    segments = by_gid(fig, "segment")
    # By K (a point that would hide another is dodged a little sideways of its K).
    assert [ks(s) for s in segments["m1 · eagle · thinking off"]] == [[1, 2], [4, 5, 6]]
    assert [ks(s) for s in segments["m2 · mtp · thinking on"]] == [[1, 2, 3]]
    assert "m1 · eagle · thinking on" not in segments  # one point: a marker, no line


def test_markers_only_at_stored_points_filled_when_measured():
    points = by_gid(build_figure(HOLES), "points")["m1 · eagle · thinking off"]
    filled, hollow = points
    assert ks(filled) == [1, 2, 4, 5] and filled.get_linestyle() == "None"
    assert list(hollow.get_xdata()) == [6] and list(hollow.get_ydata()) == [3.5]
    assert filled.get_markerfacecolor() == filled.get_color()
    assert hollow.get_markerfacecolor() == "white"


def test_ceiling_axes_and_title():
    fig = build_figure(HOLES)
    ax = fig.axes[0]
    (ceiling,) = [line for line in ax.lines if line.get_gid() == "ceiling"]
    assert ceiling.get_linestyle() == "--"
    xs, ys = ceiling.get_xdata(), ceiling.get_ydata()
    assert [y - x for x, y in zip(xs, ys)] == [1, 1]
    assert xs[0] < 1 and xs[-1] > 6  # the ceiling spans every K shown
    assert ax.get_xlabel() == "K, draft tokens per step"
    assert ax.get_ylabel() == "acceptance length AL, tokens per step"
    assert fig.get_suptitle() == "Acceptance length against K"
    # The chat row has no stored point, so the picture is of coding only.
    assert ax.get_title() == "set s · category coding"


def test_the_title_names_sets_category_and_filters():
    cov = grid({("m1", "eagle", "off", "coding"): {1: m(1.8, set_name="a"),
                                                   2: m(2.4, set_name="b")}},
               sets=("a", "b"), selection=Selection(speculative_method="eagle",
                                                    category="coding", sets=("a", "b")))
    assert build_figure(cov).axes[0].get_title() == "sets a, b · category coding · method 'eagle'"


def test_a_key_held_by_two_sets_is_two_lines():
    cov = grid({("m1", "eagle", "off", "coding"): {
        1: [("a", 1.8, "measured"), ("b", 1.7, "literature")], 2: m(2.4, set_name="a")}},
        sets=("a", "b"))
    assert [(c.profile_set, [p.k for p in c.points]) for c in curves(cov)] == [
        ("a", [1, 2]), ("b", [1])]
    assert sorted(by_gid(build_figure(cov), "points")) == [
        "m1 · eagle · thinking off · [a]", "m1 · eagle · thinking off · [b]"]


def test_several_categories_name_theirs():
    cov = grid({("m1", "eagle", "off", "chat"): {1: m(1.5)},
                ("m1", "eagle", "off", "coding"): {1: m(1.8)}})
    assert [c.label() for c in curves(cov)] == ["m1 · eagle · thinking off · chat",
                                                "m1 · eagle · thinking off · coding"]


def test_more_than_a_dozen_lines_become_one_panel_per_model():
    stored = {(f"model-{i % 3}", f"method-{i}", t, "coding"): {1: m(1.5), 2: m(2.0)}
              for i in range(7) for t in ("off", "on")}
    cov = grid(stored)
    assert len(curves(cov)) == 14 > MAX_LINES_PER_PANEL
    fig = build_figure(cov)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title(loc="left") for ax in panels] == ["model-0", "model-1", "model-2"]
    assert len(by_gid(fig, "points")) == 14
    assert [len({ln.get_gid() for ln in ax.lines if ln.get_gid().startswith("points:")})
             for ax in panels] == [6, 4, 4]
    # A dozen lines or fewer stay on one panel.
    assert len(build_figure(grid(dict(list(stored.items())[:12]))).axes) == 1


def test_png_and_svg_by_suffix(tmp_path):
    fig = build_figure(HOLES)
    width, height = (round(v * DPI) for v in fig.get_size_inches())
    png = save_figure(fig, tmp_path / "curves.png")
    assert png_size(png.read_bytes()) == (width, height) == (1200, 780)
    svg = save_figure(fig, tmp_path / "curves.SVG")
    root = ET.parse(svg).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("width"), root.get("height")) == ("576pt", "374.4pt")
    # No date in the file: the same picture regenerates byte for byte.
    again = save_figure(build_figure(HOLES), tmp_path / "again.png")
    assert again.read_bytes() == png.read_bytes()


def test_another_suffix_is_refused(tmp_path):
    with pytest.raises(RegistryError, match=r"curves\.jpg: the picture's format follows its "
                                            r"suffix; use \.png or \.svg"):
        save_figure(build_figure(HOLES), tmp_path / "curves.jpg")
    assert not (tmp_path / "curves.jpg").exists()


def test_without_matplotlib_the_error_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what `import` sees when it is absent
    with pytest.raises(MissingExtra) as info:
        require_matplotlib()
    assert "pip install 'registry_db[plot]'" in str(info.value)
    assert "pip install -e '.[plot]'" in str(info.value)
    with pytest.raises(MissingExtra):
        build_figure(HOLES)


def test_a_crowded_panel_says_how_to_narrow_it_instead_of_naming_every_line():
    stored = {("m1", f"method-{i}", t, "coding"): {1: m(1.5), 2: m(2.0)}
              for i in range(7) for t in ("off", "on")}
    fig = build_figure(grid(stored))
    assert len(fig.axes) == 1 and len(by_gid(fig, "points")) == 14
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["14 lines: narrow with --method, --thinking or --category",
                      "ceiling K + 1: every draft accepted"]


def test_a_long_list_of_sets_is_shortened_in_the_title():
    cov = grid({("m1", "eagle", "off", "coding"): {1: m(1.8, set_name="a")}},
               sets=("a", "b", "c", "d", "e"))
    assert build_figure(cov).axes[0].get_title() == "sets a, b, c and 2 more · category coding"


def test_many_categories_are_counted_in_the_title():
    cov = grid({("m1", "eagle", "off", f"cat{i}"): {1: m(1.5)} for i in range(5)})
    assert build_figure(cov).axes[0].get_title() == "set s · 5 categories"


# --- issue 28.11: an axis fitted to the data, markers and labels that stay apart -----------------

def _ceiling(ax) -> list:
    return [line for line in ax.lines if line.get_gid() == "ceiling"]


def test_the_y_axis_fits_the_data_and_the_ceiling_is_drawn_only_when_near():
    ax = build_figure(HOLES).axes[0]
    low, high = ax.get_ylim()
    assert 1.0 <= low < 1.8 and 3.5 < high < 4.5  # not up to K + 1 = 7
    assert _ceiling(ax)  # at K 1 and 2 the values come within reach of it
    far = grid({("m1", "eagle", "off", "coding"): {5: m(1.4), 6: m(1.5)}})
    ax = build_figure(far).axes[0]
    assert ax.get_ylim()[1] < 2.5
    assert _ceiling(ax) == []
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("ceiling" in t for t in legend)


def test_coincident_markers_are_dodged_apart():
    cov = grid({("m1", "eagle", "off", "coding"): {
        1: [("a", 1.8, "measured"), ("b", 1.8, "literature")], 2: m(2.4, set_name="a")},
        ("m2", "mtp", "off", "coding"): {3: m(2.9)}}, sets=("a", "b", "s"))
    points = by_gid(build_figure(cov), "points")
    xa = points["m1 · eagle · thinking off · [a]"][0].get_xdata()
    xb = points["m1 · eagle · thinking off · [b]"][0].get_xdata()
    assert xa[0] != xb[0] and abs(xa[0] - 1) < 0.2 and abs(xb[0] - 1) < 0.2
    # A line that meets no other is not moved.
    assert list(points["m2 · mtp · thinking off"][0].get_xdata()) == [3]


def _labels(fig) -> dict[str, tuple[float, float]]:
    """Each value label's text and its offset from its point, in points."""
    return {t.get_text(): tuple(t.xyann) for ax in fig.axes for t in ax.texts
            if t.get_gid() == "value"}


def test_value_labels_stay_when_two_points_are_close():
    cov = grid({("m1", "dspark", "off", "coding"): {5: m(4.07)},
                ("m1", "dspark", "on", "coding"): {5: m(4.0)},
                ("m2", "mtp", "on", "coding"): {3: m(2.99)}})
    labels = _labels(build_figure(cov))
    assert set(labels) == {"4.07", "4.0", "2.99"}
    # The higher point's label above it, the lower's below: they cannot overlap.
    assert labels["4.07"][1] > 0 > labels["4.0"][1]


def test_long_names_are_shortened_in_the_legend():
    long = "a-model-with-a-name-far-too-long-for-any-legend-at-all-really"
    cov = grid({(long, "eagle3", "off", "coding"): {1: m(1.8, set_name="a-set-named-at-length"
                                                         "-by-someone-verbose")}},
               sets=("a-set-named-at-length-by-someone-verbose",))
    fig = build_figure(cov)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert all(len(t) <= 60 for t in texts), texts
    assert "…" in texts[0] and "eagle3" in texts[0]
    # The artists keep the whole name, for whoever reads them.
    assert f"{long} · eagle3 · thinking off" in by_gid(fig, "points")


def test_svg_text_stays_text(tmp_path):
    svg = save_figure(build_figure(HOLES), tmp_path / "curves.svg").read_text()
    root = ET.fromstring(svg)
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "Acceptance length against K" in texts
    assert "K, draft tokens per step" in texts


def test_values_with_counts_get_196_stderr_bars_and_labels_beside_them():
    from registry_db.analyze.plot import BAR_Z
    from registry_db.model import Uncertainty

    def cell(k: int, al: float, se: float | None) -> Cell:
        u = None if se is None else Uncertainty(1000, se, True)
        return Cell(k, (Entry("s", al, "measured", u),))

    cov = Coverage(selection=Selection(), max_k=3, sets=("s",), rows=(
        Row("m1", "eagle", "off", "coding",
            cells=(cell(1, 1.8, 0.05), cell(2, 2.4, None), cell(3, 2.9, 0.1))),))
    fig = build_figure(cov)
    ax = fig.axes[0]
    (bars,) = [c for c in ax.collections if c.get_gid() == "bars:m1 · eagle · thinking off"]
    spans = [(round(seg[0][0]), seg[0][1], seg[1][1]) for seg in bars.get_segments()]
    assert spans == [(1, pytest.approx(1.8 - BAR_Z * 0.05), pytest.approx(1.8 + BAR_Z * 0.05)),
                     (3, pytest.approx(2.9 - BAR_Z * 0.1), pytest.approx(2.9 + BAR_Z * 0.1))]
    assert ax.get_ylim()[0] < 1.8 - BAR_Z * 0.05  # every bar whole inside the axis
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "bar: ±1.96 × stderr from the counts (a lower bound)" in legend
    labels = {t.get_text(): (t.get_ha(), t.get_va()) for t in ax.texts if t.get_gid() == "value"}
    assert labels == {"1.8": ("left", "center"), "2.4": ("center", "bottom"),
                      "2.9": ("left", "center")}
    # Without counts anywhere: no bars and no key for them.
    plain = build_figure(HOLES).axes[0]
    assert not [c for c in plain.collections if (c.get_gid() or "").startswith("bars:")]
