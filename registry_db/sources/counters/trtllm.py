"""TensorRT-LLM's iteration statistics (``trtllm-serve``'s ``/metrics`` JSON) read as a measured
profile.

With ``enable_iter_perf_stats``, ``GET /metrics`` answers a JSON array of the iterations since
the last call, each an ``IterationStats`` object (``cpp/tensorrt_llm/executor/
jsonSerialization.cpp``) whose ``specDecodingStats`` holds that iteration's ``numDraftTokens``,
``numAcceptedTokens`` (accepted drafts) and ``numRequestsWithDraftTokens`` (the requests that
verified drafts, one verification step each). Over every iteration of a file (one response, or
several appended, one per line):

    AL = 1 + Σ numAcceptedTokens / Σ numRequestsWithDraftTokens

which is TensorRT-LLM's own reduction (the ``compute_acceptance_length`` helper of its tests). Its
Prometheus output has no count of requests with drafts, and ``acceptanceLength`` is a
per-iteration mean: neither is read.
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
from registry_db.sources.counters.scrape import (
    prometheus_line,
)
from registry_db.sources.ingested import Ingested

NAME = "trtllm-stats"
DESCRIPTION = "TensorRT-LLM's /metrics iteration stats (specDecodingStats)"

SPEC = "specDecodingStats"
DRAFT_TOKENS, ACCEPTED, REQUESTS = ("numDraftTokens", "numAcceptedTokens",
                                    "numRequestsWithDraftTokens")
WHAT = "trtllm-serve's /metrics iteration stats (a JSON array; enable_iter_perf_stats: true)"
#: Text that only TensorRT-LLM's iteration stats hold.
MARKERS = (f'"{SPEC}"',)


def read_trtllm_stats(path: str, facts: Facts, *, round_to: int | None = None,
                      name: str | None = None) -> Ingested:
    """Read a file (or ``-``, or the ``/metrics`` URL) of iteration stats into one measured
    profile (:func:`measure`, then the profile). Raises :class:`InvalidInput` naming every
    problem with its line."""
    m = measure(path, None, facts.k, round_to=round_to)
    return measured_set(facts, m.tally, m.acceptance_length, m.rates,
                        default_source=f"TensorRT-LLM /metrics iteration stats: {m.where}",
                        name=name, default_name=stem(path), warnings=list(m.warnings))


def measure(path: str, before: str | None, k: int, *, round_to: int | None = None,
            text: str | None = None) -> Measured:
    """The run's counts from a file (or ``-``, or the ``/metrics`` URL; ``text``: its text,
    already read) of iteration stats. Raises :class:`InvalidInput` naming every problem with
    its line; ``before`` must be None (the endpoint answers the iterations since its last
    call, so one response is already the run's)."""
    if before is not None:
        raise UsageError("TensorRT-LLM's /metrics answers the iterations since its last call, "
                         "so one response is the run; drop --before")
    check_k(k)
    file = label(path)
    if text is None:
        text = read_input(path)
    prometheus = prometheus_line(text, "")
    if prometheus:
        raise InvalidInput([problem(
            file, prometheus, "", "not_a_count",
            "this is Prometheus text; TensorRT-LLM's Prometheus output has no count of the "
            f"requests that verified drafts ({REQUESTS} is in the JSON iteration stats only), "
            f"so no AL can be computed from it: give {WHAT}")])
    problems: list[Finding] = []
    sums = {DRAFT_TOKENS: 0, ACCEPTED: 0, REQUESTS: 0}
    iterations: dict[Any, int] = {}
    for line, item in json_items(file, text, WHAT):
        if not isinstance(item, dict):
            problems.append(problem(file, line, "", "not_an_iteration",
                                    f"a JSON {type(item).__name__} where an iteration's stats "
                                    f"object is due in {WHAT}"))
            continue
        it = item.get("iter")
        if it is not None and not isinstance(it, (dict, list)):
            if it in iterations:
                problems.append(problem(
                    file, line, "iter", "repeated_iteration",
                    f"iteration {it!r} is also on line {iterations[it]}: the stats of two "
                    "servers, of a restarted server, or one response saved twice; give one "
                    "server run's iterations once"))
                continue
            iterations[it] = line
        stats = item.get(SPEC)
        if stats is None:
            continue  # an iteration that ran no speculation (prefill only), or spec off
        found = _iteration(file, line, stats)
        if isinstance(found, Finding):
            problems.append(found)
            continue
        for key, value in found.items():
            sums[key] += value
    if not problems and sums[REQUESTS] == 0:
        problems.append(problem(
            file, 0, SPEC, "zero_drafts",
            f"no iteration has {SPEC} with {DRAFT_TOKENS} > 0: no speculative step ran, or "
            "the server runs without speculative decoding or without enable_iter_perf_stats"))
    if problems:
        raise InvalidInput(problems)
    tally = Tally(Fraction(sums[REQUESTS]), Fraction(sums[DRAFT_TOKENS]),
                  Fraction(sums[ACCEPTED]))
    al, rates = acceptance(tally, k, round_to, file, f"{SPEC}.{ACCEPTED}")
    found_k = draft_token_findings(tally, k, al, (file, 0, f"{SPEC}.{DRAFT_TOKENS}"))
    if any(f.is_error for f in found_k):
        raise InvalidInput(found_k)
    return Measured(tally, al, rates, file, tuple(found_k))


def read(paths: Iterable[str | os.PathLike], *, facts: Facts, **options: Any
         ) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: ``paths`` is the one stats file; refusals as
    findings. ``options`` are :func:`read_trtllm_stats`'s keywords."""
    (path,) = [str(p) for p in paths]
    try:
        result = read_trtllm_stats(path, facts, **options)
    except InvalidInput as exc:
        return [], exc.findings
    return list(result.sets), list(result.warnings)


def _iteration(file: str, line: int, stats: Any) -> dict[str, int] | Finding:
    """One iteration's three counts (all zero when it drafted nothing), or the finding that
    refuses it."""
    if not isinstance(stats, dict):
        return problem(file, line, SPEC, "not_an_iteration",
                       f"{SPEC} is {stats!r}; TensorRT-LLM writes an object")
    missing = [key for key in (DRAFT_TOKENS, ACCEPTED, REQUESTS) if key not in stats]
    if missing:
        if "acceptanceLength" in stats:
            return problem(file, line, f"{SPEC}.acceptanceLength", "not_a_count",
                           "acceptanceLength is the iteration's mean, not a count, and "
                           f"{', '.join(missing)} is missing beside it: means of iterations "
                           "of different sizes cannot be averaged into AL")
        return problem(file, line, f"{SPEC}.{missing[0]}", "missing_field",
                       f"{', '.join(missing)} missing; TensorRT-LLM writes {DRAFT_TOKENS}, "
                       f"{ACCEPTED} and {REQUESTS} in every {SPEC}")
    values = {key: count(stats[key]) for key in (DRAFT_TOKENS, ACCEPTED, REQUESTS)}
    for key, value in values.items():
        if value is None:
            return problem(file, line, f"{SPEC}.{key}", "not_a_count",
                           f"{key} is {stats[key]!r}; a count is a whole number, not negative")
    counted = {key: int(value or 0) for key, value in values.items()}
    if counted[DRAFT_TOKENS] == 0:
        return {key: 0 for key in counted}
    if counted[REQUESTS] == 0 or counted[ACCEPTED] > counted[DRAFT_TOKENS]:
        return problem(file, line, SPEC, "inconsistent_counters",
                       f"{counted[ACCEPTED]} accepted of {counted[DRAFT_TOKENS]} draft tokens "
                       f"in {counted[REQUESTS]} requests; the counts are inconsistent")
    return counted
