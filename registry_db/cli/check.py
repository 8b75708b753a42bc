"""``registry check``: a measured run against the registry, for CI (exit 0 consistent, 1 drift).

Thin over the library: the run's counters are read by the counter sources' shared reader
(:func:`registry_db.sources.counters.detect.measure_run`, as ``registry ingest`` reads them),
the run's terms by ``registry resolve``'s own flags, and the comparison is
:mod:`registry_db.resolve.check`'s; this module parses and renders.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from registry_db.cli.output import annotation, emit_json, format_option, handle_errors, json_option
from registry_db.cli.resolve import _request, _run_options, labelled_run
from registry_db.inputs.layers import FLAGS
from registry_db.sources.counters.detect import COUNTER_SOURCES

#: The run's flags a check takes (``resolve``'s rows): which stored value the run is held to.
#: Flags that state a value are left out: a check measures the value instead.
_TERMS = ("--model", "--method", "--k", "--thinking", "--category", "--fallback-category",
          "--hardware", "--set")
CHECK_FLAGS = tuple(flag for flag in FLAGS if flag.decl in _TERMS)


def _options(fn: Any) -> Any:
    return _run_options(fn, CHECK_FLAGS)


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    import math

    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value!r} is not a finite number")
    return value


@click.command("check")
@click.argument("after", required=False, metavar="AFTER")
@click.option("--before", metavar="BEFORE",
              help="The scrape taken before the run (a file, - or an http(s):// URL; default: "
                   "count from the server's start).")
@click.option("--source", type=click.Choice(list(COUNTER_SOURCES)),
              help="Whose counters AFTER holds (default: told from the counters it holds).")
@click.option("--model-name", metavar="SERVED",
              help="The served model_name to read when a vLLM scrape serves several.")
@_options
@click.option("--deployment", type=click.Path(dir_okay=False), metavar="FILE",
              help="Deployment YAML: the run is its one speculating pool, at the pool's "
                   "method and K.")
@click.option("--max-z", type=click.FloatRange(min=0, min_open=True), metavar="Z",
              callback=_finite,
              help="Drift past |z| > Z combined standard errors (default 3).")
@click.option("--tolerance", type=click.FloatRange(min=0), metavar="AL", callback=_finite,
              help="Drift past |measured - registered| > AL instead.")
@click.option("--batch", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE.jsonl",
              help="Check one run per line: a resolve --batch request plus \"counts\"; one "
                   "answer per line.")
@json_option
@format_option
@click.pass_context
@handle_errors
def check(ctx: click.Context, after: str | None, before: str | None, source: str | None,
          model_name: str | None, deployment: str | None, max_z: float | None,
          tolerance: float | None, batch: str | None, as_json: bool, output_format: str,
          **run: Any) -> None:
    """Check a measured run against the registry: does it still accept what the registry says?

    Reads the run's counters as `registry ingest` does (vLLM, ATOM, SGLang or TensorRT-LLM;
    AFTER and BEFORE a file, - or an http(s):// URL), resolves the registry's value for the
    run's terms exactly as `registry resolve` does, and compares: the difference and
    z = (measured - registered) / sqrt(stderr_m^2 + stderr_r^2), a value without counts
    having stderr 0. Exit 0 consistent, 1 drift (|z| > --max-z, default 3, or the difference
    past --tolerance), also 1 for a refused resolution or a bad scrape. --batch checks many
    runs in one pass and exits 1 unless every line is consistent. --format github adds a
    GitHub annotation for each drift or refusal (on the batch file's line).

    \b
    Example:
        curl -s localhost:8000/metrics > before.prom
        vllm bench serve ...
        registry check http://localhost:8000/metrics --before before.prom \\
            --model deepseek-v4.1-flash --method dspark --k 5 --thinking off \\
            --category coding --hardware b300
        registry check --batch runs.jsonl --json > verdicts.jsonl
    """
    from registry_db.resolve.check import DEFAULT_MAX_Z, Threshold

    github = output_format == "github"
    if github and as_json:
        raise click.UsageError("--json and --format github cannot be used together")
    if max_z is not None and tolerance is not None:
        raise click.UsageError("--max-z and --tolerance are two ways to say where drift "
                               "starts; give one")
    threshold = (Threshold(None, tolerance) if tolerance is not None
                 else Threshold(DEFAULT_MAX_Z if max_z is None else max_z))
    if batch is not None:
        given = [name for name, value in (("AFTER", after), ("--before", before),
                                          ("--source", source), ("--model-name", model_name),
                                          ("--deployment", deployment)) if value is not None]
        given += [flag.decl for flag in CHECK_FLAGS if run[flag.name] not in (None, ())]
        if given:
            raise click.UsageError(f"--batch reads every run and its counts from its file; "
                                   f"drop {given[0]}")
        sys.exit(_check_batch(ctx.obj, batch, threshold, as_json, github))
    if after is None:
        raise click.UsageError("give AFTER, the run's counters (or --batch FILE)")
    required = ("model",) if deployment is not None else ("model", "method", "k")
    for name in required:
        if run[name] is None:
            raise click.UsageError(f"--{name} is required (or give --batch FILE)")
    if deployment is not None and (run["method"] is not None or run["k"] is not None):
        raise click.UsageError("--deployment states the pool's method and K; drop "
                               f"{'--method' if run['method'] is not None else '--k'}")
    _check_one(ctx.obj, after, before, source, model_name, deployment, threshold, as_json, run,
               github)


def _check_one(settings: Any, after: str, before: str | None, source: str | None,
               model_name: str | None, deployment: str | None, threshold: Any, as_json: bool,
               run: dict[str, Any], github: bool = False) -> None:
    from registry_db.errors import ResolutionRefused
    from registry_db.resolve import check as checking
    from registry_db.resolve.reading import reading
    from registry_db.sources.counters.detect import measure_run

    dep = None
    if deployment is not None:
        from registry_db.inputs.deployment import load_deployment
        from registry_db.inputs.request import POOL_STANDS_IN

        dep = load_deployment(deployment)
        pool = checking.measured_pool(dep)
        k = pool.num_spec_tokens
        run = {**run, **POOL_STANDS_IN}
    else:
        k = run["k"]
    assert k is not None
    _, measured = measure_run(after, before, k, source=source, model_name=model_name)
    if not as_json:
        for finding in measured.warnings:
            click.echo(finding.render(), err=True)
    request, _ = _request(labelled_run(settings, {**{flag.name: None for flag in FLAGS},
                                                  **run}))
    counts = measured.tally.counts()
    try:
        with reading(settings.url) as bind:
            result = (checking.check_run(bind, request, counts, threshold) if dep is None
                      else checking.check_deployment(bind, request, dep, counts, threshold))
    except ResolutionRefused as refusal:
        if as_json:
            emit_json(refusal.to_json())
        else:
            click.echo(f"refused ({refusal.reason}): {refusal.message}", err=True)
            if github:
                click.echo(annotation("error", refusal.message, file=_local(after),
                                      title=f"refused ({refusal.reason})"))
        sys.exit(1)
    if as_json:
        emit_json(result.to_json())
    else:
        for note in result.registered.warnings:
            click.echo(f"note: {note}", err=True)
        click.echo(glance(result))
        if github and result.drifted:
            click.echo(annotation("error", glance(result), file=_local(after), title="drift"))
    sys.exit(1 if result.drifted else 0)


def _local(path: str) -> str | None:
    """A scrape's path as an annotation's file: a file of the work tree, not a URL or -."""
    return None if path == "-" or "://" in path else path


def _check_batch(settings: Any, path: str, threshold: Any, as_json: bool,
                 github: bool = False) -> int:
    """Every line's check on stdout, in order, each chunk's as soon as it is checked; 0 when
    every line is consistent, else 1 (lines that were no request named on stderr)."""
    from registry_db.cli.batch_json import answer_line, write_answers
    from registry_db.cli.resolve import BadLines, batch_input
    from registry_db.inputs.batch_stream import chunks
    from registry_db.model import Refusal
    from registry_db.resolve.check import check_chunks
    from registry_db.resolve.reading import reading

    failed = 0
    bad = BadLines()
    writing = True
    with batch_input(path) as (stream, shown), reading(settings.url) as bind:
        for checked in check_chunks(bind, chunks(stream, name=path), threshold):
            out: list[str] = []
            for line in checked:
                failed += not line.consistent
                bad.count(line, line.line)
                if as_json:
                    out.append(answer_line(line.answer, line.id))
                    continue
                name = f"{line.line}" if line.id is None else f"{line.line} ({line.id})"
                answer = line.answer
                said = (f"refused ({answer.reason}): {answer.message}"
                        if type(answer) is Refusal else glance(answer))
                out.append(f"{name}: {said}")
                if github and not line.consistent:
                    out.append(annotation("error", said, file=_local(path), line=line.line,
                                          title="refused" if type(answer) is Refusal
                                          else "drift"))
            # The reader gone, every line is still checked: the exit code is a CI gate's.
            writing = writing and write_answers(out)
            shown()
    bad.report()
    return 1 if failed else 0


def glance(result: Any) -> str:
    """The check in one line: ``measured 1.42 ± 0.0034 over 12,000 steps; registry 3.84 from
    SET revision N; drift, z = -80.1 (|z| > 3)``."""
    from registry_db.cli.output import readable, with_stderr

    m, r = result.measured, result.registered
    u = m.uncertainty
    if r.profile_set is not None:
        where = f"registry {with_stderr(r.acceptance_length, r.uncertainty)} from " \
                f"{r.profile_set} revision {r.revision}"
    else:
        where = f"the {r.layer} layer's value {readable(r.acceptance_length)}"
    threshold = result.threshold
    z = "z undefined (no spread)" if result.z is None else f"z = {result.z:.1f}"
    if threshold.tolerance is not None:
        past = "within" if not result.drifted else "past"
        how = f"difference {result.difference:+.4f} ({past} ±{threshold.tolerance:g}), {z}"
    else:
        how = f"{z} ({'|z| > ' if result.drifted else '|z| <= '}{threshold.max_z:g})"
    line = (f"measured {with_stderr(m.acceptance_length, u)} over {u.drafts:,} steps; "
            f"{where}; {result.verdict}, {how}")
    if "± ≤" in line:  # the bound μ(K − μ) of the totals, said where it is shown
        line += "; ± ≤S: at most S, the totals give no per-position counts"
    return line
