"""ATOM's MTP counters (``/metrics``) read as a measured profile, with its exact distribution.

ATOM's OpenAI server (``atom/entrypoints/openai/metrics.py``) publishes three counters from the
scheduler's ``SpecStats`` (``atom/model_engine/scheduler.py``), summed over data-parallel
ranks: ``atom:mtp_draft_tokens`` (K per verification step), ``atom:mtp_accepted_tokens`` and
``atom:mtp_decode_steps{accepted_tokens="n"}``. ``SpecStats.update`` is given the tokens a step
emitted and files the step under that number minus one, so ``n`` counts the drafts a step
accepted (0..K), not the tokens it emitted. With c_n the steps that accepted n drafts:

    AL  = 1 + Σ n·c_n / Σ c_n
    p_i = Σ_{n ≥ i} c_n / Σ c_n      (exact: the whole distribution, not a bound)

Its gauges (``atom:mtp_average_tokens_per_forward``, ``atom:mtp_acceptance_rate``) are not
counts and are never read. ``atom:metrics_snapshot_available`` is: before the exporter's first
refresh (``AtomMetricsExporter.update``) it is 0 and every counter reads 0 whatever the engine
counted, so such a scrape is refused. ATOM's exporter has its own registry and
``CounterMetricFamily`` counters: no ``_created`` samples and no ``process_start_time_seconds``,
so a restart between two scrapes shows only as a counter that went down.
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

NAME = "atom-metrics"
DESCRIPTION = "ATOM's MTP counters, from /metrics scrapes around a run (exact per position)"

DRAFT_TOKENS, ACCEPTED, STEPS = ("atom:mtp_draft_tokens", "atom:mtp_accepted_tokens",
                                 "atom:mtp_decode_steps")
COUNTERS = (DRAFT_TOKENS, ACCEPTED, STEPS)
WHAT = "ATOM's /metrics"
#: 1 once the exporter has a runtime snapshot; 0 before its first refresh.
SNAPSHOT = "atom:metrics_snapshot_available"
#: Text that only ATOM's scrape holds (both exposition formats' spellings; its gauges too, so
#: that its reader says they are not counts).
MARKERS = ("atom:mtp_", "atom_mtp_")


def measure(after: str, before: str | None, k: int, *, round_to: int | None = None,
            text: str | None = None) -> Measured:
    """The run's counts, exact per position, from two scrapes (files, ``-`` or URLs;
    ``text``: AFTER's text, already read). Raises :class:`InvalidInput` naming every problem;
    counters from several servers are one of them."""
    from registry_db.sources.counters.common import read_input
    from registry_db.sources.counters.forms import seen

    check_k(k)
    if text is None:
        text = read_input(after)
    other = seen(text, MARKERS)
    if other is not None:
        raise InvalidInput([problem(label(after), 0, "", "another_form", other)])
    scrape_after = parse_scrape(after, COUNTERS, WHAT, text, levels=(SNAPSHOT,))
    scrape_before = (parse_scrape(before, COUNTERS, WHAT, levels=(SNAPSHOT,))
                     if before is not None else None)
    unready = [problem(s.file, s.levels[SNAPSHOT][1], SNAPSHOT, "no_snapshot_yet",
                       f"{SNAPSHOT} is 0: ATOM's exporter had not taken its first runtime "
                       "snapshot when this was scraped, so every counter reads 0 whatever the "
                       "engine counted; scrape again once it is 1 (after the server's first "
                       "metrics refresh)")
               for s in (scrape_after, scrape_before)
               if s is not None and s.levels.get(SNAPSHOT, (1.0, 0))[0] == 0]
    if unready:
        raise InvalidInput(unready)
    tally = _tally(scrape_after, scrape_before, k)
    al, rates = acceptance(tally, k, round_to, scrape_after.file, STEPS)
    found = draft_token_findings(tally, k, al, (
        scrape_after.file, scrape_after.line_of(DRAFT_TOKENS), DRAFT_TOKENS))
    if any(f.is_error for f in found):
        raise InvalidInput(found)
    where = label(after) if before is None else f"{label(before)} -> {label(after)}"
    return Measured(tally, al, rates, where, tuple(found))


def read_atom_metrics(after: str, before: str | None, facts: Facts, *,
                      round_to: int | None = None, name: str | None = None) -> Ingested:
    """Read two scrapes (files, ``-`` or URLs) into one measured profile with exact
    per-position rates, as a rendered and validated set (:func:`measure`, then the profile).
    Raises :class:`InvalidInput` naming every problem."""
    m = measure(after, before, facts.k, round_to=round_to)
    return measured_set(facts, m.tally, m.acceptance_length, m.rates,
                        default_source=f"ATOM /metrics: {m.where}", name=name,
                        default_name=stem(after), warnings=list(m.warnings))


def read(paths: Iterable[str | os.PathLike], *, facts: Facts, before: str | None = None,
         **options: Any) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: ``paths`` is the one AFTER scrape; refusals as
    findings. ``options`` are :func:`read_atom_metrics`'s keywords."""
    (after,) = [str(p) for p in paths]
    try:
        result = read_atom_metrics(after, before, facts, **options)
    except InvalidInput as exc:
        return [], exc.findings
    return list(result.sets), list(result.warnings)


def _tally(after: Scrape, before: Scrape | None, k: int) -> Tally:
    scrapes = [after] + ([before] if before is not None else [])
    problems = [f for s in scrapes for f in mixed_servers(s, "error")]
    missing, found = missing_counters(
        scrapes, COUNTERS, "scrape ATOM's /metrics with MTP on; its gauges "
        "(atom:mtp_average_tokens_per_forward, atom:mtp_acceptance_rate) are not counts and "
        "cannot stand in for it")
    problems += found
    sums, found = deltas(after, before, missing)
    problems += found
    if problems:
        raise InvalidInput(problems)
    steps = by_label(sums, STEPS, "accepted_tokens")
    labels = sorted(steps, key=label_order)
    if labels != [str(n) for n in range(k + 1)]:
        problems.append(problem(
            after.file, after.line_of(STEPS), STEPS, "bad_positions",
            f"{STEPS}_total has accepted_tokens {', '.join(labels)} but --k {k} needs exactly "
            f"0..{k}; is --k the server's --num-speculative-tokens?"))
        raise InvalidInput(problems)
    c = [steps[str(n)] for n in range(k + 1)]
    drafts = sum(c, Fraction(0))
    accepted = total(sums, ACCEPTED)
    by_steps = sum((n * c_n for n, c_n in enumerate(c)), Fraction(0))
    if drafts == 0:
        problems.append(problem(
            after.file, after.line_of(STEPS), STEPS, "zero_drafts",
            f"{STEPS}_total did not grow{' between the scrapes' if before else ''}: no "
            "speculative step ran, so there is no acceptance to measure"))
    elif accepted != by_steps:
        problems.append(problem(
            after.file, after.line_of(ACCEPTED), ACCEPTED, "inconsistent_counters",
            f"{ACCEPTED}_total grew by {number(accepted)} but the steps by accepted_tokens "
            f"account for {number(by_steps)}; the counters are "
            "inconsistent"))
    if problems:
        raise InvalidInput(problems)
    per_position = tuple(sum(c[i:], Fraction(0)) for i in range(1, k + 1))
    return Tally(drafts, total(sums, DRAFT_TOKENS), accepted, per_position)
