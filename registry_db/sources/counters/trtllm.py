"""TensorRT-LLM's iteration statistics (``trtllm-serve``'s ``/metrics`` JSON) read as a measured
profile.

With ``enable_iter_perf_stats``, ``GET /metrics`` answers a JSON array of the iterations since
the last call, each an ``IterationStats`` object (``cpp/tensorrt_llm/executor/
jsonSerialization.cpp``) whose ``specDecodingStats`` holds that iteration's ``numDraftTokens``,
``numAcceptedTokens`` (accepted drafts) and ``numRequestsWithDraftTokens`` (the requests that
verified drafts, one verification step each). Over every iteration of a file (one response, or
several appended, one per line):

    AL = 1 + Σ numAcceptedTokens / Σ numRequestsWithDraftTokens

which is TensorRT-LLM's own reduction (the ``compute_acceptance_length`` helper of its tests).

Newer releases (``tensorrt_llm/executor/iteration_stats.py@b1179014``, ``_materialize_frame``)
write one row per attention-DP rank for an iteration, each with its own ``attentionDpRank`` and
a copy of the iteration's ``specDecodingStats``: an iteration is read once, and refused when
its rows disagree. They also number the frames (``statsSequence``) and count the frames the
server's bounded buffer dropped (``statsDroppedFrames``, since the server started): counts that
miss a frame of the run are refused with how much of it they cover. The per-position
Prometheus counters are :mod:`.trtllm_metrics`'; ``acceptanceLength`` is a
per-iteration mean and is not read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
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
RANK, SEQUENCE, DROPPED = "attentionDpRank", "statsSequence", "statsDroppedFrames"
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
            "this is Prometheus text, not the JSON iteration stats: TensorRT-LLM's "
            "per-position counters (trtllm_spec_decode_drafted_tokens_total) are read by "
            "registry ingest trtllm-metrics (check: --source trtllm-metrics); releases "
            f"without them have no count of the requests that verified drafts ({REQUESTS} is "
            f"in the JSON iteration stats only): give {WHAT}")])
    problems: list[Finding] = []
    sums = {DRAFT_TOKENS: 0, ACCEPTED: 0, REQUESTS: 0}
    frames: dict[Any, _Frame] = {}
    numbered: list[_Frame] = []  # the frames that carry statsSequence, in the file's order
    for line, item in json_items(file, text, WHAT):
        if not isinstance(item, dict):
            problems.append(problem(file, line, "", "not_an_iteration",
                                    f"a JSON {type(item).__name__} where an iteration's stats "
                                    f"object is due in {WHAT}"))
            continue
        it = item.get("iter")
        key = it if it is not None and not isinstance(it, (dict, list)) else None
        # A rank that is not a count is reported below and compared as none.
        rank = item.get(RANK) if count(item.get(RANK)) is not None else None
        stats = item.get(SPEC)
        if key is not None and key in frames:
            found_row = _another_row(file, line, frames[key], rank, item, stats)
            if found_row is not None:
                problems.append(found_row)
            continue
        frame = _Frame(line, key, {rank}, _counts_of(stats), item.get(SEQUENCE),
                       item.get(DROPPED))
        if key is not None:
            frames[key] = frame
        bad = [name for name in (RANK, SEQUENCE, DROPPED)
               if name in item and count(item[name]) is None]
        if bad:
            problems.append(problem(file, line, bad[0], "not_a_count",
                                    f"{bad[0]} is {item[bad[0]]!r}; TensorRT-LLM writes a "
                                    "count"))
        elif frame.sequence is not None:
            numbered.append(frame)
        if stats is None:
            continue  # an iteration that ran no speculation (prefill only), or spec off
        found = _iteration(file, line, stats)
        if isinstance(found, Finding):
            problems.append(found)
            continue
        for name, value in found.items():
            sums[name] += value
    if not problems:
        problems.extend(_coverage(file, numbered, sums))
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


@dataclass
class _Frame:
    """One iteration as its first row wrote it: the attention-DP ranks seen so far, its three
    counts as written (compared, not summed, for the other ranks' rows) and its numbering."""

    line: int
    iteration: Any
    ranks: set[Any]
    counts: tuple[Any, ...] | None
    sequence: Any
    dropped: Any


def _counts_of(stats: Any) -> tuple[Any, ...] | None:
    if not isinstance(stats, dict):
        return None
    return tuple(stats.get(name) for name in (DRAFT_TOKENS, ACCEPTED, REQUESTS))


def _another_row(file: str, line: int, frame: _Frame, rank: Any, item: dict[str, Any],
                 stats: Any) -> Finding | None:
    """Another row of an iteration already read: None for another attention-DP rank's copy
    of the same counts (read once), else the finding that refuses it."""
    other_rank = (count(rank) is not None and rank not in frame.ranks
                  and None not in frame.ranks and item.get(SEQUENCE) == frame.sequence)
    if not other_rank:
        at_rank = f" (attention-DP rank {rank!r})" if rank is not None else ""
        return problem(file, line, "iter", "repeated_iteration",
                       f"iteration {frame.iteration!r}{at_rank} is also on line {frame.line}: "
                       "the stats of two servers, of a restarted server, or one response "
                       "saved twice; give one server run's iterations once")
    if _counts_of(stats) != frame.counts:
        theirs = dict(zip((DRAFT_TOKENS, ACCEPTED, REQUESTS), frame.counts or ()))
        ours = dict(zip((DRAFT_TOKENS, ACCEPTED, REQUESTS), _counts_of(stats) or ()))
        return problem(file, line, SPEC, "ranks_disagree",
                       f"iteration {frame.iteration!r}: attention-DP rank {rank!r} has "
                       f"{SPEC} {ours or stats!r} but line {frame.line} has {theirs or None!r}; "
                       "TensorRT-LLM copies one iteration's counts into every rank's row, so "
                       "these rows are not one server's, and neither one rank's nor their sum "
                       "is known to be the run's")
    frame.ranks.add(rank)
    return None


def _coverage(file: str, frames: list[_Frame], sums: dict[str, int]) -> list[Finding]:
    """The refusal when the numbered frames do not cover the run: a gap in ``statsSequence``,
    ``statsDroppedFrames`` rising within the input, or frames dropped before its first one."""
    if not frames:
        return []  # an older release: no numbering, so nothing to hold the counts to
    found: list[Finding] = []
    missing, gaps = 0, []
    for before, after in zip(frames, frames[1:]):
        if after.sequence <= before.sequence:
            found.append(problem(file, after.line, SEQUENCE, "frames_out_of_order",
                                 f"{SEQUENCE} {after.sequence} follows {before.sequence} (line "
                                 f"{before.line}): responses out of order, or from a restarted "
                                 "server; give one server run's responses in the order taken"))
        elif after.sequence > before.sequence + 1:
            missing += after.sequence - before.sequence - 1
            gaps.append(after)
    if found:
        return found
    first, last = frames[0], frames[-1]
    span = last.sequence - first.sequence + 1
    rose = (last.dropped or 0) - (first.dropped or 0)
    lost = max(missing, rose)
    if lost:
        over = ""
        if sums[REQUESTS]:
            al = 1 + Fraction(sums[ACCEPTED], sums[REQUESTS])
            over = f"; AL over the frames received would be {float(al)!r}"
        where = gaps[0] if gaps else last
        found.append(problem(
            file, where.line, DROPPED, "dropped_frames",
            f"{lost} of the {span} frames between {SEQUENCE} {first.sequence} and "
            f"{last.sequence} are missing ({len(gaps)} gap(s), the first before line "
            f"{where.line}; {DROPPED} {first.dropped} -> {last.dropped}): the counts cover "
            f"{span - lost} of {span} iterations ({(span - lost) / span:.1%}){over}, not the "
            "run's; raise the server's stats buffer (iter_stats_max_iterations) or poll "
            "/metrics more often, and give every frame"))
    elif first.dropped:
        found.append(problem(
            file, first.line, DROPPED, "dropped_frames",
            f"{DROPPED} is {first.dropped} at the first frame ({SEQUENCE} {first.sequence}): the "
            f"server's stats buffer dropped {first.dropped} frame(s) before it, which may be this "
            "run's start, and the counts cannot show how much of the run they cover; restart the "
            "server (or raise iter_stats_max_iterations) and give every response since the run "
            "began"))
    return found
