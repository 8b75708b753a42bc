"""``registry ingest``: other tools' published numbers become profile-set files.

Thin over :mod:`registry_db.sources`: parse the flags, call the reader, write what it rendered
(every set already checked by the registry's validator), print warnings on stderr, and let
:func:`~registry_db.cli.handle_errors` map refusals to exit codes (1 invalid input, 2 usage).
Touches no database: the output is reviewed and committed, then ``registry import``-ed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from registry_db.cli.output import (
    check_category,
    emit_json,
    handle_errors,
    progress,
    report_findings,
)
from registry_db.model import THINKING_MODES

OUTPUT_HELP = ("Where to write: a folder (one <set>.yaml per set, created when missing), a "
               "*.yaml file, or - for stdout (the default; one set only).")
JSON_HELP = ('Print what was written as JSON: {"sets": [{"name", "file", "profiles"}], '
             '"warnings": [...]} (needs -o DIR or -o FILE).')


@click.group()
def ingest() -> None:
    """Turn other tools' published acceptance into profile-set files to review and import.

    Touches no database. Each command writes AcceptanceProfileSet YAML that `registry
    validate` accepts; review it, commit it under acceptance/, then `registry import` it.

    \b
    Example:
        registry ingest inferencex golden_al_distribution/ --engine-image IMAGE \\
            -o acceptance/
        registry ingest vllm-metrics after.prom --before before.prom --model M \\
            --method mtp --k 3 --thinking on --category coding --hardware b300 \\
            --engine-image IMAGE --temperature 1.0 -o acceptance/m-mtp.yaml
        registry ingest sglang responses.jsonl --model M --method eagle --k 3 ...
    """


@ingest.command("inferencex")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--name", metavar="SET",
              help="Merge every input into this one set (default: one set per file, named "
                   "after the file).")
@click.option("--map", "map_file", metavar="MAP.yaml",
              help="Catalog names for the source's model spellings (models:), a method per "
                   "file (methods:), and per file what its header does not say (files:); see "
                   "the README.")
@click.option("--engine-image", metavar="IMAGE",
              help="The engine image the curves were measured with, for files that state "
                   "none.")
@click.option("--hardware", metavar="CHIP",
              help="The chip the curves were measured on, for files that state none.")
@click.option("--category", metavar="C", callback=check_category,
              help="The workload category, for files that state none (such as coding).")
@click.option("--tp", type=click.IntRange(min=0), metavar="N",
              help="The tensor-parallel width, for files that state none.")
@click.option("--benchmark", metavar="NAME",
              help="The prompt set (such as 'SPEED-Bench Qualitative'), for files that state "
                   "none.")
@click.option("--prompts", type=click.IntRange(min=0), metavar="N",
              help="How many prompts each cell ran, for files that state none.")
@click.option("--source-base", metavar="URL",
              help="Record each file's source as URL/<file name> instead of its path.")
@click.option("--keep-going", is_flag=True,
              help="Write the files that have no errors and exit 1 naming the others "
                   "(default: any error, and nothing is written).")
@click.option("-o", "--output", "out", default="-", show_default=True, metavar="DIR|FILE|-",
              help=OUTPUT_HELP)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@handle_errors
def inferencex(paths: tuple[str, ...], name: str | None, map_file: str | None,
               source_base: str | None, keep_going: bool, out: str, as_json: bool,
               quiet: bool, **facts: Any) -> None:
    """Read InferenceX golden AL curves (golden_al_distribution/*.yaml) into profile sets.

    PATH is a curve file or a folder of them. Each (thinking mode, K) cell becomes a profile
    with the AL as written and, from a counter comment, its counts; the header's facts (run,
    benchmark, chip, image, TP, sampling per thinking mode, settings) go to the provenance.
    A fact the header does not state comes from a flag (every file) or the map's files:
    entry (one file); a flag or entry that disagrees with the header is an error naming
    both. A header line the reader does not understand is a warning (FILE:LINE); a file
    that is not a golden AL curve, or lacks what a measured profile needs, is an error
    (FILE:LINE:COL) and nothing is written, unless --keep-going. --json prints the sets
    written, their files and profile counts, and the warnings.

    \b
    Example:
        registry ingest inferencex dsv41flash_dspark.yaml --hardware b300 \\
            --prompts 80 \\
            --source-base https://github.com/ORG/REPO/blob/main/golden_al \\
            -o acceptance/
        registry ingest inferencex curves/ --name inferencex-golden-al \\
            --map map.yaml --engine-image vllm/vllm-openai:v0.22.0 \\
            -o acceptance/inferencex-golden-al.yaml
    """
    from registry_db.errors import RegistryError
    from registry_db.sources.inferencex import read as source

    _json_needs_a_file(as_json, out)
    curve_map = source.load_map(map_file) if map_file is not None else None
    with progress(quiet) as bar:
        result = source.read_inferencex(paths, name=name, curve_map=curve_map,
                                        source_base=source_base, keep_going=keep_going,
                                        progress=bar, **facts)
    if result.refused and not as_json:
        report_findings(result.refused, as_json=False)
    _finish(result, out, as_json)
    if result.refused:
        files = sorted({f.file for f in result.refused if f.is_error})
        raise RegistryError(f"{len(files)} input(s) refused and not written: "
                            f"{', '.join(files)}")


# --- the counter sources: one set of flags, one way to read them ----------------------------------


class _Finite(click.FloatRange):
    """A float range that also refuses ``nan`` and ``inf`` (which every range test passes)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


#: The flags a counter source needs, in the order a missing one is named.
_REQUIRED = ("model", "method", "k", "thinking", "category", "hardware", "engine_image",
             "temperature")


def _counter_flags(fn: Any) -> Any:
    """The run's facts, the output flags and --round, shared by every counter source; the
    required ones are checked together (:func:`_facts`), so that every missing one is named."""
    from registry_db.model import MAX_K

    options = [
        click.option("--model", metavar="M", help="The catalog model name. [required]"),
        click.option("--method", metavar="X", help="The speculative method, e.g. mtp. "
                                                   "[required]"),
        # K sizes what is read: checked here, before any input is.
        click.option("--k", "k", type=click.IntRange(1, MAX_K), metavar="K",
                     help=f"num_speculative_tokens the server ran with (1..{MAX_K}). "
                          "[required]"),
        click.option("--thinking", type=click.Choice(THINKING_MODES), help="[required]"),
        click.option("--category", metavar="C", callback=check_category,
                     help="The workload category, such as coding. [required]"),
        click.option("--hardware", metavar="CHIP", help="The chip it ran on. [required]"),
        click.option("--engine-image", metavar="IMAGE", help="The engine image. [required]"),
        click.option("--temperature", type=_Finite(min=0), metavar="T", help="[required]"),
        click.option("--top-p", type=_Finite(0, 1, min_open=True), metavar="P"),
        click.option("--top-k", type=click.IntRange(min=-1), metavar="N"),
        click.option("--max-tokens", type=click.IntRange(min=0), metavar="N"),
        click.option("--prompts", type=click.IntRange(min=0), metavar="N",
                     help="How many prompts the run covered."),
        click.option("--source", metavar="TEXT",
                     help="Where the counts came from (default: the inputs' names)."),
        click.option("--run", metavar="URL", help="The job that ran the benchmark."),
        click.option("--benchmark", metavar="NAME", help="The prompt set, e.g. 'SPEED-Bench'."),
        # Two places at least: the counts are recorded too, and the validator holds AL
        # within 0.01 of them.
        click.option("--round", "round_to", type=click.IntRange(min=2), metavar="N",
                     help="Round AL and the rates to N >= 2 decimals (the rates still sum to "
                          "AL - 1)."),
        click.option("--name", metavar="SET",
                     help="The set's name (default: the output file's name, else the "
                          "input's)."),
        click.option("-o", "--output", "out", default="-", show_default=True, metavar="FILE|-",
                     help="A *.yaml file, a folder, or - for stdout."),
        click.option("--json", "as_json", is_flag=True, help=JSON_HELP),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _facts(flags: dict[str, Any], out: str, as_json: bool) -> tuple[Any, dict[str, Any]]:
    """The run's facts from the flags (every missing required flag named at once), and the
    reader's keywords (--round, --name)."""
    from registry_db.model import Sampling
    from registry_db.sources.counters.common import Facts
    from registry_db.sources.ingested import safe_name

    missing = [f"--{n.replace('_', '-')}" for n in _REQUIRED if flags.get(n) is None]
    if missing:
        raise click.UsageError(f"missing {'option' if len(missing) == 1 else 'options'} "
                               f"{', '.join(missing)}")
    _json_needs_a_file(as_json, out)
    name = flags.pop("name")
    if name is None and out != "-" and Path(out).suffix in (".yaml", ".yml"):
        name = safe_name(Path(out).stem)
    sampling = Sampling(temperature=flags.pop("temperature"), top_p=flags.pop("top_p"),
                        top_k=flags.pop("top_k"), max_tokens=flags.pop("max_tokens"))
    options = {"round_to": flags.pop("round_to"), "name": name}
    return Facts(sampling=sampling, **flags), options


def _local_source(facts: Any, *inputs: str | None) -> list[Any]:
    """A warning when the recorded source would be an absolute path of this machine (no
    --source given): nobody else can open it, so the profile's origin is lost once shared."""
    from registry_db.sources.counters.common import problem

    if facts.source is not None:
        return []
    local = [i for i in inputs if i is not None and i != "-"
             and not i.startswith(("http://", "https://")) and Path(i).is_absolute()]
    if not local:
        return []
    return [problem(local[0], 0, "provenance.source", "local_source",
                    f"the profile's provenance.source will name {', '.join(local)}, a path on "
                    "this machine that no one else can open; give --source with where the "
                    "counts can be found (a URL, an artifact, a CI run)", severity="warning")]


def _scrapes(after: str, before: str | None) -> None:
    if after == "-" and before == "-":
        raise click.UsageError("AFTER and --before cannot both be - (stdin holds one scrape)")


_INPUT_HELP = "a file, - for stdin, or an http:// or https:// URL to fetch"


@ingest.command("vllm-metrics")
@click.argument("after", metavar="AFTER")
@click.option("--before", metavar="BEFORE",
              help=f"The scrape taken before the run ({_INPUT_HELP}; default: count from the "
                   "server's start).")
@click.option("--model-name", metavar="SERVED",
              help="The served model_name to read when the scrape serves several.")
@_counter_flags
@handle_errors
def vllm_metrics(after: str, before: str | None, out: str, model_name: str | None,
                 as_json: bool, **flags: Any) -> None:
    """Read vLLM's speculative-decoding counters (/metrics scrapes) into a measured profile.

    AFTER and BEFORE are scrapes: a file, - for stdin, or the server's http(s):// URL.
    AL = 1 + Δaccepted / Δdrafts and p_i = Δaccepted_per_pos[i-1] / Δdrafts, vLLM's own
    definitions, summed over engines, unrounded unless --round is given; the counts are
    recorded. A missing counter or series, a restart between the scrapes (a counter's
    _created time or process_start_time_seconds changed, or a counter went down; both times
    are named), swapped scrapes, zero drafts or positions other than 0..K-1 are errors;
    series of several servers are summed with a warning. --json prints the set written, its
    file and the warnings.

    \b
    Example:
        curl -s localhost:8000/metrics > before.prom
        vllm bench serve ...
        registry ingest vllm-metrics http://localhost:8000/metrics \\
            --before before.prom --model example-model --method eagle3 --k 3 \\
            --thinking off --category coding --hardware b300 \\
            --engine-image vllm/vllm-openai:v0.22.0 --temperature 0.6 \\
            -o acceptance/example-model-eagle3.yaml
    """
    from registry_db.sources.counters.vllm import read_vllm_metrics

    facts, options = _facts(flags, out, as_json)
    _scrapes(after, before)
    _finish(read_vllm_metrics(after, before, facts, model_name=model_name, **options), out,
            as_json, _local_source(facts, after, before))


@ingest.command("atom-metrics")
@click.argument("after", metavar="AFTER")
@click.option("--before", metavar="BEFORE",
              help=f"The scrape taken before the run ({_INPUT_HELP}; default: count from the "
                   "server's start).")
@_counter_flags
@handle_errors
def atom_metrics(after: str, before: str | None, out: str, as_json: bool,
                 **flags: Any) -> None:
    """Read ATOM's MTP counters (/metrics scrapes) into a measured profile, exactly per position.

    atom:mtp_decode_steps{accepted_tokens="n"} counts the verification steps that accepted n
    drafts; with c_n their growth, AL = 1 + Σ n·c_n / Σ c_n and p_i = Σ_{n>=i} c_n / Σ c_n,
    the whole distribution. The flags, inputs and checks are vllm-metrics'; counters of
    several servers are refused.

    \b
    Example:
        registry ingest atom-metrics http://localhost:8000/metrics \\
            --before before.prom --model kimi-k3 --method dspark --k 7 \\
            --thinking on --category coding --hardware mi355x \\
            --engine-image rocm/atom:IMAGE --temperature 1.0 -o kimi.yaml
    """
    from registry_db.sources.counters.atom import read_atom_metrics

    facts, options = _facts(flags, out, as_json)
    _scrapes(after, before)
    _finish(read_atom_metrics(after, before, facts, **options), out, as_json,
            _local_source(facts, after, before))


@ingest.command("vllm-bench")
@click.argument("path", metavar="RESULT.json")
@click.option("--result", "run_index", type=click.IntRange(min=1), metavar="N",
              help="Which result of an --append-result file to read (1 is the first).")
@_counter_flags
@handle_errors
def vllm_bench(path: str, run_index: int | None, out: str, as_json: bool,
               **flags: Any) -> None:
    """Read a `vllm bench serve --save-result` JSON into a measured profile, exact per position.

    The benchmark scrapes the server's /metrics around the run and writes the deltas:
    spec_decode_num_drafts, spec_decode_draft_tokens, spec_decode_accepted_tokens and
    spec_decode_per_position_acceptance_rates (each a count over the drafts, recovered
    exactly). AL = 1 + accepted / drafts. A result without spec_decode_* fields, a negative
    count (the server restarted), or rates that are no counts over the drafts are refused.
    RESULT.json may be - (stdin).

    \b
    Example:
        vllm bench serve ... --save-result --result-filename run.json
        registry ingest vllm-bench run.json --model example-model \\
            --method eagle3 --k 3 --thinking off --category coding \\
            --hardware b300 \\
            --engine-image vllm/vllm-openai:v0.22.0 --temperature 0.6 \\
            -o acceptance/m.yaml
    """
    from registry_db.sources.counters.vllm_bench import read_vllm_bench

    facts, options = _facts(flags, out, as_json)
    _finish(read_vllm_bench(path, facts, run=run_index, **options), out, as_json,
            _local_source(facts, path))


@ingest.command("vllm-log")
@click.argument("path", metavar="SERVER.log")
@_counter_flags
@handle_errors
def vllm_log(path: str, out: str, as_json: bool, **flags: Any) -> None:
    """Read vLLM's server log (its "SpecDecoding metrics:" lines) into a measured profile.

    Each line is one logging interval: its Accepted and Drafted tokens are summed. The line
    counts no drafts, so drafts = drafted tokens / K, exact when every step drafts K tokens;
    an interval whose printed mean acceptance length disagrees is refused, as is a log that
    holds a second server start between its lines. Per-position rates are given when the
    3-decimal rates single out their counts. SERVER.log may be - (stdin).

    \b
    Example:
        registry ingest vllm-log server.log --model example-model --method mtp \\
            --k 3 --thinking on --category coding --hardware b300 \\
            --engine-image vllm/vllm-openai:v0.22.0 --temperature 1.0 \\
            -o acceptance/m.yaml
    """
    from registry_db.sources.counters.vllm_log import read_vllm_log

    facts, options = _facts(flags, out, as_json)
    _finish(read_vllm_log(path, facts, **options), out, as_json, _local_source(facts, path))


@ingest.command("sglang")
@click.argument("path", metavar="FILE.jsonl")
@_counter_flags
@handle_errors
def sglang(path: str, out: str, as_json: bool, **flags: Any) -> None:
    """Read SGLang requests' meta_info (one JSON object per line) into a measured profile.

    AL = 1 + Σ spec_num_correct_drafts / Σ spec_verify_ct over the requests; when every
    request carries spec_correct_drafts_histogram, the per-position rates are exact. The
    Prometheus gauge sglang:spec_accept_length, and spec_accept_length alone, are ratios and
    are refused. FILE.jsonl may be - (stdin).

    \b
    Example:
        registry ingest sglang responses.jsonl --model glm-5.2 --method eagle \\
            --k 3 --thinking on --category coding --hardware h200 \\
            --engine-image IMAGE \\
            --temperature 1.0 -o acceptance/glm-5.2-eagle.yaml
    """
    from registry_db.sources.counters.sglang import read_sglang

    facts, options = _facts(flags, out, as_json)
    _finish(read_sglang(path, facts, **options), out, as_json, _local_source(facts, path))


@ingest.command("trtllm-stats")
@click.argument("path", metavar="FILE.json")
@_counter_flags
@handle_errors
def trtllm_stats(path: str, out: str, as_json: bool, **flags: Any) -> None:
    """Read TensorRT-LLM's /metrics iteration stats (JSON) into a measured profile.

    AL = 1 + Σ numAcceptedTokens / Σ numRequestsWithDraftTokens over the iterations'
    specDecodingStats. FILE.json is one /metrics response or several appended (one per line),
    - for stdin, or the server's http(s):// /metrics URL (which answers the iterations since
    its last call). Attention-DP ranks' rows of an iteration are read once (refused when
    their counts differ); an iteration listed twice, and frames the server dropped
    (statsSequence, statsDroppedFrames), are refused. Prometheus text: trtllm-metrics.

    \b
    Example:
        # with enable_iter_perf_stats: true
        curl -s localhost:8000/metrics > stats.json
        registry ingest trtllm-stats stats.json --model deepseek-v4 --method mtp \\
            --k 3 --thinking on --category coding --hardware gb300 \\
            --engine-image IMAGE \\
            --temperature 1.0 -o acceptance/deepseek-v4-mtp.yaml
    """
    from registry_db.sources.counters.trtllm import read_trtllm_stats

    facts, options = _facts(flags, out, as_json)
    _finish(read_trtllm_stats(path, facts, **options), out, as_json,
            _local_source(facts, path))


@ingest.command("trtllm-metrics")
@click.argument("after", metavar="AFTER")
@click.option("--before", metavar="BEFORE",
              help=f"The scrape taken before the run ({_INPUT_HELP}; default: count from the "
                   "server's start).")
@_counter_flags
@handle_errors
def trtllm_metrics(after: str, before: str | None, out: str, as_json: bool,
                   **flags: Any) -> None:
    """Read TensorRT-LLM's per-position counters (Prometheus scrapes) into a measured profile.

    trtllm_spec_decode_drafted_tokens_total and trtllm_spec_decode_accepted_tokens_total
    {token_position="p"} grow when a request finishes; with d_p and a_p their growth, AL =
    1 + Σ a_p / d_0 and p_i = a_(i-1) / d_0, exact per position. Positions past K-1, zero
    drafts, a counter that went down and counts that contradict each other are errors; scrape
    when the server is idle (a request in flight is counted when it ends).

    \b
    Example:
        curl -s localhost:8000/prometheus/metrics > before.prom
        registry ingest trtllm-metrics http://localhost:8000/prometheus/metrics \\
            --before before.prom --model deepseek-v4 --method mtp --k 3 \\
            --thinking on --category coding --hardware gb300 \\
            --engine-image IMAGE --temperature 1.0 -o acceptance/dsv4-mtp.yaml
    """
    from registry_db.sources.counters.trtllm_metrics import read_trtllm_metrics

    facts, options = _facts(flags, out, as_json)
    _scrapes(after, before)
    _finish(read_trtllm_metrics(after, before, facts, **options), out, as_json)


def _json_needs_a_file(as_json: bool, out: str) -> None:
    # Checked before any input is read: stdout cannot carry both the YAML and the summary.
    if as_json and out == "-":
        raise click.UsageError("--json prints the summary on stdout, where -o - would write the "
                               "YAML; give -o DIR or -o FILE.yaml")


def _finish(result: Any, out: str, as_json: bool = False, extra: list[Any] | None = None
            ) -> None:
    """Write the sets; report warnings (the reader's, then ``extra``) and what was written
    (text on stderr, or --json)."""
    from registry_db.sources.ingested import write

    warnings = list(result.warnings) + list(extra or ())
    misnamed = _name_not_file(result, out)
    if misnamed is not None:
        warnings.append(misnamed)
    if warnings and not as_json:
        report_findings(warnings, as_json=False)
    written = write(result, out)
    if as_json:
        summary = {"sets": [{"name": ps.name, "file": path, "profiles": len(ps.profiles)}
                            for path, ps in zip(written, result.sets)],
                   "warnings": [f.to_json() for f in warnings]}
        if getattr(result, "refused", ()):  # ingest inferencex --keep-going
            summary["refused"] = [f.to_json() for f in result.refused]
        emit_json(summary)
        return
    if written != ["-"]:
        for path, ps in zip(written, result.sets):
            n = len(ps.profiles)
            click.echo(f"wrote {path}  ({ps.name}, {n} profile{'s' if n != 1 else ''})",
                       err=True)


def _name_not_file(result: Any, out: str) -> Any:
    """The validator's ``name_not_file`` warning, said before writing, for one set written to
    a file of another name (scenarios name sets by file); None when the names agree."""
    from registry_db.errors import Finding

    stem = Path(out).stem
    if out == "-" or Path(out).suffix not in (".yaml", ".yml") or len(result.sets) != 1:
        return None
    name = result.sets[0].name
    if stem == name:
        return None
    # Where the written file states its name, so that the position is the validator's.
    lines = result.texts[0].splitlines()
    line = next((i for i, t in enumerate(lines, 1) if t.startswith("name:")), 1)
    return Finding(out, line, len("name: ") + 1, "name", "name_not_file",
                   f"set {name!r} is written to {out}, whose name differs; give --name {stem} "
                   "to match (scenarios name sets by file)", severity="warning")
