"""``registry coverage``: which (model, method, thinking, category, K) cells the registry holds.

Thin over :mod:`registry_db.analyze.coverage`: parse the filters, read the grid, render it as a
table (K across the columns, ``-`` where nothing is stored, marks on values that were not
measured and on cells several sets hold), as JSON listing every cell, or as long-form CSV.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace
from typing import Any

import click

from registry_db.cli.output import (
    GAP,
    as_of_option,
    complete_methods,
    complete_models,
    complete_set_names,
    csv_text,
    emit_json,
    emit_lines,
    handle_errors,
    labelled_time,
    output_options,
    readable,
    render_text_table,
    table_options,
    terminal_width,
)
from registry_db.model import visible

CSV_COLUMNS = ("model", "speculative_method", "thinking", "category", "k", "acceptance_length",
               "method", "sets")


@click.command("coverage")
@click.option("--model", metavar="M", shell_complete=complete_models, help="Only this model.")
@click.option("--method", "speculative_method", metavar="X", shell_complete=complete_methods,
              help="Only this speculative method (e.g. dspark, mtp).")
@click.option("--set", "sets", multiple=True, metavar="NAME", shell_complete=complete_set_names,
              help="The sets that count as the registry (repeatable; default: all).")
@click.option("--category", metavar="C", help="Only this workload category.")
@as_of_option
@output_options
@table_options
@click.pass_obj
@handle_errors
def coverage(settings: Any, model: str | None, speculative_method: str | None,
             sets: tuple[str, ...], category: str | None, as_of: Any, as_json: bool,
             as_csv: bool, as_nl: bool) -> None:
    """Show which cells hold a profile: a row per (model, method, thinking, category), K across.

    Rows are every stored (model, method) pair in both thinking modes and every stored
    category; columns run from K 1 to the largest K stored. A cell shows its AL, or `-` where
    no set holds one (a run there is refused or falls back). Marks: c copied, a assumed,
    l literature, v vendor_spec (not measured); * held by several sets (a run there is a
    conflict), each set's value shown where they differ (`4.07/4.02*`). --json lists every
    cell, present and missing, each set's value in "values" (--nl: one row per line); --csv
    prints one line per cell and value. --as-of TIME shows the grid of the registry as it was
    then.

    \b
    Example:
        registry coverage
        registry coverage --model glm-5.3 --category coding --json
    """
    from registry_db.analyze.grid import Selection, read_coverage_dbapi

    selection = Selection(model=model, speculative_method=speculative_method,
                          category=category, sets=tuple(sets), as_of=as_of)
    grid = None
    if as_of is None:
        from registry_db.cli.fast import read_cursor

        with read_cursor(settings.url) as (cur, dialect, engine):
            if engine is None:
                grid = read_coverage_dbapi(cur, dialect, selection)
    if grid is None:  # as of a time or label (the history), or not opened at the head
        from registry_db.analyze.coverage import read_coverage

        with settings.registry(readonly=True) as engine:
            selection = replace(selection, as_of=labelled_time(engine, as_of))
            grid = read_coverage(engine, selection)
    if as_json:
        emit_json(grid.to_json())
    elif as_nl:
        emit_lines(r.to_json() for r in grid.rows)
    elif as_csv:
        click.echo(render_csv(grid), nl=False)
    else:
        click.echo(render_table(grid, terminal_width()))


def render_table(grid: Any, width: int | None = None) -> str:
    """The grid as an aligned table, a footer saying how much is stored and what marks mean;
    with ``width`` (a terminal's), the key columns are shortened to fit it, never the values."""
    head = ["model", "speculative_method", "thinking", "category"]
    ks = [f"k{k}" for k in range(1, grid.max_k + 1)]
    # Marks hang to the right of the numbers, so that the numbers of a column stay aligned.
    marks = [max((len(r.cells[i].marks) for r in grid.rows), default=0)
             for i in range(grid.max_k)]
    body = [[*map(visible, r.key), *(c.value_text(readable) + c.marks.ljust(w)
                                     for c, w in zip(r.cells, marks))]
            for r in grid.rows]
    # Many K columns of short numbers: a one-space gap before any key is cut further.
    out = render_text_table(head + ks, body, [False] * len(head) + [True] * len(ks), width,
                            gaps=(GAP, " "))
    cells = [c for r in grid.rows for c in r.cells]
    footer = f"{sum(c.present for c in cells)} of {len(cells)} cells stored"
    legend = grid.marks()
    footer += ". Marks: " + "; ".join(legend) if legend else ""
    # Prose: wrapped to the terminal, never cut.
    out += ["", *(textwrap.wrap(footer, width) if width else [footer])]
    return "\n".join(out)


def render_csv(grid: Any) -> str:
    """One line per cell and value: a cell the sets agree on is one line (its sets
    space-separated), one whose sets differ a line per set, a missing cell one line with empty
    values; numbers with every digit, as in every CSV (only tables round)."""
    def lines(c: Any) -> list[tuple[Any, ...]]:
        if c.agreed:
            return [(c.k, c.acceptance_length, c.method, " ".join(c.sets))]
        return [(c.k, e.acceptance_length, e.method, e.profile_set) for e in c.entries]
    return csv_text(CSV_COLUMNS, ((*row.key, *line) for row in grid.rows for c in row.cells
                                  for line in lines(c)))
