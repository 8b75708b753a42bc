"""Acceptance curves: AL against K, one line per (model, method, thinking), under K + 1.

Drawn from a :class:`~registry_db.analyze.coverage.Coverage`, so a picture shows exactly the
cells ``registry coverage`` lists. :func:`curves` turns the grid into :class:`Curve` objects
(pure, no matplotlib); :func:`build_figure` draws them and returns the Figure, whose artists
carry ``gid``s (``segment:LABEL``, ``points:LABEL``, ``bars:LABEL``, ``ceiling``) so that tests
read what was
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
from registry_db.analyze.readable import readable
from registry_db.errors import MissingExtra, RegistryError
from registry_db.model import MAX_K
from registry_db.yaml.render import refuse_overwrites, write_atomically

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The command that installs the extra, named in the error when it is missing.
INSTALL_HINT = "pip install 'registry_db[plot]'  (in a checkout: pip install -e '.[plot]')"
#: Above this many lines one panel becomes a tangle: one panel per model instead.
MAX_LINES_PER_PANEL = 12
#: Values are written beside their points when there are at most this many: a sparse picture
#: is read for its numbers, a dense one for its shape.
MAX_LABELLED_POINTS = 16
#: The y-axis spans the data plus these fractions of its span (room for labels above and
#: below), and at least MIN_SPAN of AL, so that one point or a flat curve still has an axis.
PAD_ABOVE, PAD_BELOW, MIN_SPAN = 0.24, 0.16, 0.5
#: About how tall a panel's plotting area is, in points (single panel, small multiple): how
#: far apart in AL two markers or two labels must be not to touch.
AXES_HEIGHT = {True: 300.0, False: 190.0}
AXES_WIDTH = {True: 500.0, False: 250.0}
#: How far (in K) a dodged marker may move from its K, at most.
MAX_DODGE = 0.3
#: How tall one legend entry is, in points (single panel, small multiple).
LEGEND_ENTRY = {True: 14.0, False: 11.0}
#: A legend entry longer than this (characters) is shortened in the middle of its longest parts.
LEGEND_CHARS = {True: 56, False: 34}
#: What to do about a panel with more lines than a legend can name.
CROWDED_HINT = "narrow with --method, --thinking or --category"
#: The most panels a picture draws (one per model past a dozen lines): 36 took about 5 s of
#: CPU, and the cost grows with each (96 took 19 s, docs/decisions.md).
MAX_PANELS = 36
#: The most lines and points a picture draws.
MAX_LINES, MAX_POINTS = 400, 2000
FORMATS = {".png": "png", ".svg": "svg"}
DPI = 150
#: A value with counts gets a bar of this many standard errors each way (a 95% interval, were
#: the steps independent; docs/uncertainty.md says why it is narrower than the truth).
BAR_Z = 1.96
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
    #: The AL's standard error, from the profile's counts (None: no counts, no bar).
    stderr: float | None = None

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
                             points=tuple(_point(c.k, c.entries[0]) for c in present)))
            continue
        for set_name in sorted({s for c in present for s in c.sets}):
            points = tuple(_point(c.k, e) for c in present for e in c.entries
                           if e.profile_set == set_name)
            out.append(Curve(*row.key, profile_set=set_name, points=points,
                             show_category=several_categories))
    return out


def _point(k: int, entry: Any) -> Point:
    u = entry.uncertainty
    return Point(k, entry.acceptance_length, entry.method, None if u is None else u.stderr)


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


class PictureTooLarge(RegistryError):
    """A picture past one of the bounds (K, panels, lines, points): drawing it would take
    minutes and gigabytes, and show nothing a reader could tell apart."""


def check_size(coverage: Coverage, lines: Sequence[Curve] | None = None) -> None:
    """Refuse a picture past a bound, saying which and how to narrow it (before any drawing:
    the grid holds a cell per K, so a K of ten million costs gigabytes to draw)."""
    if coverage.max_k > MAX_K:
        raise PictureTooLarge(f"K {coverage.max_k} is more than a picture draws (K is at most "
                              f"{MAX_K}); narrow the rows")
    lines = curves(coverage) if lines is None else lines
    models = {c.model for c in lines}
    points = sum(len(c.points) for c in lines)
    for what, count, bound in (("lines", len(lines), MAX_LINES),
                               ("points", points, MAX_POINTS)):
        if count > bound:
            raise PictureTooLarge(f"{count} {what} are more than a picture draws (at most "
                                  f"{bound}); narrow the rows, e.g. to one model or method")
    if len(lines) > MAX_LINES_PER_PANEL and len(models) > MAX_PANELS:
        raise PictureTooLarge(f"{len(models)} models would be {len(models)} panels, more than a "
                              f"picture draws (at most {MAX_PANELS}); narrow the rows to fewer "
                              "models")


def build_figure(coverage: Coverage) -> Figure:
    """The picture of ``coverage``: one panel, or one per model above a dozen lines;
    :class:`PictureTooLarge` past a bound (:func:`check_size`)."""
    require_matplotlib()
    lines = curves(coverage)
    check_size(coverage, lines)
    from matplotlib.figure import Figure

    models = sorted({c.model for c in lines})
    multiples = len(lines) > MAX_LINES_PER_PANEL and len(models) > 1
    colours = _colours(lines)
    labelled = sum(len(c.points) for c in lines) <= MAX_LABELLED_POINTS
    if not multiples:
        entries = len(_handles(lines, colours, True)) + len(_key_handles(lines))
    else:
        entries = max(len(_handles([c for c in lines if c.model == m], colours, False))
                      for m in models)
    ylim = _y_limits(lines, entries, single=not multiples)
    title, subtitle = title_lines(coverage)
    if not multiples:
        fig = Figure(figsize=(8, 5.2), dpi=DPI, layout="constrained")
        ax = fig.add_subplot()
        ceiling = _panel(ax, lines, coverage.max_k, colours, with_model=True,
                         labelled=labelled, size=8, ylim=ylim, single=True)
        ax.legend(handles=_handles(lines, colours, True) + _key_handles(lines, ceiling),
                  loc="upper left", fontsize=9, frameon=False)
        fig.suptitle(title, fontsize=14, fontweight="bold")
        ax.set_title(subtitle, fontsize=10, color="0.35")
    else:
        ncols = min(3 if len(models) <= 9 else 4, len(models))
        nrows = -(-len(models) // ncols)
        fig = Figure(figsize=(4.4 * ncols, 3.6 * nrows + 0.9), dpi=DPI, layout="constrained")
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
        any_ceiling = False
        for ax, model in zip(axes, models):
            mine = [c for c in lines if c.model == model]
            any_ceiling |= _panel(ax, mine, coverage.max_k, colours, with_model=False,
                                  labelled=labelled, size=6, ylim=ylim, single=False)
            ax.set_title(model, fontsize=10, loc="left")
            ax.legend(handles=_handles(mine, colours, False), loc="upper left", fontsize=7,
                      frameon=False)
            ax.label_outer()
        for ax in axes[len(models):]:
            ax.set_visible(False)
        fig.legend(handles=_key_handles(lines, any_ceiling), loc="outside lower center",
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


def _y_limits(lines: Sequence[Curve], legend_entries: int, single: bool,
              ) -> tuple[float, float]:
    """The y-axis fitted to the stored values (not to K + 1: a K of 8 would squeeze values
    of 2 to 4 into the bottom third), never below AL 0.9, with room above the highest value
    for its label and for the legend in the upper left, so that the legend covers no value."""
    # A bar's ends count as values: the axis holds every bar whole.
    als = [p.acceptance_length + side * BAR_Z * (p.stderr or 0.0)
           for c in lines for p in c.points for side in (-1, 1)] or [1.0, 2.0]
    low, high = min(als), max(als)
    span = max(high - low, MIN_SPAN)
    middle = (low + high) / 2
    low, high = min(low, middle - span / 2), max(high, middle + span / 2)
    bottom = max(0.9, low - PAD_BELOW * span)
    # The legend's height and a label's, in points, above the highest value: solve
    # room * H / (high - bottom + room) >= needed for the room in AL.
    needed = legend_entries * LEGEND_ENTRY[single] + 28
    height = AXES_HEIGHT[single]
    room = needed * (high - bottom) / max(height - needed, height / 3)
    return bottom, high + max(room, PAD_ABOVE * span)


def _dodged(lines: Sequence[Curve], ylim: tuple[float, float], size: float,
            max_k: int, single: bool) -> dict[tuple[int, int], float]:
    """``(line index, K) -> x`` for the points that would sit on another line's point (the
    same K, closer in AL than a marker is tall): spread sideways by about a marker's width,
    so that no series hides behind another. Every other point stays at its K."""
    per_al = AXES_HEIGHT[single] / (ylim[1] - ylim[0])  # points of height per unit of AL
    per_k = AXES_WIDTH[single] / (max_k + 0.8)  # points of width per K
    touching = (size + 6) / per_al  # a marker, its edge and a little air
    step = min((size + 3) / per_k, 0.25)
    by_k: dict[int, list[tuple[float, int]]] = {}
    for i, c in enumerate(lines):
        for p in c.points:
            by_k.setdefault(p.k, []).append((p.acceptance_length, i))
    out: dict[tuple[int, int], float] = {}
    for k, found in by_k.items():
        found.sort()
        clusters: list[list[tuple[float, int]]] = []
        for al, i in found:
            if clusters and al - clusters[-1][-1][0] < touching:
                clusters[-1].append((al, i))
            else:
                clusters.append([(al, i)])
        for cluster in clusters:
            if len(cluster) > 1:
                # Many alike stay within 0.3 of their K (overlapping a little, still seen).
                spread = min(step, 2 * MAX_DODGE / (len(cluster) - 1))
                for n, (_, i) in enumerate(cluster):
                    out[(i, k)] = k + (n - (len(cluster) - 1) / 2) * spread
    return out


#: Where a value label goes: the x it hangs from, its offset in points, its alignments, and
#: whether it stands for several points of one value (then drawn in grey, not one's colour).
Placement = tuple[float, tuple[float, float], str, str, bool]


def _label_offsets(points: Sequence[tuple[float, float, int]], ylim: tuple[float, float],
                   single: bool) -> dict[int, Placement]:
    """Where each value label goes, by the index given with its ``(x, AL, index)``: above its
    point, unless another point of the same K is too close below or above for two labels,
    when the lower one goes below and any between them to the side (stacked clear of each
    other and of every marker of that K, some of which may be dodged). Points of one K and
    one value share a label; no value goes unlabelled."""
    per_al = AXES_HEIGHT[single] / (ylim[1] - ylim[0])
    tall = 24 / per_al  # a label and its gap, in AL
    by_k: dict[int, dict[float, list[tuple[float, int]]]] = {}
    for x, al, i in points:
        by_k.setdefault(round(x), {}).setdefault(al, []).append((x, i))
    out: dict[int, Placement] = {}
    for values in by_k.values():
        xs = [x for found in values.values() for x, _ in found]
        left, right = min(xs), max(xs)
        clusters: list[list[float]] = []
        for al in sorted(values, reverse=True):
            if clusters and clusters[-1][-1] - al < tall:
                clusters[-1].append(al)
            else:
                clusters.append([al])
        for cluster in clusters:
            stacked = {True: float("inf"), False: float("inf")}  # lowest label so far, by side
            for n, al in enumerate(cluster):
                found = values[al]
                x, i = found[0]
                shared = len(found) > 1
                if shared:  # one label for the value, centred over its markers
                    x = sum(fx for fx, _ in found) / len(found)
                if n == 0:
                    out[i] = (x, (0.0, 8.0), "center", "bottom", shared)
                elif n == len(cluster) - 1:
                    out[i] = (x, (0.0, -9.0), "center", "top", shared)
                else:  # between two others: to the side, alternating, each below the last
                    side = n % 2 == 1
                    y = min(al * per_al, stacked[side] - 12)
                    stacked[side] = y
                    out[i] = (right if side else left, (10.0 if side else -10.0,
                                                        y - al * per_al),
                              "left" if side else "right", "center", shared)
    return out


def _short(label: str, limit: int) -> str:
    """``label`` (parts joined by `` · ``) in at most ``limit`` characters: its longest parts
    lose their middles to ``…`` first, so that every part still shows how it starts and ends."""
    parts = label.split(" · ")
    while len(" · ".join(parts)) > limit:
        longest = max(range(len(parts)), key=lambda i: len(parts[i]))
        part = parts[longest]
        keep = max(len(part) - (len(" · ".join(parts)) - limit) - 1, 8)
        if keep >= len(part) - 1:
            break
        head = keep // 2
        parts[longest] = part[:head] + "…" + part[len(part) - (keep - head):]
    return " · ".join(parts)


def _panel(ax: Axes, lines: Sequence[Curve], max_k: int, colours: dict[str, Any], *,
           with_model: bool, labelled: bool, size: float, ylim: tuple[float, float],
           single: bool) -> bool:
    """Curves, the ceiling when it comes near them, and the axes of one panel; whether the
    ceiling was drawn."""
    from matplotlib.ticker import MaxNLocator

    lo, hi = 0.6, max_k + 0.4
    # Near: K + 1 lies inside the axis above some stored point, so the reader sees how far
    # below it the values are. Far above every value, it would only squeeze them together.
    ceiling = any(p.k + 1 <= ylim[1] for c in lines for p in c.points)
    if ceiling:
        ax.plot([lo, hi], [lo + 1, hi + 1], ls=(0, (5, 4)), lw=1.2, color=CEILING_COLOUR,
                gid="ceiling", zorder=1)
        ax.fill_between([lo, hi], [lo + 1, hi + 1], [hi + 2, hi + 2], color="0.965",
                        zorder=0, lw=0)  # above the ceiling: impossible, shaded out of the way
    dodged = _dodged(lines, ylim, size, max_k, single)
    texts: list[tuple[float, float, int]] = []
    label_of: list[tuple[Curve, Point, float]] = []
    for i, c in enumerate(lines):
        colour, label = colours[_group(c)], c.label(with_model)

        def x(p: Point, i: int = i) -> float:
            return dodged.get((i, p.k), p.k)

        for seg in c.segments():
            ax.plot([x(p) for p in seg], [p.acceptance_length for p in seg], color=colour,
                    lw=2, ls="-" if c.thinking == "off" else (0, (1, 1.5)),
                    gid=f"segment:{label}", zorder=2)
        barred = [p for p in c.points if p.stderr]
        if barred:
            ax.errorbar([x(p) for p in barred], [p.acceptance_length for p in barred],
                        yerr=[BAR_Z * (p.stderr or 0.0) for p in barred],
                        fmt="none", ecolor=colour, elinewidth=1.2, capsize=3, zorder=3,
                        gid=f"bars:{label}")
        for measured in (True, False):
            pts = [p for p in c.points if p.measured is measured]
            if pts:
                ax.plot([x(p) for p in pts], [p.acceptance_length for p in pts], ls="none",
                        marker=MARKERS.get(c.thinking, "o"), ms=size, mew=2, color=colour,
                        mfc=colour if measured else "white", gid=f"points:{label}", zorder=3)
        if labelled:
            for p in c.points:
                texts.append((x(p), p.acceptance_length, len(label_of)))
                label_of.append((c, p, x(p)))
    for n, (px, offset, ha, va, shared) in _label_offsets(texts, ylim, single).items():
        c, p, _ = label_of[n]
        if p.stderr and va != "center" and not shared:
            # Beside its point: above or below, a label would sit on the point's own bar.
            px, offset, ha, va = label_of[n][2], (size / 2 + 5, 0.0), "left", "center"
        # On a white ground: a line that crosses a label does not strike it through.
        ax.annotate(f"{readable(p.acceptance_length)}", (px, p.acceptance_length), xytext=offset,
                    textcoords="offset points", ha=ha, va=va, fontsize=9 if single else 7,
                    color="0.25" if shared else colours[_group(c)], gid="value", zorder=4,
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none",
                          "alpha": 0.85})
    ax.set_xlim(lo, hi)
    ax.set_ylim(*ylim)
    if max_k <= 16:  # every K a tick (a locator would tick 0.64, 0.72, ... for K 1 alone)
        ax.set_xticks(range(1, max_k + 1))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("K, draft tokens per step")
    ax.set_ylabel("acceptance length AL, tokens per step")
    ax.grid(True, color="0.9", lw=0.8, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ceiling


def _handles(lines: Sequence[Curve], colours: dict[str, Any], with_model: bool) -> list:
    """One legend entry per line; past a dozen, one entry saying how to narrow the picture (a
    legend of a hundred entries names nothing and squeezes the panel to nothing)."""
    from matplotlib.lines import Line2D

    if len(lines) > MAX_LINES_PER_PANEL:
        return [Line2D([], [], ls="none", label=f"{len(lines)} lines: {CROWDED_HINT}")]
    limit = LEGEND_CHARS[with_model]
    return [Line2D([], [], color=colours[_group(c)], lw=2,
                   ls="-" if c.thinking == "off" else (0, (1, 1.5)),
                   marker=MARKERS.get(c.thinking, "o"), ms=7, mew=2,
                   # Hollow only when no point is measured: the handle names the line, and
                   # the key below it explains the fill.
                   mfc=colours[_group(c)] if any(p.measured for p in c.points) else "white",
                   label=_short(c.label(with_model), limit)) for c in lines]


def _key_handles(lines: Sequence[Curve], ceiling: bool = True) -> list:
    """What the ceiling (when drawn) and the fill mean (hollow only when some point is not
    measured)."""
    from matplotlib.lines import Line2D

    out = [Line2D([], [], color=CEILING_COLOUR, ls=(0, (5, 4)), lw=1.2,
                  label="ceiling K + 1: every draft accepted")] if ceiling else []
    if any(p.stderr for c in lines for p in c.points):
        out.append(Line2D([], [], color="0.35", ls="none", marker="|", ms=10, mew=1.2,
                          label=f"bar: ±{BAR_Z} × stderr from the counts (a lower bound)"))
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
