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

from registry_db.cli.output import emit_json, handle_errors, report_findings
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
        registry ingest inferencex golden_al_distribution/ --engine-image IMAGE -o acceptance/
        registry ingest vllm-metrics after.prom --before before.prom --model M --method mtp \\
            --k 3 --thinking on --category coding --hardware b300 --engine-image IMAGE \\
            --temperature 1.0 -o acceptance/m-mtp.yaml
    """


@ingest.command("inferencex")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--name", metavar="SET",
              help="Merge every input into this one set (default: one set per file, named "
                   "after the file).")
@click.option("--map", "map_file", metavar="MAP.yaml",
              help="Catalog names for the source's model spellings (models:) and a method name "
                   "per input file (methods:); see the README.")
@click.option("--engine-image", metavar="IMAGE",
              help="The engine image the curves were measured with; required for measured "
                   "curves whose header states none.")
@click.option("--source-base", metavar="URL",
              help="Record each file's source as URL/<file name> instead of its path.")
@click.option("-o", "--output", "out", default="-", show_default=True, metavar="DIR|FILE|-",
              help=OUTPUT_HELP)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@handle_errors
def inferencex(paths: tuple[str, ...], name: str | None, map_file: str | None,
               engine_image: str | None, source_base: str | None, out: str,
               as_json: bool) -> None:
    """Read InferenceX golden AL curves (golden_al_distribution/*.yaml) into profile sets.

    PATH is a curve file or a folder of them. Each (thinking mode, K) cell becomes a measured
    profile; category, method, hardware, sampling and settings come from the file's header.
    A header line the reader does not understand is a warning (FILE:LINE); a file that is not
    a golden AL curve is an error (FILE:LINE:COL) and nothing is written. --json prints
    the sets written, their files and profile counts, and the warnings.

    \b
    Example:
        registry ingest inferencex dsv41flash_dspark.yaml \\
            --engine-image vllm/vllm-openai:v0.22.0 \\
            --source-base https://github.com/OWNER/REPO/blob/main/golden_al_distribution \\
            -o acceptance/
        registry ingest inferencex curves/ --name inferencex-golden-al --map map.yaml \\
            --engine-image vllm/vllm-openai:v0.22.0 -o acceptance/inferencex-golden-al.yaml
    """
    from registry_db.sources import inferencex as source

    _json_needs_a_file(as_json, out)
    curve_map = source.load_map(map_file) if map_file is not None else None
    result = source.read_inferencex(paths, name=name, curve_map=curve_map,
                                    engine_image=engine_image, source_base=source_base)
    _finish(result, out, as_json)


def _category(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from registry_db.inputs.schema import category_problem

    problem = category_problem("category", value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


@ingest.command("vllm-metrics")
@click.argument("after", metavar="AFTER")
@click.option("--before", metavar="BEFORE",
              help="The scrape taken before the run (default: count from the server's start).")
@click.option("--model", required=True, metavar="M", help="The catalog model name.")
@click.option("--method", required=True, metavar="X", help="The speculative method, e.g. mtp.")
@click.option("--k", "k", required=True, type=click.IntRange(min=1), metavar="K",
              help="num_speculative_tokens the server ran with.")
@click.option("--thinking", required=True, type=click.Choice(THINKING_MODES))
@click.option("--category", required=True, metavar="C", callback=_category,
              help="The workload category, such as coding.")
@click.option("--hardware", required=True, metavar="CHIP", help="The chip it ran on.")
@click.option("--engine-image", required=True, metavar="IMAGE", help="The engine image.")
@click.option("--temperature", required=True, type=click.FloatRange(min=0), metavar="T")
@click.option("--top-p", type=click.FloatRange(0, 1, min_open=True), metavar="P")
@click.option("--top-k", type=click.IntRange(min=-1), metavar="N")
@click.option("--max-tokens", type=click.IntRange(min=0), metavar="N")
@click.option("--prompts", type=click.IntRange(min=0), metavar="N",
              help="How many prompts the run covered.")
@click.option("--source", metavar="TEXT",
              help="Where the scrapes came from (default: their file names).")
@click.option("--run", metavar="URL", help="The job that ran the benchmark.")
@click.option("--benchmark", metavar="NAME", help="The prompt set, e.g. 'SPEED-Bench'.")
@click.option("--model-name", metavar="SERVED",
              help="The served model_name to read when the scrape serves several.")
@click.option("--round", "round_to", type=click.IntRange(min=0), metavar="N",
              help="Round AL and the rates to N decimals (the rates still sum to AL - 1).")
@click.option("--name", metavar="SET",
              help="The set's name (default: the output file's name, else AFTER's).")
@click.option("-o", "--output", "out", default="-", show_default=True, metavar="FILE|-",
              help="A *.yaml file, a folder, or - for stdout.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@handle_errors
def vllm_metrics(after: str, before: str | None, out: str, name: str | None,
                 model_name: str | None, round_to: int | None, as_json: bool,
                 **flags: Any) -> None:
    """Read vLLM's speculative-decoding counters (/metrics scrapes) into a measured profile.

    AL = 1 + Δaccepted / Δdrafts and p_i = Δaccepted_per_pos[i-1] / Δdrafts, vLLM's own
    definitions, summed over engines, unrounded unless --round is given. The counts go into
    the provenance's settings. A missing counter, one that went down (a restart), zero drafts
    or positions other than 0..K-1 are errors. --json prints the set written, its file and
    the warnings.

    \b
    Example:
        curl -s localhost:8000/metrics > before.prom
        vllm bench serve ...
        curl -s localhost:8000/metrics > after.prom
        registry ingest vllm-metrics after.prom --before before.prom \\
            --model example-model --method eagle3 --k 3 --thinking off --category coding \\
            --hardware b300 --engine-image vllm/vllm-openai:v0.22.0 --temperature 0.6 \\
            -o acceptance/example-model-eagle3.yaml
    """
    from registry_db.model import Sampling
    from registry_db.sources.output import safe_name
    from registry_db.sources.vllm_metrics import Facts, read_vllm_metrics

    _json_needs_a_file(as_json, out)
    sampling = Sampling(temperature=flags.pop("temperature"), top_p=flags.pop("top_p"),
                        top_k=flags.pop("top_k"), max_tokens=flags.pop("max_tokens"))
    if name is None and out != "-" and Path(out).suffix in (".yaml", ".yml"):
        name = safe_name(Path(out).stem)
    result = read_vllm_metrics(after, before, Facts(sampling=sampling, **flags),
                               model_name=model_name, round_to=round_to, name=name)
    _finish(result, out, as_json)


def _json_needs_a_file(as_json: bool, out: str) -> None:
    # Checked before any input is read: stdout cannot carry both the YAML and the summary.
    if as_json and out == "-":
        raise click.UsageError("--json prints the summary on stdout, where -o - would write the "
                               "YAML; give -o DIR or -o FILE.yaml")


def _finish(result: Any, out: str, as_json: bool = False) -> None:
    """Write the sets; report warnings and what was written (text on stderr, or --json)."""
    from registry_db.sources.output import write

    warnings = list(result.warnings)
    misnamed = _name_not_file(result, out)
    if misnamed is not None:
        warnings.append(misnamed)
    if warnings and not as_json:
        report_findings(warnings, as_json=False)
    written = write(result, out)
    if as_json:
        emit_json({"sets": [{"name": ps.name, "file": path, "profiles": len(ps.profiles)}
                            for path, ps in zip(written, result.sets)],
                   "warnings": [f.to_json() for f in warnings]})
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
