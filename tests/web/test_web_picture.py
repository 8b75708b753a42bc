"""The picture of a page's rows: the rows themselves as registry plot's grid, drawn by its code
(read from the figure's artists, as tests/unit/test_plot.py reads them)."""

from __future__ import annotations

from registry_db.analyze import plot, web

COLUMNS = ["profile_set", "model", "speculative_method", "num_spec_tokens", "thinking",
           "category", "acceptance_length", "method", "source"]
ROWS = [
    ("a", "m1", "mtp", 1, "off", "coding", 1.8, "measured", "x"),
    ("a", "m1", "mtp", 2, "off", "coding", 2.4, "measured", "x"),
    ("a", "m1", "mtp", 3, "on", "coding", 2.9, "copied", "x"),
    ("a", "m2", "dspark", 2, "off", "coding", 2.2, "measured", "x"),
    ("b", "m2", "dspark", 2, "off", "coding", 2.3, "measured", "x"),  # two sets: two lines
    ("a", "m2", "dspark", 4, "off", "coding", None, None, None),  # a missing cell: no point
]


def test_the_rows_become_the_grid_registry_plot_draws():
    lines = {c.label(): [(p.k, p.acceptance_length, p.method) for p in c.points]
             for c in plot.curves(web._coverage(COLUMNS, ROWS))}
    assert lines == {
        "m1 · mtp · thinking off": [(1, 1.8, "measured"), (2, 2.4, "measured")],
        "m1 · mtp · thinking on": [(3, 2.9, "copied")],
        "m2 · dspark · thinking off · [a]": [(2, 2.2, "measured")],
        "m2 · dspark · thinking off · [b]": [(2, 2.3, "measured")],
    }


def test_the_picture_is_registry_plots_figure_as_png():
    png = web.picture_png(COLUMNS, ROWS)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (8 * plot.DPI, round(5.2 * plot.DPI))
    assert web.picture_png(COLUMNS, ROWS) == png  # no date in the file: same rows, same bytes


def test_rows_without_the_key_or_a_value_cannot_be_drawn():
    assert web.can_picture(COLUMNS)
    assert not web.can_picture([c for c in COLUMNS if c != "num_spec_tokens"])
    assert not web.can_picture(None)
    png = web.picture_png(COLUMNS, [ROWS[-1]])  # only a missing cell: an empty chart, not an error
    assert png[:4] == b"\x89PNG"
