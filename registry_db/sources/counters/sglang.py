"""SGLang's per-request speculative-decoding counts (``meta_info``) read as a measured profile.

SGLang writes, in each finished request's ``meta_info`` (``fill_spec_decoding_meta``,
``python/sglang/srt/managers/tokenizer_manager_components/spec_decoding_meta.py``), the request's
verification steps ``spec_verify_ct``, its accepted drafts ``spec_num_correct_drafts`` (older
releases: ``spec_accepted_drafts``), its proposed drafts ``spec_num_proposed_drafts`` and, where
recorded, ``spec_correct_drafts_histogram`` (older: ``spec_accept_histogram``), whose entry n
counts the steps that accepted n drafts (``Req.update_spec_acceptance_histogram``). Over a file
of requests, one JSON object per line (a ``/generate`` response or its ``meta_info``):

    AL  = 1 + Σ spec_num_correct_drafts / Σ spec_verify_ct
    p_i = Σ_{n ≥ i} h_n / Σ h_n        (when every request carries its histogram: exact)

``spec_accept_length`` (completion tokens / verify steps, per request) and the Prometheus gauge
``sglang:spec_accept_length`` are ratios, not counts, and are refused where they stand alone.

The K of an SGLang run is ``speculative_num_steps`` (how deep each step drafts; InferenceX maps
it so). SGLang counts ``spec_num_proposed_drafts = spec_verify_ct x
(speculative_num_draft_tokens - 1)``, the tree's nodes: under tree drafting
(``speculative_eagle_topk`` > 1) that is more than K a step. The profile's ``draft_tokens`` is
then K x drafts (each step drafted K deep) and SGLang's own count goes to the provenance's
``settings``, with a warning saying so.
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

NAME = "sglang"
DESCRIPTION = "SGLang's per-request meta_info (spec_verify_ct, spec_num_correct_drafts)"

VERIFY = "spec_verify_ct"
#: Each count under its current name, then the name older releases wrote.
CORRECT = ("spec_num_correct_drafts", "spec_accepted_drafts")
PROPOSED = ("spec_num_proposed_drafts", "spec_proposed_drafts")
HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")
RATIOS = ("spec_accept_length", "spec_accept_rate")
GAUGE = "sglang:spec_accept_length"
WHAT = "SGLang's responses, one JSON object per line with meta_info"
#: Text that only SGLang's output holds (its responses' count, its Prometheus gauge).
MARKERS = (f'"{VERIFY}"', GAUGE)


def read_sglang(path: str, facts: Facts, *, round_to: int | None = None,
                name: str | None = None) -> Ingested:
    """Read a JSON-lines file (or ``-``, or a URL) of SGLang requests into one measured
    profile (:func:`measure`, then the profile). Raises :class:`InvalidInput` naming every
    problem with its line."""
    m, tree = _measure(path, facts.k, round_to, None)
    settings: tuple[tuple[str, Any], ...] = ()
    if tree is not None:
        settings = (("spec_num_proposed_drafts", tree[0]),
                    ("speculative_num_draft_tokens", tree[1]))
    return measured_set(facts, m.tally, m.acceptance_length, m.rates,
                        default_source=f"SGLang meta_info: {m.where}", name=name,
                        default_name=stem(path), warnings=list(m.warnings), settings=settings)


def measure(path: str, before: str | None, k: int, *, round_to: int | None = None,
            text: str | None = None) -> Measured:
    """The run's counts from a JSON-lines file (or ``-``, or a URL; ``text``: its text, already
    read) of SGLang requests. Raises :class:`InvalidInput` naming every problem with its line;
    ``before`` must be None (the file holds the run's requests alone)."""
    if before is not None:
        raise UsageError("SGLang's meta_info counts each request of the run, so one file is "
                         "the whole run; drop --before")
    return _measure(path, k, round_to, text)[0]


def _measure(path: str, k: int, round_to: int | None, text: str | None
             ) -> tuple[Measured, tuple[int, int] | None]:
    """:func:`measure`, and under tree drafting SGLang's proposed count and the
    ``speculative_num_draft_tokens`` it implies (None for a chain)."""
    check_k(k)
    file = label(path)
    if text is None:
        text = read_input(path)
    gauge = prometheus_line(text, GAUGE)
    if gauge:
        raise InvalidInput([problem(
            file, gauge, GAUGE, "not_a_count",
            f"this is Prometheus text; {GAUGE} is a gauge (the mean over SGLang's last "
            "logging interval), not a count, so no AL can be summed from it: give the "
            "requests' meta_info as JSON lines (the /generate responses)")])
    problems: list[Finding] = []
    warnings: list[Finding] = []
    verify = correct = proposed = 0
    histogram: list[int] = [0] * (k + 1)
    with_histogram = without_histogram = skipped = 0
    odd_histogram = False
    first_skipped = 0
    seen: dict[Any, int] = {}
    for line, item in json_items(file, text, WHAT):
        meta = _meta_info(item)
        if meta is None:
            problems.append(problem(file, line, "", "not_a_request",
                                    f"a JSON {type(item).__name__} where {WHAT} is due"))
            continue
        if not any(key.startswith("spec_") for key in meta):
            skipped += 1
            first_skipped = first_skipped or line
            continue
        rid = meta.get("id")
        if isinstance(rid, str) and rid in seen:
            problems.append(problem(
                file, line, "meta_info.id", "repeated_request",
                f"request {rid!r} is also on line {seen[rid]}: the same request twice (a file "
                "appended twice, or two runs' outputs merged); give each request once"))
            continue
        if isinstance(rid, str):
            seen[rid] = line
        found = _request(file, line, meta, k)
        if isinstance(found, Finding):
            problems.append(found)
            continue
        v, c, p, h = found
        verify, correct, proposed = verify + v, correct + c, proposed + p
        if isinstance(h, Finding):
            warnings.append(h)
            odd_histogram = True
        if not isinstance(h, list):
            without_histogram += 1
        else:
            with_histogram += 1
            histogram = [a + b for a, b in zip(histogram, h + [0] * (k + 1 - len(h)))]
    if not problems and verify == 0:
        problems.append(problem(
            file, 0, VERIFY, "zero_drafts",
            f"no request carries {VERIFY} > 0: no speculative step ran (is speculative "
            "decoding on?), so there is no acceptance to measure"))
    if problems:
        raise InvalidInput(problems)
    if skipped:
        warnings.append(problem(
            file, first_skipped, "", "no_spec_fields",
            f"{skipped} request(s) carry no spec_* fields (no verification step ran, or "
            "speculative decoding was off for them): skipped", "warning"))
    per_position = None
    if with_histogram and not without_histogram:
        per_position = tuple(Fraction(sum(histogram[i:])) for i in range(1, k + 1))
    elif with_histogram and not odd_histogram:
        warnings.append(problem(
            file, 0, HISTOGRAM[0], "partial_histogram",
            f"{without_histogram} of {with_histogram + without_histogram} requests carry no "
            f"{HISTOGRAM[0]}: the per-position rates need every request's, so none are given",
            "warning"))
    tree = None
    if proposed > k * verify and proposed % verify == 0:
        # Tree drafting: the tree's nodes are not held to K; each step drafted K deep.
        tree = (proposed, proposed // verify + 1)
        warnings.append(problem(
            file, 0, PROPOSED[0], "tree_drafting",
            f"SGLang proposed {proposed} draft tokens in {verify} steps, {tree[1] - 1} a step, "
            f"more than --k {k}: tree drafting (speculative_eagle_topk > 1, "
            f"speculative_num_draft_tokens {tree[1]}), keyed at speculative_num_steps {k}; "
            f"draft_tokens is recorded as K x drafts and SGLang's count in settings. If the "
            f"server drafted a chain of {tree[1] - 1}, --k is not its speculative_num_steps",
            "warning"))
    drafted = k * verify if tree is not None else proposed
    tally = Tally(Fraction(verify), Fraction(drafted), Fraction(correct), per_position)
    al, rates = acceptance(tally, k, round_to, file, CORRECT[0])
    found_k = draft_token_findings(tally, k, al, (file, 0, PROPOSED[0]))
    if any(f.is_error for f in found_k):
        raise InvalidInput(found_k)
    return Measured(tally, al, rates, file, tuple(warnings + found_k)), tree


def read(paths: Iterable[str | os.PathLike], *, facts: Facts, **options: Any
         ) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: ``paths`` is the one JSON-lines file; refusals as
    findings. ``options`` are :func:`read_sglang`'s keywords."""
    (path,) = [str(p) for p in paths]
    try:
        result = read_sglang(path, facts, **options)
    except InvalidInput as exc:
        return [], exc.findings
    return list(result.sets), list(result.warnings)


def _meta_info(item: Any) -> dict[str, Any] | None:
    """A response's ``meta_info``, or the object itself when it is one; None when neither."""
    if not isinstance(item, dict):
        return None
    meta = item.get("meta_info", item)
    return meta if isinstance(meta, dict) else None


def _first(meta: dict[str, Any], names: tuple[str, ...]) -> tuple[str, Any]:
    """The first of ``names`` the record has, and its value (the current name when none)."""
    return next(((n, meta[n]) for n in names if n in meta), (names[0], None))


def _request(file: str, line: int, meta: dict[str, Any], k: int
             ) -> tuple[int, int, int, list[int] | Finding | None] | Finding:
    """One request's verify steps, accepted and proposed drafts and histogram (or the warning
    that sets its histogram aside), or the finding that refuses the request."""
    correct_name, correct_raw = _first(meta, CORRECT)
    if VERIFY not in meta or correct_raw is None:
        missing = [n for n, v in ((VERIFY, meta.get(VERIFY)), (correct_name, correct_raw))
                   if v is None]
        ratio = next((r for r in RATIOS if r in meta), None)
        if ratio is not None:
            return problem(file, line, f"meta_info.{ratio}", "not_a_count",
                           f"{ratio} is a ratio (completion tokens / verify steps), not a "
                           f"count, and this request has no {' or '.join(missing)} beside it: "
                           "ratios of requests of different lengths cannot be averaged into "
                           "AL; give meta_info as SGLang writes it (with both counts)")
        return problem(file, line, f"meta_info.{missing[0]}", "missing_field",
                       f"{' and '.join(missing)} missing; SGLang writes {VERIFY} and "
                       f"{CORRECT[0]} in every finished request's meta_info")
    verify, correct = count(meta[VERIFY]), count(correct_raw)
    proposed_name, proposed_raw = _first(meta, PROPOSED)
    proposed = k * verify if verify is not None and proposed_raw is None else count(proposed_raw)
    hist_name, hist_raw = _first(meta, HISTOGRAM)
    for field, value in ((VERIFY, verify), (correct_name, correct), (proposed_name, proposed)):
        if value is None:
            return problem(file, line, f"meta_info.{field}", "not_a_count",
                           f"{field} is {meta.get(field)!r}; a count is a whole number, not "
                           "negative")
    assert verify is not None and correct is not None and proposed is not None
    if correct > k * verify:
        return problem(file, line, f"meta_info.{correct_name}", "inconsistent_counters",
                       f"{correct} drafts accepted in {verify} steps is more than K = {k} a "
                       "step; is --k the server's speculative_num_steps?")
    if hist_raw is None:
        return verify, correct, proposed, None
    hist = [count(n) for n in hist_raw] if isinstance(hist_raw, list) else [None]
    if any(n is None for n in hist):
        return problem(file, line, f"meta_info.{hist_name}", "not_a_count",
                       f"{hist_name} is {hist_raw!r}; it is a list of step counts")
    steps: list[int] = [n for n in hist if n is not None]
    if len(steps) > k + 1 and any(steps[k + 1:]):
        return problem(file, line, f"meta_info.{hist_name}", "bad_positions",
                       f"{hist_name} counts steps that accepted more than --k {k} drafts; is "
                       "--k the server's speculative_num_steps?")
    steps = steps[:k + 1]
    if sum(steps) != verify or sum(n * c for n, c in enumerate(steps)) != correct:
        # The counts still give AL; only the distribution is in doubt.
        return verify, correct, proposed, problem(
            file, line, f"meta_info.{hist_name}", "inconsistent_histogram",
            f"{hist_name} {steps} counts {sum(steps)} steps and "
            f"{sum(n * c for n, c in enumerate(steps))} accepted drafts, but {VERIFY} is "
            f"{verify} and {correct_name} is {correct}: no per-position rates are given",
            "warning")
    return verify, correct, proposed, steps
