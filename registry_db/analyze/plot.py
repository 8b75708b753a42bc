"""Acceptance curves: AL against K, one line per (model, method, thinking), against K + 1.

Drawn from a :class:`~registry_db.analyze.coverage.Coverage`, so a picture shows exactly the
cells ``registry coverage`` lists. :func:`curves` turns the grid into :class:`Curve` objects
(pure, no matplotlib); :func:`build_figure` draws them and returns the Figure, whose artists
carry ``gid``s (``segment:LABEL``, ``points:LABEL``, ``ceiling``) so that tests read what was
drawn rather than pixels; :func:`save_figure` writes PNG or SVG by the file's suffix.

matplotlib is an optional extra, imported only inside these functions. The figure is a plain
``matplotlib.figure.Figure`` rendered by its own canvas: pyplot is never imported, so no backend
is switched globally and no window can open.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from registry_db.analyze.coverage import Coverage, describe
from registry_db.errors import MissingExtra, RegistryError
from registry_db.sources.render import refuse_overwrites, write_atomically

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The command that installs the extra, named in the error when it is missing.
INSTALL_HINT = "pip install 'registry_db[plot]'  (in a checkout: pip install -e '.[plot]')"
#: Above this many lines one panel becomes a tangle: one panel per model instead.
MAX_LINES_PER_PANEL = 12
#: Values are written above their points when there are at most this many and no two at one K
#: lie closer than MIN_LABEL_GAP: a sparse picture is read for its numbers, a dense one for its
#: shape (and its labels would collide).
MAX_LABELLED_POINTS = 16
MIN_LABEL_GAP = 0.35
#: What to do about a panel with more lines than a legend can name.
CROWDED_HINT = "narrow with --method, --thinking or --category"
FORMATS = {".png": "png", ".svg": "svg"}
DPI = 150
#: Marker shape by thinking mode; fill says measured or not, colour says which line.
MARKERS = {"off": "o", "on": "s"}
CEILING_COLOUR = "0.45"
SVG_SETTINGS: dict[Any, Any] = {"svg.fonttype": "none", "svg.hashsalt": "registry_db"}


@dataclass(frozen=True)
class Point:
    """A stored value on a curve."""

    k: int
    acceptance_length: float
    method: str

    @property
    def measured(self) -> bool:
        """Drawn filled when measured, hollow otherwise."""
        return self.method == "measured"


@dataclass(frozen=True)
class Curve:
    """One line: a row of the grid (or one set's share of it), its stored points by K."""

    model: str
    speculative_method: str
    thinking: str
    category: str
    profile_set: str | None
    points: tuple[Point, ...]
    #: Whether the label names the category (the picture spans several).
    show_category: bool = False

    def label(self, with_model: bool = True) -> str:
        """``model · method · thinking on`` and, where needed, the category and the set."""
        parts = [self.model] if with_model else []
        parts += [self.speculative_method, f"thinking {self.thinking}"]
        if self.show_category:
            parts.append(self.category)
        if self.profile_set:
            parts.append(f"[{self.profile_set}]")
        return " · ".join(parts)

    def segments(self) -> list[tuple[Point, ...]]:
        """Runs of consecutive K with two points or more: the only places a line is drawn."""
        runs: list[list[Point]] = []
        for p in self.points:
            if runs and runs[-1][-1].k == p.k - 1:
                runs[-1].append(p)
            else:
                runs.append([p])
        return [tuple(r) for r in runs if len(r) > 1]


def curves(coverage: Coverage) -> list[Curve]:
    """The lines to draw, in the grid's order; rows with no stored point draw nothing.

    A row whose cells several sets hold is split into one line per set, so that both curves are
    seen rather than one silently chosen.
    """
    several_categories = len(coverage.categories) > 1
    out = []
    for row in coverage.rows:
        present = [c for c in row.cells if c.present]
        if not present:
            continue
        if not any(c.shared for c in present):
            out.append(Curve(*row.key, profile_set=None, show_category=several_categories,
                             points=tuple(Point(c.k, c.entries[0].acceptance_length,
                                                c.entries[0].method) for c in present)))
            continue
        for set_name in sorted({s for c in present for s in c.sets}):
            points = tuple(Point(c.k, e.acceptance_length, e.method)
                           for c in present for e in c.entries if e.profile_set == set_name)
            out.append(Curve(*row.key, profile_set=set_name, points=points,
                             show_category=several_categories))
    return out


def require_matplotlib() -> Any:
    """The matplotlib module, or :class:`MissingExtra` naming the command that installs it."""
    try:
        return importlib.import_module("matplotlib")
    except ImportError:
        raise MissingExtra(
            f"registry plot needs matplotlib, which is not installed; install the plot extra: "
            f"{INSTALL_HINT}") from None


def title_lines(coverage: Coverage) -> tuple[str, str]:
    """The title and the line under it: which sets, which category, which filters."""
    sel = coverage.selection
    # A title names at most three sets: a long list would run off the picture.
    sets = ", ".join(coverage.sets[:3]) + (f" and {len(coverage.sets) - 3} more"
                                           if len(coverage.sets) > 3 else "")
    cats = coverage.categories
    cat = (f"category {cats[0]}" if len(cats) == 1 else f"categories {', '.join(cats)}"
           if len(cats) <= 4 else f"{len(cats)} categories")
    others = {c: v for c, v in sel.filters().items() if c != "category"}
    extra = f" · {describe(others)}" if others else ""
    if sel.as_of is not None:
        extra += f" · as of {sel.as_of.isoformat(timespec='seconds')}"
    return ("Acceptance length against K",
            f"set{'s' if len(coverage.sets) > 1 else ''} {sets} · {cat}{extra}")


def build_figure(coverage: Coverage) -> Figure:
    """The picture of ``coverage``: one panel, or one per model above a dozen lines."""
    require_matplotlib()
    from matplotlib.figure import Figure

    lines = curves(coverage)
    models = sorted({c.model for c in lines})
    multiples = len(lines) > MAX_LINES_PER_PANEL and len(models) > 1
    colours = _colours(lines)
    labelled = _sparse(lines)
    title, subtitle = title_lines(coverage)
    if not multiples:
        fig = Figure(figsize=(8, 5.2), dpi=DPI, layout="constrained")
        ax = fig.add_subplot()
        _panel(ax, lines, coverage.max_k, colours, with_model=True, labelled=labelled, size=8)
        ax.legend(handles=_handles(lines, colours, True) + _key_handles(lines),
                  loc="upper left", fontsize=9, frameon=False)
        fig.suptitle(title, fontsize=14, fontweight="bold")
        ax.set_title(subtitle, fontsize=10, color="0.35")
    else:
        ncols = min(3 if len(models) <= 9 else 4, len(models))
        nrows = -(-len(models) // ncols)
        fig = Figure(figsize=(4.4 * ncols, 3.6 * nrows + 0.9), dpi=DPI, layout="constrained")
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
        for ax, model in zip(axes, models):
            mine = [c for c in lines if c.model == model]
            _panel(ax, mine, coverage.max_k, colours, with_model=False, labelled=labelled,
                   size=6)
            ax.set_title(model, fontsize=10, loc="left")
            ax.legend(handles=_handles(mine, colours, False), loc="upper left", fontsize=7,
                      frameon=False)
            ax.label_outer()
        for ax in axes[len(models):]:
            ax.set_visible(False)
        fig.legend(handles=_key_handles(lines), loc="outside lower center",
                   ncols=3, fontsize=8, frameon=False)
        fig.suptitle(f"{title}\n{subtitle}", fontsize=12)
    return fig


def _colours(lines: Sequence[Curve]) -> dict[str, Any]:
    """One colour per line minus its thinking mode: a model's two modes share a colour and
    differ by marker, which is how readers compare them."""
    import matplotlib

    groups = sorted({_group(c) for c in lines})
    n = 10 if len(groups) <= 10 else 20
    palette = matplotlib.colormaps[f"tab{n}"]  # qualitative: colour i is palette(i)
    return {g: palette(i % n) for i, g in enumerate(groups)}


def _group(c: Curve) -> str:
    return "\0".join((c.model, c.speculative_method, c.category, c.profile_set or ""))


def _sparse(lines: Sequence[Curve]) -> bool:
    """Whether every point's value can be written beside it without collisions."""
    points = [p for c in lines for p in c.points]
    if len(points) > MAX_LABELLED_POINTS:
        return False
    by_k: dict[int, list[float]] = {}
    for p in points:
        by_k.setdefault(p.k, []).append(p.acceptance_length)
    return all(b - a >= MIN_LABEL_GAP for als in by_k.values()
               for a, b in zip(sorted(als), sorted(als)[1:]))


def _panel(ax: Axes, lines: Sequence[Curve], max_k: int, colours: dict[str, Any], *,
           with_model: bool, labelled: bool, size: float) -> None:
    """Ceiling, curves and axes of one panel."""
    from matplotlib.ticker import MaxNLocator

    lo, hi = 0.6, max_k + 0.4
    ax.plot([lo, hi], [lo + 1, hi + 1], ls=(0, (5, 4)), lw=1.2, color=CEILING_COLOUR,
            gid="ceiling", zorder=1)
    ax.fill_between([lo, hi], [lo + 1, hi + 1], [hi + 2, hi + 2], color="0.965", zorder=0,
                    lw=0)  # above the ceiling: impossible, so shaded out of the reader's way
    for c in lines:
        colour, label = colours[_group(c)], c.label(with_model)
        for seg in c.segments():
            ax.plot([p.k for p in seg], [p.acceptance_length for p in seg], color=colour,
                    lw=2, ls="-" if c.thinking == "off" else (0, (1, 1.5)),
                    gid=f"segment:{label}", zorder=2)
        for measured in (True, False):
            pts = [p for p in c.points if p.measured is measured]
            if pts:
                ax.plot([p.k for p in pts], [p.acceptance_length for p in pts], ls="none",
                        marker=MARKERS.get(c.thinking, "o"), ms=size, mew=2, color=colour,
                        mfc=colour if measured else "white", gid=f"points:{label}", zorder=3)
        if labelled:
            for p in c.points:
                # Above the point: clear of the segments, which leave it sideways.
                ax.annotate(f"{p.acceptance_length}", (p.k, p.acceptance_length),
                            xytext=(0, 9), textcoords="offset points", ha="center",
                            va="bottom", fontsize=9, color=colour)
    ax.set_xlim(lo, hi)
    ax.set_ylim(0.8, max_k + 1.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("K, draft tokens per step")
    ax.set_ylabel("acceptance length AL, tokens per step")
    ax.grid(True, color="0.9", lw=0.8, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _handles(lines: Sequence[Curve], colours: dict[str, Any], with_model: bool) -> list:
    """One legend entry per line; past a dozen, one entry saying how to narrow the picture (a
    legend of a hundred entries names nothing and squeezes the panel to nothing)."""
    from matplotlib.lines import Line2D

    if len(lines) > MAX_LINES_PER_PANEL:
        return [Line2D([], [], ls="none", label=f"{len(lines)} lines: {CROWDED_HINT}")]
    return [Line2D([], [], color=colours[_group(c)], lw=2,
                   ls="-" if c.thinking == "off" else (0, (1, 1.5)),
                   marker=MARKERS.get(c.thinking, "o"), ms=7, mew=2,
                   # Hollow only when no point is measured: the handle names the line, and
                   # the key below it explains the fill.
                   mfc=colours[_group(c)] if any(p.measured for p in c.points) else "white",
                   label=c.label(with_model)) for c in lines]


def _key_handles(lines: Sequence[Curve]) -> list:
    """What the ceiling and the fill mean (hollow only when some point is not measured)."""
    from matplotlib.lines import Line2D

    out = [Line2D([], [], color=CEILING_COLOUR, ls=(0, (5, 4)), lw=1.2,
                  label="ceiling K + 1: every draft accepted")]
    if any(not p.measured for c in lines for p in c.points):
        methods = sorted({p.method for c in lines for p in c.points if not p.measured})
        out.append(Line2D([], [], color="0.35", ls="none", marker="o", ms=7, mew=2, mfc="white",
                          label=f"hollow: not measured ({', '.join(methods)})"))
    return out


def save_figure(fig: Figure, path: str | Path, *, force: bool = False) -> Path:
    """Write ``fig`` as PNG or SVG, chosen by the suffix of ``path``, as ``export`` writes a
    set: to a temporary file renamed into place (a symlink at ``path`` is replaced, never
    followed), and an existing file of other content only with ``force``."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise RegistryError(f"{path}: the picture's format follows its suffix; "
                            f"use {' or '.join(FORMATS)}")
    # No date or version in the file, so regenerating an unchanged picture changes no bytes.
    metadata = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
    import matplotlib

    buf = io.BytesIO()
    # SVG: text stays text (searchable, selectable, restylable), and element ids come from a
    # fixed salt rather than a random one, so an unchanged picture is the same bytes.
    with matplotlib.rc_context(SVG_SETTINGS):
        fig.savefig(buf, format=fmt, metadata=metadata)
    data = buf.getvalue()
    try:
        if not force:
            refuse_overwrites([(path, data)], "choose another file with -o")
        write_atomically(path, data)
    except OSError as exc:
        raise RegistryError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
