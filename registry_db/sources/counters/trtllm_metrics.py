"""TensorRT-LLM's per-position speculative-decoding counters (its Prometheus scrape) read as a
measured profile, with exact per-position rates.

``tensorrt_llm/metrics/collector.py@050f80de`` (``MetricsCollector.log_request_metrics_dict``)
adds, when a request finishes, its drafted and accepted tokens at each draft position to
``trtllm_spec_decode_drafted_tokens_total{token_position="p"}`` and
``trtllm_spec_decode_accepted_tokens_total{token_position="p"}`` (positions from 0, a series
created at its first increment). Every drafting step drafts position 0, and a draft is accepted
only after every draft before it, so with d_p and a_p their growth:

    drafts = d_0,   AL = 1 + Σ a_p / d_0,   p_i = a_{i-1} / d_0      (exact per position)

The iteration counters beside them (``trtllm_spec_decode_num_draft_tokens_total``,
``..._num_accepted_tokens_total``, from the iteration stats) count every step, finished or not:
where they grew otherwise than Σ d_p and Σ a_p, a warning says so (a request in flight at a
scrape is counted at its end; with attention DP the iteration stats may be logged once per
rank, so a difference alone does not refuse). The gauge
``trtllm_spec_decode_acceptance_length`` is one iteration's mean and is never read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from registry_db.errors import Finding, InvalidInput
from registry_db.model import ProfileSet
from registry_db.sources.counters.common import (
    Facts,
    Measured,
    Tally,
    acceptance,
    check_k,
    draft_token_findings,
    label,
    measured_set,
    number,
    problem,
    stem,
)
from registry_db.sources.counters.scrape import (
    Scrape,
    by_label,
    deltas,
    label_order,
    missing_counters,
    mixed_servers,
    parse_scrape,
    total,
)
from registry_db.sources.ingested import Ingested

NAME = "trtllm-metrics"
DESCRIPTION = "TensorRT-LLM's per-position counters, from Prometheus scrapes around a run"

DRAFTED, ACCEPTED = ("trtllm_spec_decode_drafted_tokens", "trtllm_spec_decode_accepted_tokens")
ITER_DRAFTED, ITER_ACCEPTED = ("trtllm_spec_decode_num_draft_tokens",
                               "trtllm_spec_decode_num_accepted_tokens")
POSITION = "token_position"
COUNTERS = (DRAFTED, ACCEPTED, ITER_DRAFTED, ITER_ACCEPTED)
WHAT = "TensorRT-LLM's Prometheus /metrics (trtllm-serve: /prometheus/metrics)"
#: Text that only TensorRT-LLM's Prometheus scrape holds (its other spec counters too, so that
#: this reader says what is missing).
MARKERS = ("trtllm_spec_decode_",)


def measure(after: str, before: str | None, k: int, *, round_to: int | None = None,
            text: str | None = None) -> Measured:
    """The run's counts, exact per position, from two scrapes (files, ``-`` or URLs;
    ``text``: AFTER's text, already read). Raises :class:`InvalidInput` naming every
    problem."""
    check_k(k)
    scrape_after = parse_scrape(after, COUNTERS, WHAT, text)
    scrape_before = parse_scrape(before, COUNTERS, WHAT) if before is not None else None
    tally = _tally(scrape_after, scrape_before, k)
    al, rates = acceptance(tally, k, round_to, scrape_after.file, ACCEPTED)
    found = _in_flight(scrape_after, scrape_before, tally) + draft_token_findings(
        tally, k, al, (scrape_after.file, scrape_after.line_of(DRAFTED), DRAFTED))
    if any(f.is_error for f in found):
        raise InvalidInput(found)
    where = label(after) if before is None else f"{label(before)} -> {label(after)}"
    return Measured(tally, al, rates, where, tuple(found))


def read_trtllm_metrics(after: str, before: str | None, facts: Facts, *,
                        round_to: int | None = None, name: str | None = None) -> Ingested:
    """Read two scrapes (files, ``-`` or URLs) into one measured profile with exact
    per-position rates (:func:`measure`, then the profile)."""
    m = measure(after, before, facts.k, round_to=round_to)
    return measured_set(facts, m.tally, m.acceptance_length, m.rates,
                        default_source=f"TensorRT-LLM Prometheus /metrics: {m.where}",
                        name=name, default_name=stem(after), warnings=list(m.warnings))


def read(paths: Iterable[str | os.PathLike], *, facts: Facts, before: str | None = None,
         **options: Any) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: ``paths`` is the one AFTER scrape; refusals as
    findings. ``options`` are :func:`read_trtllm_metrics`'s keywords."""
    (after,) = [str(p) for p in paths]
    try:
        result = read_trtllm_metrics(after, before, facts, **options)
    except InvalidInput as exc:
        return [], exc.findings
    return list(result.sets), list(result.warnings)


def _tally(after: Scrape, before: Scrape | None, k: int) -> Tally:
    scrapes = [after] + ([before] if before is not None else [])
    problems = [f for s in scrapes for f in mixed_servers(s, "error")]
    # Only AFTER must have them: a series appears at its first increment, so a scrape from
    # before the first request finished has none (and deltas count it from zero).
    missing, found = missing_counters(
        [after], (DRAFTED,),
        "TensorRT-LLM writes the per-position counters from the release of "
        "tensorrt_llm/metrics/collector.py@050f80de on, once a request has drafted; older "
        "releases' Prometheus output has no count of the steps that drafted: give their "
        "iteration stats (registry ingest trtllm-stats)")
    problems += found
    sums, found = deltas(after, before, missing)
    problems += found
    if problems:
        raise InvalidInput(problems)
    drafted = by_label(sums, DRAFTED, POSITION)
    accepted = by_label(sums, ACCEPTED, POSITION)
    positions = sorted(set(drafted) | set(accepted), key=label_order)
    beyond = [p for p in positions if not (p.isdigit() and int(p) < k)
              and (drafted.get(p, Fraction(0)) or accepted.get(p, Fraction(0)))]
    if beyond:
        problems.append(problem(
            after.file, after.line_of(DRAFTED), DRAFTED, "bad_positions",
            f"{DRAFTED}_total grew at {POSITION} {', '.join(beyond)}, but --k {k} drafts "
            f"positions 0..{k - 1}; is --k the server's max_draft_len?"))
        raise InvalidInput(problems)
    d = [drafted.get(str(p), Fraction(0)) for p in range(k)]
    a = [accepted.get(str(p), Fraction(0)) for p in range(k)]
    if d[0] == 0:
        raise InvalidInput([problem(
            after.file, after.line_of(DRAFTED), DRAFTED, "zero_drafts",
            f"{DRAFTED}_total{{{POSITION}=\"0\"}} did not grow"
            f"{' between the scrapes' if before else ''}: no request that drafted finished, "
            "so there is no acceptance to measure")])
    for p in range(k):
        if a[p] > d[p]:
            problems.append(problem(
                after.file, after.line_of(ACCEPTED), ACCEPTED, "inconsistent_counters",
                f"position {p}: {number(a[p])} tokens accepted of {number(d[p])} drafted; the "
                "counters are inconsistent"))
        if p and d[p] > d[p - 1]:
            problems.append(problem(
                after.file, after.line_of(DRAFTED), DRAFTED, "inconsistent_counters",
                f"position {p} was drafted {number(d[p])} times, more than position {p - 1} "
                f"({number(d[p - 1])}); a step drafts every position before the last"))
    if problems:
        raise InvalidInput(problems)
    return Tally(d[0], sum(d, Fraction(0)), sum(a, Fraction(0)), tuple(a))


def _in_flight(after: Scrape, before: Scrape | None, tally: Tally) -> list[Finding]:
    """Warnings where the iteration counters grew otherwise than the per-request ones."""
    sums, _ = deltas(after, before, frozenset({DRAFTED, ACCEPTED}))
    found = []
    for counter, per_request in ((ITER_DRAFTED, tally.draft_tokens),
                                 (ITER_ACCEPTED, tally.accepted)):
        if not any(name == counter for name, _ in after.series):
            continue  # iteration stats off: nothing to compare with
        if total(sums, counter) != per_request:
            found.append(problem(
                after.file, after.line_of(counter), counter, "requests_in_flight",
                f"{counter}_total grew by {number(total(sums, counter))} but the per-position "
                f"counters by {number(per_request)}: these count a request when it finishes, "
                "so a request in flight at a scrape makes them differ from the run (so does "
                "attention DP, whose iteration stats may be counted once per rank); scrape "
                "when the server is idle", "warning"))
    return found
