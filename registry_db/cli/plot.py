"""``registry plot``: the acceptance curves as a PNG or SVG picture.

Thin over :mod:`registry_db.analyze`: parse the filters, read the coverage grid, draw it, write
the file the suffix of ``-o`` names. matplotlib is an optional extra; without it the command
exits 1 naming the command that installs it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from registry_db.cli.output import (
    as_of_option,
    complete_methods,
    complete_models,
    complete_set_names,
    emit_json,
    handle_errors,
    json_option,
    labelled_time,
)
from registry_db.model import THINKING_MODES


def _picture_path(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    # Checked before the database is opened: a typo in the suffix costs nothing.
    from registry_db.analyze.plot import FORMATS

    if Path(value).suffix.lower() not in FORMATS:
        raise click.BadParameter(f"{value!r} must end in {' or '.join(FORMATS)}")
    return value


@click.command("plot")
@click.option("--model", metavar="M", shell_complete=complete_models, help="Only this model.")
@click.option("--method", "speculative_method", metavar="X", shell_complete=complete_methods,
              help="Only this speculative method (e.g. dspark, mtp).")
@click.option("--thinking", type=click.Choice(THINKING_MODES), help="Only this thinking mode.")
@click.option("--category", metavar="C", help="Only this workload category.")
@click.option("--set", "sets", multiple=True, metavar="NAME", shell_complete=complete_set_names,
              help="The sets that count as the registry (repeatable; default: all).")
@as_of_option
@click.option("-o", "--output", required=True, metavar="FILE.png|FILE.svg",
              callback=_picture_path, help="The picture to write; its suffix picks the format.")
@click.option("--force", is_flag=True,
              help="Replace an existing file whose content differs from the picture.")
@json_option
@click.pass_obj
@handle_errors
def plot(settings: Any, model: str | None, speculative_method: str | None,
         thinking: str | None, category: str | None, sets: tuple[str, ...], as_of: Any,
         output: str, force: bool, as_json: bool) -> None:
    """Draw AL against K: one line per (model, method, thinking), against the K + 1 ceiling.

    Markers sit only at stored values (filled when measured, hollow otherwise) and no line
    crosses a K that has none. More than a dozen lines become one panel per model. Needs the
    plot extra: pip install 'registry_db[plot]'. The file is written as `export` writes, to a
    temporary file renamed into place; an existing file of other content (or a symlink) is
    replaced only with --force. Prints the path written; --json prints
    {"file", "format", "lines", "points"}.

    \b
    Example:
        registry plot -o curves.png
        registry plot --model deepseek-v4.1-flash --category coding -o dsv41.svg
    """
    from registry_db.analyze import plot as drawing
    from registry_db.analyze.coverage import Selection, read_coverage

    drawing.require_matplotlib()  # before the database: the fix is an install, not a query
    selection = Selection(model=model, speculative_method=speculative_method,
                          thinking=thinking, category=category, sets=tuple(sets), as_of=as_of)
    with settings.registry(readonly=True) as engine:
        selection = replace(selection, as_of=labelled_time(engine, as_of))
        grid = read_coverage(engine, selection)
    lines = drawing.curves(grid)
    path = drawing.save_figure(drawing.build_figure(grid), output, force=force)
    points = sum(len(c.points) for c in lines)
    if as_json:
        emit_json({"file": str(path), "format": drawing.FORMATS[path.suffix.lower()],
                   "lines": len(lines), "points": points})
        return
    click.echo(str(path))
    click.echo(f"{len(lines)} line(s), {points} point(s)", err=True)
    per_model = max(sum(c.model == m for c in lines) for m in {c.model for c in lines})
    if per_model > drawing.MAX_LINES_PER_PANEL:
        click.echo(f"one panel holds {per_model} lines, too many to tell apart: "
                   f"{drawing.CROWDED_HINT}", err=True)
