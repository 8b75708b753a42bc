"""``vllm bench serve --save-result`` JSON read as a measured profile: the run's drafts, draft
tokens and accepted tokens, and the per-position counts its rates stand for.

vLLM's benchmark (vllm-project/vllm 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1,
vllm/benchmarks/serve.py: ``fetch_spec_decode_metrics`` before and after the run, then
``result["spec_decode_*"]``) scrapes the server's /metrics around the run and writes the
deltas: ``spec_decode_num_drafts``, ``spec_decode_draft_tokens`` and
``spec_decode_accepted_tokens`` (whole numbers) and ``spec_decode_per_position_acceptance_rates``
(each ``Δaccepted_per_pos[i] / Δdrafts``, a Python float of two integers). A float quotient of
two integers below 2**53 singles out its numerator, so the per-position counts are recovered
exactly and checked to give the written rates back bit for bit.

What the result cannot say: the benchmark sums every served model and engine of the server
(no ``model_name`` filter), and it keeps no start time, so a restart during the run that left
every counter higher is not visible in it (one that lowered a counter gives a negative count,
refused). ``--append-result`` files hold several runs: each is a line, and one is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from registry_db.errors import Finding, InvalidInput, UsageError
from registry_db.model import ProfileSet
from registry_db.sources.counters.common import (
    Facts,
    Measured,
    Tally,
    acceptance,
    check_k,
    count,
    draft_token_findings,
    json_items,
    label,
    measured_set,
    problem,
    read_input,
    stem,
)
from registry_db.sources.ingested import Ingested

NAME = "vllm-bench"
DESCRIPTION = "vllm bench serve --save-result JSON (its spec_decode_* deltas, exact per position)"
WHAT = "the JSON that `vllm bench serve --save-result` writes"
DRAFTS, DRAFT_TOKENS, ACCEPTED, RATES, AL = (
    "spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
    "spec_decode_per_position_acceptance_rates", "spec_decode_acceptance_length")
#: Text that only a bench result with speculative decoding holds.
MARKERS = ('"spec_decode_num_drafts"',)


def measure(path: str, before: str | None, k: int, *, round_to: int | None = None,
            text: str | None = None, run: int | None = None) -> Measured:
    """The run's counts from a result file (``-`` or a URL too; ``text``: already read).
    ``run`` picks one result of an ``--append-result`` file (1-based). Raises
    :class:`InvalidInput` naming every problem."""
    check_k(k)
    if before is not None:
        raise UsageError("--before is for /metrics scrapes; a vllm bench serve result already "
                         "holds the run's deltas")
    file = label(path)
    if text is None:
        text = read_input(path)
    items = json_items(file, text, WHAT)
    runs = [(line, item) for line, item in items
            if isinstance(item, dict) and DRAFTS in item]
    if not runs:
        plain = any(isinstance(item, dict) and "duration" in item for _, item in items)
        raise InvalidInput([problem(
            file, items[0][0] if items else 0, DRAFTS, "no_spec_decode_fields",
            ("this vllm bench serve result has no spec_decode_* fields: the server ran "
             "without speculative decoding, or the benchmark could not read its /metrics "
             "(it writes them only when both scrapes answered and draft tokens grew)")
            if plain else f"no {DRAFTS} in it; give {WHAT}")])
    if run is None and len(runs) > 1:
        raise InvalidInput([problem(
            file, runs[1][0], "", "several_runs",
            f"the file holds {len(runs)} benchmark results (lines "
            f"{', '.join(str(line) for line, _ in runs)}; --append-result): `registry ingest "
            "vllm-bench --result N` picks one; `registry check` reads a file of one result")])
    if run is not None and not 1 <= run <= len(runs):
        raise UsageError(f"--result {run} is outside 1..{len(runs)} (the results in {file})")
    line, result = runs[(run or 1) - 1]
    tally = _tally(file, line, result, k)
    al, rates = acceptance(tally, k, round_to, file, ACCEPTED)
    found = draft_token_findings(tally, k, al, (file, line, DRAFT_TOKENS))
    if any(f.is_error for f in found):
        raise InvalidInput(found)
    return Measured(tally, al, rates, file, tuple(found))


def _tally(file: str, line: int, result: dict[str, Any], k: int) -> Tally:
    problems: list[Finding] = []
    counts: dict[str, int] = {}
    for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED):
        value = result.get(name)
        n = count(value)
        if n is None:
            went_down = isinstance(value, int) and not isinstance(value, bool) and value < 0
            problems.append(problem(
                file, line, name, "server_restarted" if went_down else "bad_count",
                f"{name} is {value!r}: the server's counters went down during the run (a "
                "restart); run the benchmark again against one server run" if went_down
                else f"{name} is {value!r}; a count is a whole number, not negative"))
        else:
            counts[name] = n
    rates = result.get(RATES)
    if not isinstance(rates, list) or not all(
            isinstance(r, float | int) and not isinstance(r, bool) for r in rates):
        problems.append(problem(file, line, RATES, "bad_rates",
                                f"{RATES} is {rates!r}; vLLM writes a list of numbers"))
    elif len(rates) != k:
        problems.append(problem(
            file, line, RATES, "bad_positions",
            f"{RATES} has {len(rates)} positions but --k {k} needs {k}; is --k the server's "
            "num_speculative_tokens?"))
    if problems:
        raise InvalidInput(problems)
    drafts = counts[DRAFTS]
    if drafts == 0:
        raise InvalidInput([problem(file, line, DRAFTS, "zero_drafts",
                                    f"{DRAFTS} is 0: no speculative step ran in the benchmark, "
                                    "so there is no acceptance to measure")])
    per_position = []
    assert isinstance(rates, list)  # checked above
    for i, rate in enumerate(rates):
        n = round(Fraction(rate) * drafts)
        if n / drafts != rate:  # the rate is not a count over drafts: not vLLM's arithmetic
            problems.append(problem(
                file, line, f"{RATES}[{i}]", "inconsistent_counters",
                f"rate {rate!r} at position {i} is no count over {drafts} drafts (vLLM writes "
                "Δaccepted_per_pos / Δdrafts); the result is inconsistent"))
        per_position.append(Fraction(n))
    written = result.get(AL)
    expected = 1 + counts[ACCEPTED] / drafts
    if isinstance(written, float | int) and not isinstance(written, bool) and written != expected:
        problems.append(problem(
            file, line, AL, "inconsistent_counters",
            f"{AL} is {written!r} but 1 + {ACCEPTED} / {DRAFTS} = {expected!r}; the result "
            "is inconsistent"))
    if problems:
        raise InvalidInput(problems)
    return Tally(Fraction(drafts), Fraction(counts[DRAFT_TOKENS]), Fraction(counts[ACCEPTED]),
                 tuple(per_position))


def read_vllm_bench(path: str, facts: Facts, *, round_to: int | None = None,
                    name: str | None = None, run: int | None = None) -> Ingested:
    """Read a result file into one measured profile with exact per-position rates, as a
    rendered and validated set. Raises :class:`InvalidInput` naming every problem."""
    m = measure(path, None, facts.k, round_to=round_to, run=run)
    return measured_set(facts, m.tally, m.acceptance_length, m.rates,
                        default_source=f"vllm bench serve result: {m.where}", name=name,
                        default_name=stem(path), warnings=list(m.warnings))


def read(paths: Iterable[str | os.PathLike], *, facts: Facts, **options: Any
         ) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: one result file; refusals as findings."""
    (path,) = [str(p) for p in paths]
    try:
        result = read_vllm_bench(path, facts, **options)
    except InvalidInput as exc:
        return [], exc.findings
    return list(result.sets), list(result.warnings)
