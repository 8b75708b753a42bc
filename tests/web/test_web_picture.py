"""The picture of a page's rows: the rows themselves as registry plot's grid, drawn by its code
(read from the figure's artists, as tests/unit/test_plot.py reads them)."""

from __future__ import annotations

import asyncio

import pytest

from registry_db.analyze import plot, web
from registry_db.analyze.web_render import PictureRefused, Renderer
from registry_db.model import MAX_K

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


# --- bounds: a picture past one is refused before it is drawn ----------------------------------

def _rows(count: int, models: int = 1, k: int = 2) -> list[tuple]:
    return [("a", f"m{i % models}", "mtp", 1 + i % k, "off", f"c{i}", 1.5, "measured", "x")
            for i in range(count)]


def test_a_k_past_the_spec_is_refused_at_once():
    """K 10,000,000 took 14.8 s and 1.46 GB to draw: the grid holds a cell per K."""
    rows = [("a", "m1", "mtp", 10_000_000, "off", "coding", 2.0, "measured", "x")]
    with pytest.raises(plot.PictureTooLarge, match=r"K 10000000 is more than a picture draws"):
        web.picture_png(COLUMNS, rows)
    with pytest.raises(plot.PictureTooLarge, match="K 65 is more"):
        web.check_picture(COLUMNS, [(*r[:3], 65, *r[4:]) for r in rows])
    web.check_picture(COLUMNS, [(*r[:3], MAX_K, *r[4:]) for r in rows])


def test_too_many_rows_panels_lines_or_points_are_refused():
    with pytest.raises(plot.PictureTooLarge, match="1001 rows are more"):
        web.check_picture(COLUMNS, _rows(1001))
    web.check_picture(COLUMNS, _rows(1000))
    with pytest.raises(plot.PictureTooLarge, match=r"37 models would be 37 panels"):
        plot.check_size(web._coverage(COLUMNS, _rows(37 * 2, models=37)))
    plot.check_size(web._coverage(COLUMNS, _rows(36 * 2, models=36)))
    with pytest.raises(plot.PictureTooLarge, match=r"401 lines are more"):
        plot.check_size(web._coverage(COLUMNS, _rows(401, models=1)))


def test_registry_plot_is_bounded_by_the_same_rule(monkeypatch):
    """``registry plot`` draws through build_figure, which checks the bounds first."""
    monkeypatch.setattr(plot, "MAX_PANELS", 2)
    with pytest.raises(plot.PictureTooLarge, match="3 models would be 3 panels"):
        plot.build_figure(web._coverage(COLUMNS, _rows(13, models=3)))


# --- the worker: off the event loop, within a time and a memory limit --------------------------

def test_the_worker_draws_what_the_server_would():
    renderer = Renderer()
    try:
        assert asyncio.run(renderer.png(COLUMNS, ROWS)) == web.picture_png(COLUMNS, ROWS)
        with pytest.raises(PictureRefused, match="K 10000000"):
            asyncio.run(renderer.png(COLUMNS, [(*ROWS[0][:3], 10_000_000, *ROWS[0][4:])]))
    finally:
        renderer.stop()


def test_a_picture_past_the_time_limit_is_stopped_and_the_next_is_drawn():
    slow = Renderer(time_limit=0.01)  # less than starting matplotlib takes
    try:
        with pytest.raises(PictureRefused, match=r"took more than 0.01 s and was stopped"):
            asyncio.run(slow.png(COLUMNS, _rows(72, models=36)))
        assert slow._process is None  # killed, not left drawing
        slow.time_limit = 600
        assert asyncio.run(slow.png(COLUMNS, ROWS))[:4] == b"\x89PNG"
    finally:
        slow.stop()


def test_a_picture_past_the_memory_limit_is_refused():
    small = Renderer(memory_limit=64 * 2**20)  # less than matplotlib and numpy need
    try:
        with pytest.raises(PictureRefused, match=r"memory a picture may take \(64 MiB\)"):
            asyncio.run(small.png(COLUMNS, ROWS))
    finally:
        small.stop()
