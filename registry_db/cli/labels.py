"""``registry label`` and ``registry labels``: names for states of the registry.

Thin over :mod:`registry_db.history.labels`: parse, call, render. ``label`` gives a name a
position (a time, a set's revision, or now) and moves it only with ``--force``; ``labels``
lists them, or with ``--history`` every position each was given.
"""

from __future__ import annotations

from typing import Any

import click

from registry_db.cli.output import (
    as_of_option,
    complete_set_names,
    emit_json,
    emit_lines,
    emit_rows,
    handle_errors,
    json_option,
    message_text,
    output_options,
    table_options,
)
from registry_db.model import INT_LIMIT, visible

LABEL_COLUMNS = ("name", "as_of", "set", "revision", "labelled_at", "message")
EVENT_COLUMNS = ("name", "action", "as_of", "set", "revision", "labelled_at", "message")


def _name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    from registry_db.inputs.as_of import label_name_problem

    problem = label_name_problem(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


def _revision(_ctx: click.Context, _param: click.Parameter, value: str | None
              ) -> tuple[str, int] | None:
    """``SET@REVISION`` as (set, number); the last ``@`` splits, as a set's name may hold one."""
    if value is None:
        return None
    name, at, number = value.rpartition("@")
    if not at or not name or not number.isdigit() or not 1 <= int(number) <= INT_LIMIT:
        raise click.BadParameter(f"{visible(value)!r} is not SET@REVISION, such as "
                                 "inferencex-golden-al@3")
    return name, int(number)


@click.command("label")
@click.argument("name", callback=_name)
@click.argument("revision", metavar="[SET@REVISION]", required=False, callback=_revision,
                shell_complete=complete_set_names)
@as_of_option
@click.option("--force", is_flag=True,
              help="Move the label if it names another state (its earlier position is kept "
                   "in `registry labels --history`).")
@click.option("-m", "--message", metavar="MESSAGE", callback=message_text,
              help="Why, kept with the label's position (may span lines).")
@json_option
@click.pass_obj
@handle_errors
def label(settings: Any, name: str, revision: tuple[str, int] | None, as_of: Any,
          force: bool, message: str | None, as_json: bool) -> None:
    """Name a state of the registry, for --as-of NAME wherever --as-of takes a time.

    A label names a moment: the registry as of it, each set at the revision it had then.
    SET@REVISION names the time that revision was written (the set reads as exactly that
    revision, every other set as it stood then); --as-of TIME names TIME (not after now);
    neither names now. NAME is a letter or digit, then up to 63 letters, digits, '.', '_' or
    '-', and never reads as a time. Giving a label the state it names already changes
    nothing; another state needs --force (exit 2 without it).

    \b
    Example:
        registry label release-2026-12
        registry label golden-v3 inferencex-golden-al@3
        registry label q4-review --as-of 2026-11-30T12:00:00Z -m "Q4 review"
        registry label release-2026-12 --force -m "re-cut after the fix"
    """
    from registry_db.history.labels import set_label

    if revision is not None and as_of is not None:
        raise click.UsageError("give SET@REVISION or --as-of, not both")
    set_name, number = revision if revision is not None else (None, None)
    with settings.registry() as engine:
        done = set_label(engine, name, as_of=as_of, set_name=set_name, revision=number,
                         force=force, message=message)
    if as_json:
        emit_json({"action": done.action, "label": done.label.to_json(),
                   "before": None if done.before is None else done.before.to_json()})
        return
    click.echo(f"{done.action}  {name}  {_place(done.label)}"
               + ("" if done.action != "moved" or done.before is None
                  else f"  (was {_place(done.before)})"))


def _place(lab: Any) -> str:
    """Where a label points, as one line: the time, and the set's revision it came from."""
    made = "" if lab.set is None else f" ({visible(lab.set)}@{lab.revision})"
    return f"{lab.as_of.isoformat()}{made}"


@click.command("labels")
@click.argument("name", required=False)
@click.option("--history", "show_history", is_flag=True,
              help="Every position each label was given, newest first (created, moved).")
@output_options
@table_options
@click.pass_obj
@handle_errors
def labels(settings: Any, name: str | None, show_history: bool, as_json: bool, as_csv: bool,
           as_nl: bool) -> None:
    """List the labels: each one's name, the time it names (--as-of NAME reads the registry
    as of it), the set's revision it was made from, when it was set, and its message.

    NAME shows one label; --history lists every position labels were given, moves included,
    newest first. --json prints {"labels": [...]} ({"events": [...]} with --history).

    \b
    Example:
        registry labels
        registry labels --history release-2026-12
        registry labels --json
    """
    from registry_db.history import labels as store

    with settings.registry(readonly=True) as engine:
        if show_history:
            found: list[Any] = store.events(engine, name)
        else:
            found = store.list_labels(engine)
            if name is not None:
                found = [lab for lab in found if lab.name == name]
                if not found:
                    store.moment(engine, name)  # raises: no such label, naming the known ones
    key = "events" if show_history else "labels"
    if as_json:
        emit_json({key: [x.to_json() for x in found]})
        return
    if as_nl:
        emit_lines(x.to_json() for x in found)
        return
    if show_history:
        rows = [(e.label.name, e.action, *_cells(e.label)) for e in found]
        emit_rows(EVENT_COLUMNS, rows, as_csv=as_csv)
    else:
        emit_rows(LABEL_COLUMNS, [(lab.name, *_cells(lab)) for lab in found], as_csv=as_csv)


def _cells(lab: Any) -> tuple[Any, ...]:
    return (lab.as_of.isoformat(), lab.set, lab.revision, lab.labelled_at.isoformat(),
            lab.message)
