"""``registry resolve``: the acceptance one run uses, or many runs' from a JSON-lines file.

Thin over :mod:`registry_db.resolve.plan` (the rules), :mod:`registry_db.resolve.layers` (the
options, one per flag of its table) and :mod:`registry_db.inputs.request` (files and batch
lines). A refusal exits 1 with its reason; ``--batch`` answers every line, refusals included,
and exits 1 only when some line was not a well-formed request.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from registry_db.cli.output import complete_set_names, emit_json, handle_errors, json_option
from registry_db.model import THINKING_MODES
from registry_db.resolve.layers import FLAGS, INPUTS

#: Answers are written in blocks of this many lines.
_BLOCK = 10_000
_ENCODER = json.JSONEncoder(ensure_ascii=False)


def _rates(ctx: click.Context, param: click.Parameter, value: str | None) -> list[float] | None:
    if value is None:
        return None
    try:
        return [float(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers, "
                                 "such as 1.0,0.8,0.5") from None


def _nonempty(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    values = value if isinstance(value, tuple) else (value,)
    for v in values:
        if v is not None and not v.strip():
            raise click.BadParameter("must not be empty")
    return value


def _category(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    from registry_db.inputs.schema import good_category, malformed_category

    _nonempty(ctx, param, value)
    if value is not None and not good_category(value):
        raise click.BadParameter(malformed_category("", value))
    return value


def _k(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    from registry_db.inputs.schema import k_problem

    problem = None if value is None else k_problem(str(value), value)
    if problem is not None:  # only above the limit: click's range refuses K < 1
        raise click.BadParameter(problem.split("; ", 1)[1])
    return value


#: How each kind of flag in :data:`registry_db.resolve.layers.FLAGS` becomes a click option.
_KINDS: dict[str, dict[str, Any]] = {
    "text": {"callback": _nonempty},
    "category": {"callback": _category},
    "k": {"type": click.IntRange(min=1), "callback": _k},
    "thinking": {"type": click.Choice(list(THINKING_MODES))},
    "number": {"type": float},
    "rates": {"callback": _rates},
    "file": {"type": click.Path(dir_okay=False)},
}


def _run_options(fn: Any) -> Any:
    """The options that describe one run, one per flag of the layers' table, in its order."""
    for flag in reversed(FLAGS):
        how: dict[str, Any] = dict(_KINDS[flag.kind])
        if flag.names_a_set:
            how["shell_complete"] = complete_set_names
        fn = click.option(flag.decl, flag.name, help=flag.help, metavar=flag.metavar,
                          multiple=flag.multiple, **how)(fn)
    return fn


@click.command("resolve")
@_run_options
@click.option("--batch", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE.jsonl",
              help="Resolve one JSON request per line ('-': stdin); one JSON answer per line.")
@json_option
@click.pass_context
@handle_errors
def resolve(ctx: click.Context, batch: str | None, as_json: bool, **run: Any) -> None:
    """Resolve the acceptance a run uses: AL, rate, K per-position rates, and where they came
    from. Layers, lowest to highest: registry, workload, scenario, cli; the highest that states
    acceptance wins. A refusal exits 1 and names its reason.

    \b
    Example:
        registry resolve --model deepseek-v4.1-flash --method dspark --k 5 \\
            --thinking off --category coding --hardware b300
        registry resolve --model glm-5.3 --method mtp --k 3 --thinking on \\
            --category chat --fallback-category coding --json
        registry resolve --batch runs.jsonl > answers.jsonl
    """
    if batch is not None:
        given = [flag.decl for flag in FLAGS if run[flag.name] not in (None, ())]
        if given:
            raise click.UsageError(f"--batch reads every run from its file; drop {given[0]}")
        sys.exit(_run_batch(ctx.obj, batch))
    for row in INPUTS:
        if row.required and run[row.name] is None:
            raise click.UsageError(f"--{row.name} is required (or give --batch FILE)")
    for file_flag in FLAGS:
        for term in (flag for row in INPUTS if row.name in file_flag.states
                     for flag in row.flags if flag is not file_flag and flag.kind != "file"):
            if run[file_flag.name] is not None and run[term.name] is not None:
                raise click.UsageError(f"{file_flag.decl} states the {term.decl[2:]} "
                                       f"already; drop {term.decl} or the file")
    _run_one(ctx.obj, run, as_json)


def _run_one(settings: Any, run: dict[str, Any], as_json: bool) -> None:
    from registry_db.errors import ResolutionRefused
    from registry_db.resolve.plan import resolve as resolve_run

    try:
        request, warnings = _request(run)
        for finding in warnings:
            click.echo(finding.render(), err=True)
        answer = _on_registry(settings, resolve_run, request)
    except ResolutionRefused as refusal:
        if as_json:
            emit_json(refusal.to_json())
        else:
            click.echo(f"refused ({refusal.reason}): {refusal.message}", err=True)
        sys.exit(1)
    if as_json:
        emit_json(answer.to_json())
    else:
        click.echo(format_resolution(answer))


def _on_registry(settings: Any, call: Any, arg: Any) -> Any:
    """``call(bind, arg)`` on the registry, read through a read-only ``sqlite3`` connection when
    it is a SQLite file at the head, else through the engine.

    The first way imports no SQLAlchemy, which is most of a one-run command's time (issue 14:
    288 ms before, the figures in the README's Performance section after). Anything it cannot
    read, or a driver error while reading, goes the engine's way, which creates, refuses or
    reports exactly as before; a resolution only reads, so trying twice changes nothing.
    """
    from registry_db.store import sqlite_read

    conn = sqlite_read.open_readonly(settings.url)
    if conn is not None:
        import sqlite3

        try:
            return call(conn, arg)
        except sqlite3.Error:
            pass
        finally:
            conn.close()
    with settings.registry() as engine:
        return call(engine, arg)


def _request(run: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The request the flags describe: each input from its own flags, then from the files
    (``--workload``, ``--scenario``) that state it, in the table's order."""
    from registry_db.inputs.request import Request

    fields = {row.name: row.from_flags(run) for row in INPUTS}
    warnings: list[Any] = []
    for flag in FLAGS:
        if flag.load is not None and run[flag.name] is not None:
            stated, found = flag.load(run[flag.name])
            fields.update(stated)
            warnings.extend(found)
    return Request(**fields), warnings


def _run_batch(settings: Any, path: str) -> int:
    from registry_db.inputs.request import line_id, parse_lines
    from registry_db.model import Refusal, RefusalReason
    from registry_db.resolve.plan import Request, gc_paused, resolve_many

    lines = batch_lines(_read_text(path))
    with gc_paused(len(lines)):
        parsed = parse_lines(lines)
        requests = [p for p in parsed if type(p) is Request]
        answers = iter(_on_registry(settings, resolve_many, requests))
        bad = 0
        block: list[str] = []
        for item, line in zip(parsed, (ln for ln in lines if ln.strip())):
            if isinstance(item, Request):
                answer, ident = next(answers), item.id
            else:  # refused as it was read: the line's id, if it still has one
                answer, ident = item, line_id(line)
            if type(answer) is Refusal and answer.reason == RefusalReason.INVALID_REQUEST:
                bad += 1
            out = answer.to_json()
            # The line's id comes first in its answer, for joining by id.
            block.append(_ENCODER.encode(out if ident is None else {"id": ident, **out}))
            if len(block) >= _BLOCK:
                sys.stdout.write("\n".join(block) + "\n")
                block.clear()
        if block:
            sys.stdout.write("\n".join(block) + "\n")
        sys.stdout.flush()
    return 1 if bad else 0


def batch_lines(text: str) -> list[str]:
    """One request per ``\n``-terminated line, nothing else: U+2028, U+0085, ``\x1c`` and the
    other characters ``str.splitlines`` breaks on may stand inside a JSON string, and a lone
    ``\r`` is JSON whitespace; splitting on them would pair answers with the wrong lines."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _read_text(path: str) -> str:
    from registry_db.errors import Finding, InvalidInput

    try:
        # Bytes, decoded here: text mode's universal newlines would turn a lone \r into a line.
        if path == "-":
            stream = getattr(sys.stdin, "buffer", None)
            return sys.stdin.read() if stream is None else stream.read().decode("utf-8")
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise InvalidInput([Finding(path, 1, 1, "", "unreadable_file",
                                    f"cannot read the batch: {reason}")]) from None




def format_resolution(answer: Any) -> str:
    """The readable form: AL, rate, K, rates, layer, set, profile, source, then notes.
    Numbers are rounded for reading (``--json`` keeps every digit)."""
    from registry_db.cli.output import readable, readable_list

    rates = readable_list(answer.per_position_rates)
    how = "derived: minimum-variance schedule" if answer.rates_derived else "as stated"
    rows: list[tuple[str, Any]] = [
        ("AL", readable(answer.acceptance_length)),
        ("rate", readable(answer.acceptance_rate)),
        ("K", answer.num_spec_tokens),
        ("rates", f"{rates}  ({how})"),
        ("layer", answer.layer),
        ("set", answer.profile_set or "-"),
        ("profile", answer.profile or "-"),
        ("source", answer.source or "-"),
    ]
    rows.extend(("note", w) for w in answer.warnings)
    return "\n".join(f"{label:<8} {value}" for label, value in rows)
