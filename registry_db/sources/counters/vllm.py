"""vLLM's own speculative-decoding counters (``/metrics``) read as a measured profile.

Two scrapes of a vLLM server's Prometheus endpoint, taken before and after a benchmark run,
give the run's acceptance with vLLM's own definitions (``vllm/v1/spec_decode/metrics.py``):

    AL  = 1 + Δaccepted_tokens / Δdrafts
    p_i = Δaccepted_tokens_per_pos{position=i-1} / Δdrafts

Without a BEFORE scrape the counters count from the server's start. Counters are summed over
their label sets (one per engine); ``model_name`` picks one served model when there are several;
series from several ``instance``/``job`` label sets are summed with a warning. The reading, the
checks and the arithmetic are :mod:`registry_db.sources.counters.common`'; the counts go into the
profile's ``counts`` and, as before, into the provenance's settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
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
    round_rates,
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

__all__ = ["DESCRIPTION", "MARKERS", "NAME", "Facts", "measure", "read", "read_vllm_metrics",
           "round_rates"]

NAME = "vllm-metrics"
DESCRIPTION = "vLLM's speculative-decoding counters, from /metrics scrapes around a run"

PREFIX = "vllm:spec_decode_num_"
DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS = (
    PREFIX + "drafts", PREFIX + "draft_tokens", PREFIX + "accepted_tokens",
    PREFIX + "accepted_tokens_per_pos")
COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS)
#: The provenance settings the counts are recorded under (vLLM's counter names, shortened).
SETTING_NAMES = {DRAFTS: "num_drafts", DRAFT_TOKENS: "num_draft_tokens",
                 ACCEPTED: "num_accepted_tokens"}
WHAT = "vLLM's /metrics"
#: Text that only vLLM's scrape holds (both exposition formats' spellings): how ``registry
#: check`` tells its counters from another engine's.
MARKERS = (PREFIX, PREFIX.replace(":", "_"))


def measure(after: str, before: str | None, k: int, *, model_name: str | None = None,
            round_to: int | None = None, text: str | None = None) -> Measured:
    """The run's counts from two scrapes (files, ``-`` or URLs; ``text``: AFTER's text, already
    read). Raises :class:`InvalidInput` naming every problem of the counters; the
    adaptive-verification notice and mixed servers are warnings in the result."""
    check_k(k)
    text = _own_form(after, text)
    scrape_after = parse_scrape(after, COUNTERS, WHAT, text)
    scrape_before = parse_scrape(before, COUNTERS, WHAT) if before is not None else None
    warnings = mixed_servers(scrape_after, "warning")
    tally = _tally(scrape_after, scrape_before, k, model_name)
    al, rates = acceptance(tally, k, round_to, scrape_after.file, ACCEPTED)
    found = draft_token_findings(tally, k, al, (
        scrape_after.file, scrape_after.line_of(DRAFT_TOKENS), DRAFT_TOKENS))
    if any(f.is_error for f in found):
        raise InvalidInput(found)
    where = label(after) if before is None else f"{label(before)} -> {label(after)}"
    return Measured(tally, al, rates, where, tuple(warnings + found))


def read_vllm_metrics(after: str, before: str | None, facts: Facts, *,
                      model_name: str | None = None, round_to: int | None = None,
                      name: str | None = None) -> Ingested:
    """Read two scrapes (files, ``-`` or URLs) into one measured profile, as a rendered and
    validated set (:func:`measure`, then the profile).

    ``name`` is the set's name (default: AFTER's name, made file-safe). Raises
    :class:`InvalidInput` naming every problem of the counters; the adaptive-verification
    notice and mixed servers are warnings in the result.
    """
    m = measure(after, before, facts.k, model_name=model_name, round_to=round_to)
    tally = m.tally
    settings = tuple((SETTING_NAMES[c], number(v)) for c, v in (
        (DRAFTS, tally.drafts), (DRAFT_TOKENS, tally.draft_tokens), (ACCEPTED, tally.accepted)))
    return measured_set(facts, tally, m.acceptance_length, m.rates,
                        default_source=f"vLLM /metrics: {m.where}", name=name,
                        default_name=stem(after), warnings=list(m.warnings), settings=settings)


def _own_form(location: str, text: str | None) -> str:
    """The text at ``location``, refused naming its form when it is another producer's (Ray's
    re-export holds ``vllm_spec_decode_`` inside ``ray_vllm_spec_decode_``: told apart)."""
    from registry_db.sources.counters.common import read_input
    from registry_db.sources.counters.forms import seen

    if text is None:
        text = read_input(location)
    own = text if "ray_vllm_spec_decode" not in text else "\n".join(
        line for line in text.splitlines() if "ray_vllm_spec_decode" not in line)
    other = seen(text, MARKERS) if not any(m in own for m in MARKERS) else None
    if other is not None:
        raise InvalidInput([problem(label(location), 0, "", "another_form", other)])
    return text


def read(paths: Iterable[str | os.PathLike], *, facts: Facts, before: str | None = None,
         **options: Any) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: ``paths`` is the one AFTER scrape; refusals as
    findings. ``options`` are :func:`read_vllm_metrics`'s keywords."""
    (after,) = [str(p) for p in paths]
    try:
        result = read_vllm_metrics(after, before, facts, **options)
    except InvalidInput as exc:
        return [], exc.findings
    return list(result.sets), list(result.warnings)


def _tally(after: Scrape, before: Scrape | None, k: int, model_name: str | None) -> Tally:
    """The deltas between the scrapes, summed over label sets, for one served model.

    Raises :class:`InvalidInput` for several served models without ``model_name``, a missing
    counter or series, a counter that went down, zero drafts, or positions other than 0..K−1.
    """
    served = sorted({dict(labels).get("model_name", "") for _, labels in after.series})
    if model_name is None and len(served) > 1:
        raise InvalidInput([problem(
            after.file, after.line_of(DRAFTS), DRAFTS, "several_models",
            f"the scrape counts for several served models ({', '.join(served)}); pick one "
            "with --model-name")])
    if model_name is not None:
        if model_name not in served:
            raise InvalidInput([problem(
                after.file, after.line_of(DRAFTS), DRAFTS, "unknown_model_name",
                f"no counter has model_name={model_name!r}; the scrape serves "
                f"{', '.join(served) or 'no model name'}")])

        def served_by(labels: tuple[tuple[str, str], ...]) -> bool:
            return dict(labels).get("model_name") == model_name

        after = after.pick(served_by)
        before = before.pick(served_by) if before is not None else None
    scrapes = [after] + ([before] if before is not None else [])
    for_model = f" for model_name={model_name!r}" if model_name is not None else ""
    missing, problems = missing_counters(
        scrapes, COUNTERS, f"scrape vLLM's /metrics{for_model} with speculative decoding on")
    sums, found = deltas(after, before, missing)
    problems += found
    if problems:
        raise InvalidInput(problems)
    per_pos = by_label(sums, PER_POS, "position")
    positions = sorted(per_pos, key=label_order)
    if positions != [str(i) for i in range(len(positions))] or len(positions) != k:
        problems.append(problem(
            after.file, after.line_of(PER_POS), PER_POS, "bad_positions",
            f"{PER_POS}_total has positions {', '.join(positions)} but --k {k} needs exactly "
            f"0..{k - 1}; is --k the server's num_speculative_tokens?"))
    drafts = total(sums, DRAFTS)
    if drafts == 0:
        problems.append(problem(
            after.file, after.line_of(DRAFTS), DRAFTS, "zero_drafts",
            f"{DRAFTS}_total did not grow{' between the scrapes' if before else ''}: no "
            "speculative step ran, so there is no acceptance to measure"))
    if problems:
        raise InvalidInput(problems)
    return Tally(drafts, total(sums, DRAFT_TOKENS), total(sums, ACCEPTED),
                 tuple(per_pos[p] for p in positions))

