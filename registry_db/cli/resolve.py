"""``registry resolve``: the acceptance one run uses, or many runs' from a JSON-lines file.

Parses the options (one per flag of :mod:`registry_db.inputs.layers`' table, each checked by its
input's one rule), calls the library (:mod:`registry_db.resolve.plan`, ``.deployment`` and
``.batch``, on the registry :func:`registry_db.resolve.reading.reading` opens) and renders the
answer. A refusal exits 1 with its reason; ``--batch`` answers every line, refusals included, and
exits 1 only when some line was not a well-formed request. With ``--shell``, every exit but 0
also prints text on stdout whose ``eval`` fails (:class:`ShellSafeCommand`), so that
``eval "$(registry resolve ... --shell)"`` never goes on as if settings had been given.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import click

from registry_db.cli.output import (
    check_category,
    complete_methods,
    complete_models,
    complete_set_names,
    emit_json,
    handle_errors,
    json_option,
)
from registry_db.inputs.layers import FLAGS, INPUTS, Flag
from registry_db.model import THINKING_MODES, Refusal
from registry_db.model import RefusalReason as R
from registry_db.resolve.engines import ENGINES, SHELL_FAILURE


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



def _k(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    from registry_db.inputs.schema import k_problem

    problem = None if value is None else k_problem("k", value)
    if problem is not None:  # only above the limit: click's range refuses K < 1
        raise click.BadParameter(problem)
    return value


def _time(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A time as given, or a label's name (a ``LabelName``, resolved by :func:`labelled_run`
    once the registry is open)."""
    from registry_db.inputs.as_of import time_or_label

    if value is not None:
        try:
            found = time_or_label(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        if isinstance(found, str):
            return found
    return value


def labelled_run(settings: Any, run: dict[str, Any]) -> dict[str, Any]:
    """``run`` with an ``--as-of LABEL`` replaced by the label's time, read from the registry
    (an unknown label: exit 1, naming the known ones); as it is otherwise."""
    from registry_db.inputs.as_of import LabelName

    value = run.get("as_of")
    if not isinstance(value, LabelName):
        return run
    from registry_db.history.labels import moment

    with settings.registry(readonly=True) as engine:
        return {**run, "as_of": moment(engine, value)}


#: How each kind of flag in :data:`registry_db.inputs.layers.FLAGS` becomes a click option.
_KINDS: dict[str, dict[str, Any]] = {
    "text": {"callback": _nonempty},
    "category": {"callback": check_category},
    "k": {"type": click.IntRange(min=1), "callback": _k},
    "thinking": {"type": click.Choice(THINKING_MODES)},
    "number": {"type": float},
    "rates": {"callback": _rates},
    "time": {"callback": _time},
    "file": {"type": click.Path(dir_okay=False)},
}


#: The run's flags that name a stored key value: completed from the registry.
_STORED_NAMES = {"--model": complete_models, "--method": complete_methods}


def _run_options(fn: Any, flags: tuple[Flag, ...] = FLAGS) -> Any:
    """The options that describe one run, one per flag of the layers' table (or of ``flags``,
    some of its rows), in its order."""
    for flag in reversed(flags):
        how: dict[str, Any] = dict(_KINDS[flag.kind])
        if flag.names_a_set:
            how["shell_complete"] = complete_set_names
        elif flag.decl in _STORED_NAMES:
            how["shell_complete"] = _STORED_NAMES[flag.decl]
        fn = click.option(flag.decl, flag.name, help=flag.help, metavar=flag.metavar,
                          multiple=flag.multiple, **how)(fn)
    return fn


def into_option(fn: Any) -> Any:
    return click.option(
        "--into", metavar="JSON|FILE",
        help="With --emit vllm: the speculative config (JSON text, or a file) to merge the "
             "settings into; prints the whole --speculative-config object.")(fn)


def allow_inexact_option(fn: Any) -> Any:
    return click.option(
        "--allow-inexact", is_flag=True,
        help="Hand the settings over even where the engine would not realise the resolved AL "
             "exactly (TensorRT-LLM at AL 1; vLLM with rates whose 1 + sum is not the AL); "
             "what the engine does instead goes to stderr.")(fn)


class ShellSafeCommand(click.Command):
    """A command that, given ``--shell``, prints :data:`~registry_db.resolve.engines.
    SHELL_FAILURE` on stdout whenever it exits other than 0 (a refusal, bad input, a usage
    error, the database): ``eval`` of an empty output succeeds, and the engine would start
    without the settings."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        shell = "--shell" in args[:args.index("--")] if "--" in args else "--shell" in args
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.Exit as exc:
            if shell and exc.exit_code:
                _shell_failure()
            raise
        except click.ClickException:
            if shell:
                _shell_failure()
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SystemExit as exc:
            if ctx.params.get("shell") and exc.code not in (0, None):
                _shell_failure()
            raise
        except BaseException:
            if ctx.params.get("shell"):
                _shell_failure()
            raise


def _shell_failure() -> None:
    click.echo(f"# registry resolve gave no settings (see its stderr)\n{SHELL_FAILURE}")


@click.command("resolve", cls=ShellSafeCommand)
@_run_options
@click.option("--batch", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE.jsonl",
              help="Resolve one JSON request per line ('-': stdin); one JSON answer per line.")
@click.option("--deployment", type=click.Path(dir_okay=False), metavar="FILE",
              help="Deployment YAML: its pools; resolve once per pool that speculates, at the "
                   "pool's method and K.")
@click.option("--emit", type=click.Choice(list(ENGINES)), metavar="ENGINE",
              help=f"Print what the engine takes instead of the answer: {', '.join(ENGINES)}.")
@click.option("--shell", is_flag=True,
              help="With --emit: POSIX shell for eval (export lines, or a SPECULATIVE_CONFIG / "
                   "SPECULATIVE_ARGS variable); on any failure, text whose eval fails.")
@into_option
@allow_inexact_option
@json_option
@click.pass_context
@handle_errors
def resolve(ctx: click.Context, batch: str | None, as_json: bool, emit: str | None,
            shell: bool, deployment: str | None, into: str | None, allow_inexact: bool,
            **run: Any) -> None:
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
        set -e; eval "$(registry resolve --model deepseek-v4.1-flash \\
            --method dspark --k 5 --thinking off --category coding \\
            --emit sglang --shell)"
        registry resolve --model deepseek-v4.1-flash --deployment deploy.yaml \\
            --thinking off --category coding
    """
    if shell and emit is None:
        raise click.UsageError("--shell goes with --emit ENGINE")
    if allow_inexact and emit is None:
        raise click.UsageError("--allow-inexact goes with --emit ENGINE")
    if into is not None and emit != "vllm":
        raise click.UsageError("--into merges vLLM's settings into a speculative config: give "
                               "--emit vllm")
    if batch is not None:
        if shell:
            raise click.UsageError("--shell writes one run's settings for a shell; with "
                                   "--batch each answer carries them as JSON: drop --shell")
        if into is not None:
            raise click.UsageError("--into writes one run's whole speculative config; drop it "
                                   "with --batch")
        if deployment is not None:
            raise click.UsageError("--deployment answers one run; drop --batch or --deployment")
        given = [flag.decl for flag in FLAGS if run[flag.name] not in (None, ())]
        if given:
            raise click.UsageError(f"--batch reads every run from its file; drop {given[0]}")
        sys.exit(_run_batch(ctx.obj, batch, emit, allow_inexact))
    check_run_flags(run, deployment)
    handoff = None if emit is None else Handoff(emit, shell, allow_inexact, _into(into))
    from registry_db.gcpause import gc_paused

    # A run's work is mostly imports (the driver's, the resolver's): long-lived objects, no
    # cycles, which the collector would walk again and again for nothing (docs/decisions.md).
    with gc_paused():
        if deployment is not None:
            _run_deployment(ctx.obj, run, deployment, as_json, handoff)
            return
        _run_one(ctx.obj, run, as_json, handoff)


def _into(value: str | None) -> dict[str, Any] | None:
    from registry_db.inputs.speculative_config import load_speculative_config

    return None if value is None else load_speculative_config(value)


class Handoff:
    """What ``--emit`` asks for: the engine, the shell form, whether an inexact hand-off is
    allowed, and the vLLM config to merge into (``--into``)."""

    def __init__(self, engine: str, shell: bool = False, allow_inexact: bool = False,
                 into: dict[str, Any] | None = None):
        self.engine, self.shell, self.allow_inexact, self.into = engine, shell, allow_inexact, into

    def settings(self, resolution: Any) -> Any:
        """The engine's settings for ``resolution``, merged into ``into`` when given; raises
        the refusal of an inexact hand-off or a conflicting K."""
        from registry_db.resolve.engines import EngineSettings, engine_settings

        settings = engine_settings(resolution, self.engine, allow_inexact=self.allow_inexact)
        if self.into is None:
            return settings
        from registry_db.resolve.launch import merged_config

        merged = merged_config(settings, self.into)
        return EngineSettings(settings.engine, settings.form, tuple(merged.items()),
                              settings.warnings)


def check_run_flags(run: dict[str, Any], deployment: str | None) -> None:
    """The run's flags as one run (not a batch) needs them: the required ones given, and no
    flag that a given file states already."""
    if deployment is not None:
        _check_deployment_flags(run)
    for row in INPUTS:
        if row.required and run[row.name] is None and (
                deployment is None or row.name not in ("method", "k")):
            raise click.UsageError(f"--{row.name} is required (or give --batch FILE)")
    for file_flag in FLAGS:
        for name, term in ((r.name, flag) for r in INPUTS if r.name in file_flag.states
                           for flag in r.flags
                           if flag is not file_flag and flag.kind != "file"):
            if run[file_flag.name] is not None and run[term.name] is not None:
                raise click.UsageError(_twice(file_flag, run[file_flag.name], name, term))


def _twice(file_flag: Any, path: str, name: str, term: Any) -> str:
    """Why a file's flag and a flag of a term the file gives are refused together: one source
    per term (contract), said truly whether or not the file states it."""
    assert file_flag.load is not None
    # A file that cannot be read says so (its own findings), rather than this.
    if file_flag.load(path)[0].get(name) is not None:
        return f"{file_flag.decl} states the {term.decl[2:]} already; drop {term.decl} or the file"
    return (f"{file_flag.decl} {path} states no {term.decl[2:]}, but a run takes each term from "
            f"one place: state it in the file, or drop {file_flag.decl} to give {term.decl}")


def _check_deployment_flags(run: dict[str, Any]) -> None:
    """With --deployment the pools state method and K; --k only says at which K the command
    line's value was stated."""
    if run["method"] is not None:
        raise click.UsageError("--deployment states each pool's method and K; drop --method")
    stated = any(run[n] is not None for n in ("acceptance_length", "acceptance_rate",
                                                "per_position_rates"))
    if stated and run["k"] is None:
        raise click.UsageError("the command line's value is stated at a K: give --k")
    if not stated and run["k"] is not None:
        raise click.UsageError("--deployment states each pool's K; drop --k (it only says "
                               "at which K a command line value was stated)")


def _run_deployment(settings: Any, run: dict[str, Any], path: str, as_json: bool,
                    handoff: Handoff | None) -> None:
    """Resolve once per speculating pool of the deployment file; print the answers by pool."""
    from registry_db.inputs.deployment import load_deployment
    from registry_db.inputs.request import POOL_STANDS_IN
    from registry_db.resolve.deployment import resolve_deployment

    deployment = load_deployment(path)
    # The pools replace the run's method and K; these stand in until they do (a --k stays: it
    # is the K the command line's value was stated at).
    run = {**run, **{k: run[k] or v for k, v in POOL_STANDS_IN.items()}}
    answer = _resolved(settings, run, as_json,
                       lambda bind, request: resolve_deployment(bind, request, deployment))
    if not as_json:
        for warning in answer.warnings:
            click.echo(f"warning: {warning}", err=True)
    if handoff is not None:
        # Every pool's hand-off first: one refused refuses the run before anything is printed.
        pools = [(name, r, _handed(handoff, r, as_json, f"pool {name!r}: "))
                 for name, r in answer.pools]
        if as_json:
            emit_json({"pools": {name: {**s.to_json(), "resolution": r.to_json()}
                                 for name, r, s in pools},
                       "warnings": list(answer.warnings)})
            return
        for name, r, settings_ in pools:
            for note in r.warnings:
                click.echo(f"note: pool {name}: {note}", err=True)
            for warning in settings_.warnings:
                click.echo(f"warning: pool {name}: {warning}", err=True)
            click.echo(f"# pool {_comment_text(name) if handoff.shell else name}")
            click.echo("\n".join(settings_.lines(handoff.shell)))
        return
    if as_json:
        emit_json(answer.to_json())
    elif not answer.speculating:
        click.echo("not speculating: no pool of the deployment speculates")
    else:
        click.echo("\n\n".join(f"{'pool':<8} {name}\n{format_resolution(r)}"
                                for name, r in answer.pools))


def _run_one(settings: Any, run: dict[str, Any], as_json: bool,
             handoff: Handoff | None = None) -> None:
    from registry_db.resolve.plan import resolve as resolve_run

    answer = _resolved(settings, run, as_json, resolve_run)
    if handoff is not None:
        _emit(answer, handoff, as_json)
    elif as_json:
        emit_json(answer.to_json())
    else:
        click.echo(format_resolution(answer))


def _resolved(settings: Any, run: dict[str, Any], as_json: bool, resolve_with: Any) -> Any:
    """``resolve_with(bind, request)`` for the request the flags describe, on the registry
    (:func:`~registry_db.resolve.reading.reading`), its files' warnings on stderr first; a
    refusal is printed (the contract's JSON, or one line) and exits 1."""
    from registry_db.errors import ResolutionRefused
    from registry_db.resolve.reading import reading

    try:
        request, warnings = _request(labelled_run(settings, run))
        for finding in warnings:
            click.echo(finding.render(), err=True)
        with reading(settings.url) as bind:
            return resolve_with(bind, request)
    except ResolutionRefused as refusal:
        refuse(refusal, as_json)


def refuse(refusal: Any, as_json: bool, prefix: str = "") -> None:
    """Print a refusal (the contract's JSON, or one line on stderr) and exit 1."""
    if as_json:
        emit_json({"refused": {"reason": str(refusal.reason),
                               "message": prefix + refusal.message}})
    else:
        click.echo(f"refused ({refusal.reason}): {prefix}{refusal.message}", err=True)
    sys.exit(1)


def _handed(handoff: Handoff, resolution: Any, as_json: bool, prefix: str = "") -> Any:
    """``handoff``'s settings for ``resolution``; a refused hand-off is printed, exit 1."""
    from registry_db.errors import ResolutionRefused

    try:
        return handoff.settings(resolution)
    except ResolutionRefused as refusal:
        refuse(refusal, as_json, prefix)


def _emit(answer: Any, handoff: Handoff, as_json: bool) -> None:
    """What the engine takes, on stdout; the answer's notes on stderr, where a shell's ``eval``
    of stdout does not see them."""
    settings = _handed(handoff, answer, as_json)
    if as_json:
        emit_json({**settings.to_json(), "resolution": answer.to_json()})
        return
    for note in answer.warnings:
        click.echo(f"note: {note}", err=True)
    for warning in settings.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo("\n".join(settings.lines(handoff.shell)))


def _comment_text(name: str) -> str:
    """``name`` for a shell comment: quoted, and with no character (a newline) that could end
    the comment and start a command under ``eval``."""
    import shlex

    return shlex.quote(name).encode("unicode_escape").decode("ascii")


def _request(run: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The request the flags describe: each input from its own flags, then from the files
    (``--workload``, ``--scenario``) that state it, in the table's order."""
    from registry_db.inputs.run import Request

    fields = {row.name: row.from_flags(run) for row in INPUTS}
    warnings: list[Any] = []
    for flag in FLAGS:
        if flag.load is not None and run[flag.name] is not None:
            stated, found = flag.load(run[flag.name])
            fields.update(stated)
            warnings.extend(found)
    return Request(**fields), warnings


def _run_batch(settings: Any, path: str, emit: str | None = None,
               allow_inexact: bool = False) -> int:
    """Every line's answer on stdout, in order, each chunk's as soon as it is answered; 1 when
    some line was no request (those lines named on stderr), else 0."""
    from registry_db.cli.batch_json import answer_line, emit_object, with_emit, write_answers
    from registry_db.gcpause import gc_paused
    from registry_db.inputs.batch_stream import chunks
    from registry_db.resolve.batch import Seen, answer_chunks
    from registry_db.resolve.reading import reading

    bad = BadLines()
    said: dict[str, None] = {}  # the engine's warnings, each once, in order

    def text(line: Any) -> str:
        # The line's id comes first in its answer, for joining by id; "emit" last.
        out = answer_line(line.answer, line.id)
        if emit is not None:
            knobs, warnings, refusal = emit_object(line.answer, emit, allow_inexact)
            if refusal is not None:  # the engine would not realise it: no settings to give
                return answer_line(refusal, line.id)
            out = with_emit(out, knobs)
            said.update(dict.fromkeys(warnings))
        return out

    # A line answered before is written again from its text, which the batch keeps (Seen). A
    # regular file never waits for more input: the next chunk may be read ahead (PostgreSQL).
    seen = Seen(keep=text)
    # The command's bulk work builds many small objects and no cycles (registry_db.gcpause).
    with batch_input(path) as (stream, shown), gc_paused(), reading(settings.url) as bind, \
            contextlib.closing(answer_chunks(bind, chunks(stream, name=path), seen,
                                             text=emit is None,
                                             ahead=_size(stream) is not None)) as batch:
        for answers in batch:
            out = []
            for item in answers:
                if type(item) is not str:  # not kept: a refusal of a line, or no request
                    bad.count(item, item.line)
                    item = text(item)
                out.append(item)
            if not write_answers(out):  # the reader has gone: the rest is not read
                break
            shown()
    for warning in said:
        click.echo(f"warning: {warning}", err=True)
    bad.report()
    return 1 if bad.lines else 0


class BadLines:
    """The lines of a batch that were no request, for the one line on stderr that names them."""

    #: Line numbers named on stderr; the rest are counted.
    SHOWN = 5

    def __init__(self) -> None:
        self.lines = 0
        self.first: list[str] = []

    def count(self, line: Any, number: int) -> None:
        """Count ``line``, the batch's line ``number`` (its answer or its check), if it was no
        request."""
        answer = line.answer
        if type(answer) is Refusal and answer.reason == R.INVALID_REQUEST:
            self.lines += 1
            if len(self.first) < self.SHOWN:
                self.first.append(str(number))

    def report(self) -> None:
        if self.lines:
            more = f" and {self.lines - len(self.first)} more" if self.lines > len(self.first) \
                else ""
            click.echo(f"{self.lines} line(s) were no request (answered invalid_request): "
                       f"line {', '.join(self.first)}{more}", err=True)


@contextlib.contextmanager
def batch_input(path: str) -> Iterator[tuple[Any, Any]]:
    """The batch's binary stream ('-': stdin) and a callback that moves a progress bar over
    it: on a terminal's stderr, for a file of known size (never on a pipe or a log)."""
    from registry_db.cli.output import progress
    from registry_db.errors import Finding, InvalidInput

    try:
        if path == "-":
            stdin = sys.stdin
            if stdin is None:  # started with stdin closed (0<&-)
                raise OSError(9, "standard input is closed")
            stream = getattr(stdin, "buffer", stdin)
            owned = None
        else:
            stream = owned = open(path, "rb")
    except OSError as exc:
        raise InvalidInput([Finding(path, 1, 1, "", "unreadable_file",
                                    f"cannot read the batch: {exc.strerror}")]) from None
    try:
        size = _size(stream)
        with progress() as bar:
            if bar is None or size is None:
                yield stream, lambda: None
                return

            def moved() -> None:
                bar("resolve", min(stream.tell(), size), size)

            yield stream, moved
    finally:
        if owned is not None:
            owned.close()


def _size(stream: Any) -> int | None:
    """The size of a regular file's stream (None: a pipe, a terminal, or not told)."""
    import os
    import stat

    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def format_resolution(answer: Any) -> str:
    """The readable form: AL, rate, K, rates, layer, set, profile, the set's revision, source,
    then notes.
    Numbers are rounded for reading (``--json`` keeps every digit)."""
    from registry_db.cli.output import readable, readable_list, with_stderr

    rates = readable_list(answer.per_position_rates)
    how = "derived: minimum-variance schedule" if answer.rates_derived else "as stated"
    rows: list[tuple[str, Any]] = [
        ("AL", readable(with_stderr(answer.acceptance_length, answer.uncertainty))),
        ("rate", readable(answer.acceptance_rate)),
        ("K", answer.num_spec_tokens),
        ("rates", f"{rates}  ({how})"),
        ("layer", answer.layer),
        ("set", answer.profile_set or "-"),
        ("profile", answer.profile or "-"),
        ("revision", "-" if answer.revision is None else answer.revision),
        ("source", answer.source or "-"),
    ]
    rows.extend(("note", w) for w in answer.warnings)
    return "\n".join(f"{label:<8} {value}" for label, value in rows)
