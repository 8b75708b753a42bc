"""``registry resolve``: the acceptance one run uses, or many runs' from a JSON-lines file.

Thin over :mod:`registry_db.resolve.plan` (the rules) and :mod:`registry_db.inputs.request` (files and
batch lines). A refusal exits 1 with its reason; ``--batch`` answers every line, refusals
included, and exits 1 only when some line was not a well-formed request.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from registry_db.cli.output import complete_set_names, emit_json, handle_errors, json_option

#: Flags that describe one run; none of them goes with --batch.
_RUN_FLAGS = ("model", "method", "k", "thinking", "category", "workload", "profiles",
              "fallback_category", "scenario", "acceptance_length", "acceptance_rate",
              "per_position_rates", "sets", "hardware")
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
    from registry_db.model import CATEGORY_RE

    values = value if isinstance(value, tuple) else (value,)
    for v in values:
        if v is not None and not v.strip():
            raise click.BadParameter("must not be empty")
        if v is not None and param.name in ("category", "fallback_category") \
                and not CATEGORY_RE.fullmatch(v):
            raise click.BadParameter(f"{v!r} is malformed; use lower-case letters, digits, '_' "
                                     "and '-', such as coding")
    return value


@click.command("resolve")
@click.option("--model", callback=_nonempty, help="The catalog model name.")
@click.option("--method", callback=_nonempty, help="The speculative method, e.g. dspark, mtp.")
@click.option("--k", type=click.IntRange(min=1), help="K, the speculative tokens per step.")
@click.option("--thinking", type=click.Choice(["on", "off"]), help="The workload's thinking mode.")
@click.option("--category", callback=_nonempty, help="The workload's category, e.g. coding.")
@click.option("--workload", type=click.Path(dir_okay=False), metavar="FILE",
              help="Workload YAML: thinking, category, acceptance (an inline value).")
@click.option("--profiles", callback=_nonempty, metavar="SET", shell_complete=complete_set_names,
              help="The scenario's pin: look the profile up in this set instead.")
@click.option("--fallback-category", callback=_nonempty, metavar="C",
              help="The scenario's pin: the category to use when the workload's has no curve.")
@click.option("--scenario", type=click.Path(dir_okay=False), metavar="FILE",
              help="Scenario YAML with a top-level `acceptance:` pin.")
@click.option("--acceptance-length", type=float, metavar="X", help="The command line's AL, at K.")
@click.option("--acceptance-rate", type=float, metavar="R",
              help="The command line's acceptance rate (AL - 1) / K, at K.")
@click.option("--per-position-rates", callback=_rates, metavar="R1,R2,...",
              help="The command line's K per-position rates.")
@click.option("--set", "sets", multiple=True, callback=_nonempty, metavar="NAME",
              shell_complete=complete_set_names,
              help="A set that counts as the registry (repeat; default: every set).")
@click.option("--hardware", callback=_nonempty, metavar="CHIP", help="The run's chip, e.g. b300.")
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
        given = [f"--{n.replace('_', '-')}" for n in _RUN_FLAGS if run[n] not in (None, ())]
        if given:
            raise click.UsageError(f"--batch reads every run from its file; drop {given[0]}")
        sys.exit(_run_batch(ctx.obj, batch))
    for name in ("model", "method", "k"):
        if run[name] is None:
            raise click.UsageError(f"--{name} is required (or give --batch FILE)")
    for file_flag, term_flags in (("workload", ("thinking", "category")),
                                  ("scenario", ("profiles", "fallback_category"))):
        for term in term_flags:
            if run[file_flag] is not None and run[term] is not None:
                raise click.UsageError(f"--{file_flag} states the {term.replace('_', '-')} "
                                       f"already; drop --{term.replace('_', '-')} or the file")
    _run_one(ctx.obj, run, as_json)


def _run_one(settings: Any, run: dict[str, Any], as_json: bool) -> None:
    from registry_db.errors import ResolutionRefused
    from registry_db.resolve.plan import resolve as resolve_run

    try:
        request, warnings = _request(run)
        for finding in warnings:
            click.echo(finding.render(), err=True)
        with settings.registry() as engine:
            answer = resolve_run(engine, request)
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


def _request(run: dict[str, Any]) -> tuple[Any, list[Any]]:
    from registry_db.inputs.request import load_scenario, load_workload
    from registry_db.model import InlineValue, Pin
    from registry_db.resolve.plan import Request

    warnings: list[Any] = []
    thinking, category, workload = run["thinking"], run["category"], None
    if run["workload"] is not None:
        w = load_workload(run["workload"])
        thinking, category, workload = w.thinking, w.category, w.acceptance
        warnings.extend(w.warnings)
    pin = None
    if run["scenario"] is not None:
        pin, found = load_scenario(run["scenario"])
        warnings.extend(found)
    elif run["profiles"] is not None or run["fallback_category"] is not None:
        pin = Pin(profiles=run["profiles"], fallback_category=run["fallback_category"])
    cli = None
    stated = {n: run[n] for n in ("acceptance_length", "acceptance_rate", "per_position_rates")
              if run[n] is not None}
    if stated:
        rates = stated.pop("per_position_rates", None)
        cli = InlineValue(num_spec_tokens=run["k"], per_position_rates=(
            None if rates is None else tuple(rates)), **stated)
    request = Request(run["model"], run["method"], run["k"], thinking, category, workload, pin,
                      cli, run["hardware"], tuple(run["sets"]) or None)
    return request, warnings


def _run_batch(settings: Any, path: str) -> int:
    from registry_db.errors import ResolutionRefused
    from registry_db.inputs.request import parse_lines
    from registry_db.resolve.plan import Request, gc_paused, resolve_many

    lines = batch_lines(_read_text(path))
    with gc_paused(len(lines)):
        parsed = parse_lines(lines)
        requests = [p for p in parsed if type(p) is Request]
        with settings.registry() as engine:
            answers = iter(resolve_many(engine, requests))
        bad = 0
        block: list[str] = []
        for item in parsed:
            answer = next(answers) if type(item) is Request else item
            if isinstance(answer, ResolutionRefused) and answer.reason == "invalid_request":
                bad += 1
            block.append(_ENCODER.encode(answer.to_json()))
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
