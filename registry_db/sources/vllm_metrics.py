"""vLLM's own speculative-decoding counters (``/metrics``) read as a measured profile.

Two scrapes of a vLLM server's Prometheus endpoint, taken before and after a benchmark run,
give the run's acceptance with vLLM's own definitions (``vllm/v1/spec_decode/metrics.py``):

    AL  = 1 + Δaccepted_tokens / Δdrafts
    p_i = Δaccepted_tokens_per_pos{position=i-1} / Δdrafts

Without a BEFORE scrape the counters count from the server's start. Counters are summed over
their label sets (one per engine); ``model_name`` picks one served model when there are several.
The arithmetic is exact (fractions of the counts), converted to the nearest float once, and
rounded only when asked; rounding keeps the rates summing to AL − 1 (largest remainders).

The scrapes are parsed by ``prometheus_client``'s text parser, never by hand. The counts
themselves go into the provenance's settings, so the value can always be derived again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from registry_db.errors import Finding, InvalidInput, UsageError
from registry_db.model import SUM_TOLERANCE, Profile, ProfileSet, Provenance, Sampling
from registry_db.sources.output import Ingested, rendered, safe_name, spec_problems

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

#: The flag each profile field comes from, to name it when the spec refuses its value.
FLAGS = {"name": "--name", "model": "--model", "speculative_method": "--method",
         "num_spec_tokens": "--k", "category": "--category", "provenance.source": "--source",
         "provenance.run": "--run", "provenance.benchmark": "--benchmark",
         "provenance.hardware": "--hardware", "provenance.engine_image": "--engine-image",
         "provenance.sampling.temperature": "--temperature", "provenance.sampling.top_p":
         "--top-p", "provenance.sampling.top_k": "--top-k",
         "provenance.sampling.max_tokens": "--max-tokens", "provenance.prompts": "--prompts"}

#: A series: the counter's name and its labels (sorted pairs).
Series = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Facts:
    """What the counters cannot say: the profile's key and how the run was made."""

    model: str
    method: str
    k: int
    thinking: str
    category: str
    hardware: str
    engine_image: str
    sampling: Sampling
    source: str | None = None
    run: str | None = None
    benchmark: str | None = None
    prompts: int | None = None


@dataclass(frozen=True)
class Counts:
    """The deltas between the scrapes, summed over label sets; per_position[i] is position i."""

    drafts: Fraction
    draft_tokens: Fraction
    accepted: Fraction
    per_position: tuple[Fraction, ...]


def read_vllm_metrics(after: str, before: str | None, facts: Facts, *,
                      model_name: str | None = None, round_to: int | None = None,
                      name: str | None = None) -> Ingested:
    """Read two scrapes (files) into one measured profile, as a rendered and validated set.

    ``name`` is the set's name (default: AFTER's file name, made file-safe). Raises
    :class:`InvalidInput` naming every problem of the counters; the adaptive-verification
    notice (draft tokens other than K × drafts) is a warning in the result.
    """
    scrape_after = _parse(after)
    scrape_before = _parse(before) if before is not None else None
    counts = delta(scrape_after, scrape_before, facts.k, model_name)
    al, rates = acceptance(counts, facts.k, round_to, after)
    warnings = []
    if counts.draft_tokens != facts.k * counts.drafts:
        logged = counts.accepted / counts.draft_tokens if counts.draft_tokens else Fraction(0)
        warnings.append(Finding(
            after, scrape_after.line_of(DRAFT_TOKENS), 1, DRAFT_TOKENS,
            "draft_tokens_not_k_drafts",
            f"draft tokens ({_number(counts.draft_tokens)}) are not K x drafts ({facts.k} x "
            f"{_number(counts.drafts)} = {_number(facts.k * counts.drafts)}): some steps "
            f"drafted fewer than K tokens (adaptive verification), or the server's K is not "
            f"--k {facts.k}. AL is still 1 + accepted / drafts = {al!r}, but vLLM's logged "
            f"acceptance rate (accepted / draft tokens = {float(logged)!r}) then differs from "
            f"(AL - 1) / K = {float((counts.accepted / counts.drafts) / facts.k)!r}; both "
            "counts are recorded in the provenance settings", severity="warning"))
    settings = tuple((SETTING_NAMES[c], _number(v)) for c, v in (
        (DRAFTS, counts.drafts), (DRAFT_TOKENS, counts.draft_tokens),
        (ACCEPTED, counts.accepted)))
    default_source = f"vLLM /metrics: {after}" if before is None else \
        f"vLLM /metrics: {before} -> {after}"
    provenance = Provenance(
        source=facts.source or default_source, run=facts.run, benchmark=facts.benchmark,
        prompts=facts.prompts, hardware=facts.hardware, engine_image=facts.engine_image,
        sampling=facts.sampling, settings=settings)
    profile = Profile(model=facts.model, speculative_method=facts.method,
                      num_spec_tokens=facts.k, thinking=facts.thinking, category=facts.category,
                      acceptance_length=al, method="measured", per_position_rates=rates,
                      provenance=provenance)
    set_name = name if name is not None else safe_name(Path(after).stem)
    ps = ProfileSet(set_name, (), (profile,))
    refused = [f"{FLAGS.get(what, what)}: {f.message}" for _, what, f in spec_problems(ps)]
    if refused:
        # Everything the counters give is checked above, so what is left came from a flag.
        raise UsageError("; ".join(refused))
    return rendered([ps], warnings)


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


# --- parsing ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scrape:
    """One scrape's speculative-decoding counters, by series."""

    file: str
    text: str
    series: dict[Series, float]

    def line_of(self, counter: str, labels: tuple[tuple[str, str], ...] = ()) -> int:
        """The first line that writes ``counter`` with ``labels`` (for findings); 0 if none."""
        for number, line in enumerate(self.text.splitlines(), start=1):
            if any(line.startswith(counter + tail) for tail in ("_total", "{", " ")) and all(
                    f'{n}="{v}"' in line for n, v in labels):
                return number
        return 0


def _parse(file: str) -> Scrape:
    from prometheus_client.parser import text_string_to_metric_families

    def fail(message: str) -> InvalidInput:
        return InvalidInput([Finding(file, 0, 0, "", "not_prometheus_text", message)])

    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise InvalidInput([Finding(file, 0, 0, "", "unreadable_file",
                                    f"cannot read the file: {why}")]) from None
    series: dict[Series, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                counter = _counter(sample.name)
                if counter is None:
                    continue
                key = (counter, tuple(sorted(sample.labels.items())))
                if key in series:
                    raise fail(f"{sample.name}{sample.labels} appears twice; a scrape holds "
                               "each series once")
                value = float(sample.value)
                if not value >= 0 or value == float("inf"):
                    raise fail(f"{sample.name}{sample.labels} is {value!r}; a counter is a "
                               "finite count, not negative")
                series[key] = value
    except ValueError as exc:
        raise fail(f"not Prometheus text format ({exc}); give a scrape of vLLM's /metrics") \
            from None
    return Scrape(file, text, series)


def _counter(sample_name: str) -> str | None:
    """The counter a sample belongs to (``X_total`` and a bare ``X`` alike), or None."""
    base = sample_name[:-len("_total")] if sample_name.endswith("_total") else sample_name
    return base if base in COUNTERS else None


# --- the deltas and the checks -----------------------------------------------------------------

def delta(after: Scrape, before: Scrape | None, k: int, model_name: str | None) -> Counts:
    """Δ of each counter (AFTER − BEFORE, or AFTER alone), summed over label sets.

    Raises :class:`InvalidInput` for a missing counter, a counter that went down, several
    served models without ``model_name``, zero drafts, or positions other than 0..K−1.
    """
    problems: list[Finding] = []

    def problem(scrape: Scrape, counter: str, code: str, message: str,
                labels: tuple[tuple[str, str], ...] = ()) -> None:
        line = scrape.line_of(counter, labels)
        problems.append(Finding(scrape.file, line, 1 if line else 0, counter, code, message))

    served = sorted({dict(labels).get("model_name", "") for _, labels in after.series})
    if model_name is None and len(served) > 1:
        problem(after, DRAFTS, "several_models",
                f"the scrape counts for several served models ({', '.join(served)}); pick "
                "one with --model-name")
    elif model_name is not None and model_name not in served:
        problem(after, DRAFTS, "unknown_model_name",
                f"no counter has model_name={model_name!r}; the scrape serves "
                f"{', '.join(served) or 'no model name'}")
    if problems:  # which series to read is undecided: every check below would be noise
        raise InvalidInput(problems)
    scrapes = [after] + ([before] if before is not None else [])
    picked = {s.file: _pick(s, model_name) for s in scrapes}
    missing = set()
    for scrape in scrapes:
        present = {counter for counter, _ in picked[scrape.file]}
        for counter in COUNTERS:
            if counter not in present:
                missing.add(counter)
                problem(scrape, counter, "missing_counter",
                        f"{counter}_total is missing{_for(model_name)}; scrape vLLM's /metrics "
                        "with speculative decoding enabled")
    sums: dict[Series, Fraction] = {}
    for key, value in picked[after.file].items():
        sums[key] = Fraction(value)
    if before is not None:
        for key, value in picked[before.file].items():
            now = picked[after.file].get(key)
            if key[0] in missing:  # already reported, and not a restart
                continue
            shown = ",".join(f'{n}="{v}"' for n, v in key[1])
            if now is None or now < value:
                problem(after, key[0], "counter_went_down",
                        f"{key[0]}_total{{{shown}}} went down from {_number(Fraction(value))} "
                        f"to {'nothing' if now is None else _number(Fraction(now))}: the server "
                        "restarted between the scrapes; take both from one server run", key[1])
            else:
                sums[key] = Fraction(now) - Fraction(value)
    if problems:
        raise InvalidInput(problems)
    total = {c: sum((v for (name, _), v in sums.items() if name == c), Fraction(0))
             for c in (DRAFTS, DRAFT_TOKENS, ACCEPTED)}
    per_pos: dict[str, Fraction] = {}
    for (name, labels), v in sums.items():
        if name == PER_POS:
            position = dict(labels).get("position", "?")
            per_pos[position] = per_pos.get(position, Fraction(0)) + v
    expected = [str(i) for i in range(k)]
    if sorted(per_pos, key=_position_order) != expected:
        problem(after, PER_POS, "bad_positions",
                f"{PER_POS}_total has positions {', '.join(sorted(per_pos, key=_position_order))}"
                f" but --k {k} needs exactly 0..{k - 1}; is --k the server's "
                "num_speculative_tokens?")
    if total[DRAFTS] == 0:
        problem(after, DRAFTS, "zero_drafts",
                f"{DRAFTS}_total did not grow{' between the scrapes' if before else ''}: no "
                "speculative step ran, so there is no acceptance to measure")
    if problems:
        raise InvalidInput(problems)
    return Counts(total[DRAFTS], total[DRAFT_TOKENS], total[ACCEPTED],
                  tuple(per_pos[p] for p in expected))


def _pick(scrape: Scrape, model_name: str | None) -> dict[Series, float]:
    if model_name is None:
        return dict(scrape.series)
    return {key: v for key, v in scrape.series.items()
            if dict(key[1]).get("model_name") == model_name}


def _position_order(position: str) -> tuple[int, Any]:
    return (0, int(position)) if position.isdigit() else (1, position)


def _for(model_name: str | None) -> str:
    return f" for model_name={model_name!r}" if model_name is not None else ""


# --- the arithmetic ------------------------------------------------------------------------------

def acceptance(counts: Counts, k: int, round_to: int | None, file: str
               ) -> tuple[float, tuple[float, ...]]:
    """AL and the per-position rates; rounded to ``round_to`` decimals when given.

    Raises :class:`InvalidInput` when the counts cannot be a profile of K: AL above K + 1,
    a position accepted more often than drafted, rates that rise, or per-position counts that
    disagree with the accepted total by more than the spec's tolerance.
    """
    d = counts.drafts
    al = 1 + counts.accepted / d
    rates = [n / d for n in counts.per_position]
    problems = []
    if al > k + 1:
        problems.append(f"AL {float(al)!r} exceeds K + 1 = {k + 1}; is --k the server's K?")
    if any(r > 1 for r in rates):
        problems.append("a position was accepted more often than there were drafts")
    if any(later > earlier for earlier, later in zip(rates, rates[1:])):
        problems.append("the per-position counts rise with the position; vLLM's never do")
    if abs(sum(rates) - (al - 1)) > Fraction(str(SUM_TOLERANCE)):
        summed = sum(counts.per_position, Fraction(0))
        problems.append(f"the per-position counts sum to {_number(summed)} but accepted "
                        f"tokens are {_number(counts.accepted)}")
    if problems:
        raise InvalidInput([Finding(file, 0, 0, ACCEPTED, "inconsistent_counters",
                                    f"{p}; the counters are inconsistent") for p in problems])
    if round_to is None:
        return float(al), tuple(float(r) for r in rates)
    return round_rates(al, rates, round_to)


def round_rates(al: Fraction, rates: list[Fraction], places: int
                ) -> tuple[float, tuple[float, ...]]:
    """AL rounded to ``places`` decimals, and rates rounded so that they sum to it minus 1.

    Each rate is floored to the grid and the units still owed to the rounded AL − 1 go to the
    largest remainders (ties to the earlier position), which keeps the rates non-increasing and
    within [0, 1]: rounding each rate alone could miss AL − 1 by K half-units.
    """
    unit = Fraction(1, 10 ** places)
    al_r = round(al, places)
    floors = [r // unit for r in rates]
    owed = int((al_r - 1) / unit) - sum(floors)
    order = sorted((i for i, r in enumerate(rates) if r % unit),
                   key=lambda i: (-(rates[i] % unit), i))
    chosen = set(order[:max(0, owed)])
    rounded = [(f + (1 if i in chosen else 0)) * unit for i, f in enumerate(floors)]
    return float(al_r), tuple(float(r) for r in rounded)


def _number(value: Fraction) -> int | float:
    """A count as an int when whole (as counters are), else a float."""
    return int(value) if value.denominator == 1 else float(value)
