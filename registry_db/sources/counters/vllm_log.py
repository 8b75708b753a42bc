"""vLLM's server log read as a measured profile: the ``SpecDecoding metrics:`` lines summed.

``SpecDecodingLogging.log`` (vllm-project/vllm ee4ceaae5953d367d8edd2132fd86d6c42506e1e,
vllm/v1/spec_decode/metrics.py) writes, once per logging interval and engine::

    SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s,
    Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens,
    Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%

with the rates ``f"{p:.3f}"`` joined by ", ". The intervals are disjoint, so their accepted and
drafted tokens add up exactly. The line counts no drafts: they are taken as drafted tokens / K,
which is exact when every step drafts K tokens (EAGLE, MTP and draft models do; n-gram and
adaptive drafting do not). Each interval is checked against its own printed mean acceptance
length (``1 + accepted / drafts`` to 2 decimals); one that disagrees is refused, since then the
steps did not all draft K. A per-position rate printed to 3 decimals singles out its count only
over fewer than about 1000 drafts; when every interval's rates do, the per-position counts are
exact, otherwise none are given (with a warning). A log that holds a second server start
(``vLLM API server version``) between SpecDecoding lines holds two runs and is refused.
"""

from __future__ import annotations

import math
import os
import re
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
    draft_token_findings,
    label,
    measured_set,
    problem,
    read_input,
    stem,
)
from registry_db.sources.ingested import Ingested

NAME = "vllm-log"
DESCRIPTION = "vLLM's server log: its SpecDecoding metrics lines, summed over the intervals"
WHAT = "vLLM's server log with its SpecDecoding metrics lines"
#: The text every such line holds (SpecDecodingLogging.log's format string).
MARKERS = ("SpecDecoding metrics: ",)
#: The API server's start banner (vllm/entrypoints/openai/api_server.py, ``run_server``).
START = "vLLM API server version"

_AL = re.compile(r"Mean acceptance length: (?P<v>[0-9.]+|nan)")
_ACCEPTED = re.compile(r"Accepted: (?P<v>[0-9]+) tokens")
_DRAFTED = re.compile(r"Drafted: (?P<v>[0-9]+) tokens")
_RATES = re.compile(r"Per-position acceptance rate: (?P<v>(?:[0-9.]+|nan)(?:, (?:[0-9.]+|nan))*)")
#: The widest window of drafts a rate is searched over (counts of one 3-decimal rate).
_SEARCH = 8


def measure(path: str, before: str | None, k: int, *, round_to: int | None = None,
            text: str | None = None) -> Measured:
    """The run's counts from a log (a file, ``-`` or a URL; ``text``: already read). Raises
    :class:`InvalidInput` naming every problem; the inferred drafts and any per-position rates
    left out are warnings."""
    check_k(k)
    if before is not None:
        raise UsageError("--before is for /metrics scrapes; a log's SpecDecoding lines are "
                         "each one interval's counts already")
    file = label(path)
    if text is None:
        text = read_input(path)
    problems: list[Finding] = []
    intervals: list[tuple[int, int, int, list[str] | None, str]] = []
    starts: list[int] = []
    for at, line in enumerate(text.splitlines(), start=1):
        if START in line:
            starts.append(at)
        head = line.find(MARKERS[0])
        if head < 0:
            continue
        body = line[head:]
        mean, acc, drafted, listed = (_AL.search(body), _ACCEPTED.search(body),
                                      _DRAFTED.search(body), _RATES.search(body))
        if acc is None or drafted is None or mean is None:
            problems.append(problem(file, at, "", "unknown_log_line",
                                    "a SpecDecoding metrics line without \"Mean acceptance "
                                    "length\", \"Accepted: N tokens\" and \"Drafted: M tokens\"; "
                                    "is this vLLM's v1 log?"))
            continue
        intervals.append((at, int(acc["v"]), int(drafted["v"]),
                          listed["v"].split(", ") if listed else None, mean["v"]))
    if not intervals and not problems:
        raise InvalidInput([problem(file, 0, "", "no_spec_decode_lines",
                                    "no \"SpecDecoding metrics:\" line in it: the server ran "
                                    "without speculative decoding, or its stats logging was "
                                    f"off (--disable-log-stats); give {WHAT}")])
    if intervals:
        first, last = intervals[0][0], intervals[-1][0]
        inside = [s for s in starts if first < s < last]
        if inside:
            problems.append(problem(
                file, inside[0], "", "server_restarted",
                f"the server started again at line {inside[0]} ({START} ...), between "
                f"SpecDecoding lines {first} and {last}: the log holds two server runs; cut "
                "it at that line and read each run alone"))
    tally, found = _tally(file, intervals, k, problems)
    al, rates = acceptance(tally, k, round_to, file, "Accepted")
    found += draft_token_findings(tally, k, al, (file, intervals[0][0], "Drafted"))
    if any(f.is_error for f in found):
        raise InvalidInput(found)
    return Measured(tally, al, rates, file, tuple(found))


def _tally(file: str, intervals: list[tuple[int, int, int, list[str] | None, str]], k: int,
           problems: list[Finding]) -> tuple[Tally, list[Finding]]:
    drafts = draft_tokens = accepted = 0
    per_position: list[int] | None = [0] * k
    vague = 0
    for at, acc, drafted, rates, al in intervals:
        if drafted == 0:
            continue  # an interval without drafts adds nothing
        if drafted % k:
            problems.append(problem(
                file, at, "Drafted", "drafts_unknown",
                f"{drafted} drafted tokens are no whole number of steps of K = {k}: some steps "
                "drafted fewer than K tokens (n-gram or adaptive drafting), and the log counts "
                "no drafts, so AL cannot be known from it; scrape /metrics instead"))
            continue
        d = drafted // k
        if "%.2f" % (1 + acc / d) != al:  # SpecDecodingLogging's own arithmetic and format
            problems.append(problem(
                file, at, "Mean acceptance length", "drafts_unknown",
                f"the line's mean acceptance length {al} is not 1 + {acc} / ({drafted} / {k}) = "
                f"{1 + acc / d:.2f}: its steps did not all draft K = {k} tokens (or the server's "
                "K is not --k), and the log counts no drafts; scrape /metrics instead"))
            continue
        drafts, draft_tokens, accepted = drafts + d, draft_tokens + drafted, accepted + acc
        if rates is None or len(rates) != k:
            problems.append(problem(
                file, at, "Per-position acceptance rate", "bad_positions",
                f"{0 if rates is None else len(rates)} per-position rates but --k {k} needs "
                f"{k}; is --k the server's num_speculative_tokens?"))
            continue
        if per_position is not None:
            counts = [_count(rate, d) for rate in rates]
            if any(c is None for c in counts):
                per_position, vague = None, at
            else:
                per_position = [p + (c or 0) for p, c in zip(per_position, counts)]
    if problems:
        raise InvalidInput(problems)
    if drafts == 0:
        raise InvalidInput([problem(file, intervals[0][0], "Drafted", "zero_drafts",
                                    "no interval drafted a token, so there is no acceptance "
                                    "to measure")])
    found = [problem(file, intervals[0][0], "Drafted", "drafts_from_k",
                     f"the log counts no drafts: {drafts} drafts are its {draft_tokens} drafted "
                     f"tokens / K = {k}, exact when every step drafted K tokens (each interval's "
                     "printed mean acceptance length agrees)", severity="warning")]
    if per_position is None:
        found.append(problem(
            file, vague, "Per-position acceptance rate", "rates_not_counts",
            "the log prints per-position rates to 3 decimals, which over this interval's "
            "drafts fit more than one count: no per-position rates are given (AL is exact)",
            severity="warning"))
    tally = Tally(Fraction(drafts), Fraction(draft_tokens), Fraction(accepted),
                  None if per_position is None else tuple(Fraction(n) for n in per_position))
    return tally, found


def _count(rate: str, drafts: int) -> int | None:
    """The one count n with ``f"{n / drafts:.3f}" == rate``, else None (none, or several)."""
    try:
        value = float(rate)
    except ValueError:
        return None
    if math.isnan(value):
        return None
    lo = max(0, math.floor((value - 0.0005) * drafts) - 1)
    hi = min(drafts, math.ceil((value + 0.0005) * drafts) + 1)
    if hi - lo > _SEARCH:
        return None
    fits = [n for n in range(lo, hi + 1) if f"{n / drafts:.3f}" == rate]
    return fits[0] if len(fits) == 1 else None


def read_vllm_log(path: str, facts: Facts, *, round_to: int | None = None,
                  name: str | None = None) -> Ingested:
    """Read a log into one measured profile, as a rendered and validated set. Raises
    :class:`InvalidInput` naming every problem."""
    m = measure(path, None, facts.k, round_to=round_to)
    return measured_set(facts, m.tally, m.acceptance_length, m.rates,
                        default_source=f"vLLM server log: {m.where}", name=name,
                        default_name=stem(path), warnings=list(m.warnings))


def read(paths: Iterable[str | os.PathLike], *, facts: Facts, **options: Any
         ) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: one log; refusals as findings."""
    (path,) = [str(p) for p in paths]
    try:
        result = read_vllm_log(path, facts, **options)
    except InvalidInput as exc:
        return [], exc.findings
    return list(result.sets), list(result.warnings)
