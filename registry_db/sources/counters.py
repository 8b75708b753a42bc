"""What every counter source shares: the run's facts, reading an input, Prometheus scrapes, the
checks between two scrapes, the exact arithmetic, and the measured profile with its counts.

An input is a file, ``-`` (stdin) or an ``http(s)://`` URL, read whole within
:data:`MAX_INPUT_BYTES`. A scrape is parsed by ``prometheus_client``'s text parser (OpenMetrics
too, whose sample names escape ``vllm:`` as ``vllm_``), and its lines are indexed once, so that
every finding names its line without scanning the text again. Counts stay exact (fractions of
the counts) until the profile is built: AL and the rates are the nearest floats of the exact
values, rounded only when asked.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from registry_db.errors import Finding, InvalidInput, UsageError
from registry_db.model import (
    MAX_K,
    SUM_TOLERANCE,
    Counts,
    Profile,
    ProfileSet,
    Provenance,
    Sampling,
)
from registry_db.sources.output import Ingested, rendered, safe_name, spec_problems

#: The most an input may hold: a scrape of a server with many engines is a few MB.
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: How long a fetch of an ``http(s)://`` input may wait for the server, in seconds.
FETCH_TIMEOUT = 30.0

#: The flag each profile field comes from, to name it when the spec refuses its value.
FLAGS = {"name": "--name", "model": "--model", "speculative_method": "--method",
         "num_spec_tokens": "--k", "category": "--category", "provenance.source": "--source",
         "provenance.run": "--run", "provenance.benchmark": "--benchmark",
         "provenance.hardware": "--hardware", "provenance.engine_image": "--engine-image",
         "provenance.sampling.temperature": "--temperature", "provenance.sampling.top_p":
         "--top-p", "provenance.sampling.top_k": "--top-k",
         "provenance.sampling.max_tokens": "--max-tokens", "provenance.prompts": "--prompts"}

Labels = tuple[tuple[str, str], ...]
#: A series: the counter's name (as the engine spells it) and its labels (sorted pairs).
Series = tuple[str, Labels]


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
class Tally:
    """A run's counts, exact: steps that drafted, tokens drafted, drafts accepted, and (where the
    source gives them) ``per_position[i]``, the steps that accepted at least i + 1 drafts."""

    drafts: Fraction
    draft_tokens: Fraction
    accepted: Fraction
    per_position: tuple[Fraction, ...] | None = None

    def counts(self) -> Counts:
        """The profile's :class:`~registry_db.model.Counts` (whole numbers, as counted)."""
        per = None if self.per_position is None else tuple(int(n) for n in self.per_position)
        return Counts(int(self.drafts), int(self.draft_tokens), int(self.accepted), per)


def problem(file: str, line: int, path: str, code: str, message: str,
            severity: str = "error") -> Finding:
    """A finding at ``line`` of ``file`` (column 1; 0 and 0 when the line is not known)."""
    return Finding(file, line, 1 if line else 0, path, code, message, severity)


def check_k(k: int) -> None:
    """K within the registry's limit, checked before anything is sized by it."""
    if not 1 <= k <= MAX_K:
        raise UsageError(f"--k {k} is outside 1..{MAX_K} (the registry's limit on K)")


# --- reading an input ---------------------------------------------------------------------------

def label(location: str) -> str:
    """How findings name an input: its path or URL, ``<stdin>`` for ``-``."""
    return "<stdin>" if location == "-" else location


def read_input(location: str) -> str:
    """The text at ``location``: a file, ``-`` (stdin) or an ``http://``/``https://`` URL.

    Raises :class:`InvalidInput` with one finding when it cannot be read, is over
    :data:`MAX_INPUT_BYTES`, or is not UTF-8; a fetch waits at most :data:`FETCH_TIMEOUT`.
    """
    where = label(location)
    limit = MAX_INPUT_BYTES  # read at each call: tests lower it

    def fail(code: str, message: str) -> InvalidInput:
        return InvalidInput([problem(where, 0, "", code, message)])

    if location.startswith(("http://", "https://")):
        data = _fetch(location, limit, fail)
    elif location == "-":
        data = sys.stdin.buffer.read(limit + 1)
    else:
        try:
            with open(location, "rb") as f:
                data = f.read(limit + 1)
        except OSError as exc:
            raise fail("unreadable_file",
                       f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise fail("too_large", f"more than {limit:,} bytes; a /metrics scrape or a run's "
                                "statistics are far smaller: is this the right input?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail("unreadable_file", f"not UTF-8 text (byte {exc.start})") from None


def _fetch(url: str, limit: int, fail: Callable[[str, str], InvalidInput]) -> bytes:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={
        # Prometheus text, not OpenMetrics, and JSON for TensorRT-LLM's /metrics.
        "Accept": "text/plain;version=0.0.4;q=1, application/json;q=0.9, */*;q=0.1"})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:
            return bytes(response.read(limit + 1))
    except urllib.error.HTTPError as exc:
        raise fail("fetch_failed", f"the server answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        why = getattr(exc.reason, "strerror", None) or exc.reason
        raise fail("fetch_failed", f"cannot fetch it: {why}; is the server up at that "
                                   "address?") from None
    except (TimeoutError, OSError) as exc:
        why = f"no answer within {FETCH_TIMEOUT:g} s" if isinstance(
            exc, TimeoutError) else (exc.strerror or exc)
        raise fail("fetch_failed", f"cannot fetch it: {why}") from None


# --- Prometheus scrapes ---------------------------------------------------------------------------

#: A Prometheus sample line's start: a metric name, then labels or a value.
_METRIC_RE = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*(\{.*\})?[ \t]+([-+0-9.eE]+|[+-]?Inf|NaN)\b")
#: Metric types that are not counts: a delta of a level measures nothing.
NOT_COUNTS = frozenset({"gauge", "histogram", "gaugehistogram", "summary", "info", "stateset"})


def _base(name: str) -> str:
    """A metric name as both exposition formats can spell it: ``:`` as ``_``, no ``_total``."""
    name = name.replace(":", "_")
    return name[:-len("_total")] if name.endswith("_total") else name


@dataclass(frozen=True)
class Scrape:
    """One scrape's counters by series, with the first line of each series and counter."""

    file: str
    series: dict[Series, float]
    lines: dict[Series, int]
    counter_lines: dict[str, int]

    def line_of(self, counter: str, labels: Labels | None = None) -> int:
        """The line that writes the series (else the counter's first line; 0 if none)."""
        if labels is not None and (counter, labels) in self.lines:
            return self.lines[(counter, labels)]
        return self.counter_lines.get(counter, 0)

    def pick(self, keep: Callable[[Labels], bool]) -> Scrape:
        """The same scrape with only the series whose labels ``keep`` accepts."""
        return Scrape(self.file, {s: v for s, v in self.series.items() if keep(s[1])},
                      self.lines, self.counter_lines)


def parse_scrape(location: str, counters: Iterable[str], what: str) -> Scrape:
    """Read and parse the scrape at ``location``, keeping the samples of ``counters``.

    ``what`` names the endpoint in messages (``vLLM's /metrics``). Raises
    :class:`InvalidInput` for text that is not Prometheus format, a series written twice, a
    value that is not a whole, finite, non-negative count, or a counter declared as a gauge.
    """
    from prometheus_client.parser import text_string_to_metric_families

    file, text = label(location), read_input(location)
    wanted = {_base(c): c for c in counters}
    lines: dict[Series, int] = {}
    counter_lines: dict[str, int] = {}
    type_lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE" and _base(parts[2]) in wanted:
                type_lines.setdefault(wanted[_base(parts[2])], number)
            continue
        head = line.split("{", 1)[0].split()
        counter = wanted.get(_base(head[0])) if head else None
        if counter is None:
            continue
        counter_lines.setdefault(counter, number)
        try:  # only the counters' own lines, each once: the index stays linear in the text
            for family in text_string_to_metric_families(line + "\n"):
                for sample in family.samples:
                    lines.setdefault((counter, tuple(sorted(sample.labels.items()))), number)
        except ValueError:
            pass  # the whole-text parse below reports it
    for counter, number in type_lines.items():
        counter_lines.setdefault(counter, number)

    def fail(line: int, path: str, code: str, message: str) -> InvalidInput:
        return InvalidInput([problem(file, line, path, code, message)])

    series: dict[Series, float] = {}
    declared: dict[str, str] = {}
    try:
        for family in text_string_to_metric_families(text):
            if family.type not in ("unknown", "untyped"):
                declared.setdefault(_base(family.name), family.type)
            for sample in family.samples:
                counter = wanted.get(_base(sample.name))
                if counter is None:
                    continue
                key = (counter, tuple(sorted(sample.labels.items())))
                shown = f"{sample.name}{sample.labels}"
                if key in series:
                    raise fail(lines.get(key, 0), counter, "not_prometheus_text",
                               f"{shown} appears twice; a scrape holds each series once")
                value = float(sample.value)
                if not 0 <= value < float("inf") or value != int(value):
                    raise fail(lines.get(key, 0), counter, "not_prometheus_text",
                               f"{shown} is {value!r}; a counter is a whole, finite count, "
                               "not negative")
                series[key] = value
    except ValueError as exc:
        raise fail(0, "", "not_prometheus_text",
                   f"not Prometheus text format ({exc}); give a scrape of {what}") from None
    gauges = [problem(file, type_lines.get(c, counter_lines.get(c, 0)), c, "not_a_counter",
                      f"{c} is declared a {declared[_base(c)]} (# TYPE); a {declared[_base(c)]}"
                      " is a level, not a count, and a delta of it counts nothing; scrape "
                      f"{what}, whose {c}_total is a counter")
              for c in wanted.values() if declared.get(_base(c)) in NOT_COUNTS]
    if gauges:
        raise InvalidInput(gauges)
    return Scrape(file, series, lines, counter_lines)


def shown(series: Series) -> str:
    """A series as the scrape writes it: ``name_total{a="1",b="2"}``."""
    name, labels = series
    inner = ",".join(f'{n}="{v}"' for n, v in labels)
    return f"{name}_total{{{inner}}}" if inner else f"{name}_total"


def mixed_servers(scrape: Scrape, severity: str) -> list[Finding]:
    """A finding when the scrape's series carry several ``instance``/``job`` label sets (a
    Prometheus federation or query result): summing them adds up several servers."""
    servers = sorted({(d.get("instance", ""), d.get("job", ""))
                      for d in (dict(labels) for _, labels in scrape.series)
                      if "instance" in d or "job" in d})
    if len(servers) < 2:
        return []
    names = ", ".join(f"instance={i!r} job={j!r}" for i, j in servers[:4])
    more = f" and {len(servers) - 4} more" if len(servers) > 4 else ""
    first = min((scrape.lines[s] for s in scrape.series if s in scrape.lines), default=0)
    return [problem(scrape.file, first, "", "mixed_servers",
                    f"the counters come from {len(servers)} servers ({names}{more}); summing "
                    "them mixes two servers' runs: scrape one server, or select one "
                    "instance in the query", severity)]


def missing_counters(scrapes: Iterable[Scrape], counters: Iterable[str], hint: str
                     ) -> tuple[set[str], list[Finding]]:
    """The counters some scrape lacks, each a finding on that scrape; ``hint`` says how to get
    them."""
    missing: set[str] = set()
    found: list[Finding] = []
    for scrape in scrapes:
        present = {name for name, _ in scrape.series}
        for counter in counters:
            if counter not in present:
                missing.add(counter)
                found.append(problem(scrape.file, scrape.line_of(counter), counter,
                                     "missing_counter", f"{counter}_total is missing; {hint}"))
    return missing, found


def deltas(after: Scrape, before: Scrape | None, skip: AbstractSet[str] = frozenset()
           ) -> tuple[dict[Series, Fraction], list[Finding]]:
    """AFTER − BEFORE per series (AFTER alone without BEFORE; a series new in AFTER counts from
    zero, as an engine that started between the scrapes does), and the findings: a series
    BEFORE has and AFTER lacks is missing, one that went down is a restart, and when every
    series that changed went down the two scrapes are swapped. ``skip``: counters already
    reported missing."""
    sums = {key: Fraction(value) for key, value in after.series.items()}
    if before is None:
        return sums, []
    found: list[Finding] = []
    down: list[tuple[Series, float, float]] = []
    grew = False
    for key, then in before.series.items():
        if key[0] in skip:
            continue
        now = after.series.get(key)
        if now is None:
            found.append(problem(after.file, after.line_of(key[0]), key[0], "missing_series",
                                 f"{shown(key)} is missing, but BEFORE has it "
                                 f"({before.file}:{before.line_of(*key)}); take both scrapes "
                                 "from the same server, with the same labels"))
        elif now < then:
            down.append((key, then, now))
        else:
            grew = grew or now > then
            sums[key] = Fraction(now) - Fraction(then)
    if down and not grew:
        key, then, now = down[0]
        found.append(problem(after.file, after.line_of(*key), key[0], "scrapes_swapped",
                             f"every counter that changed went down ({shown(key)} from "
                             f"{number(Fraction(then))} to {number(Fraction(now))}): AFTER and "
                             f"BEFORE look swapped; give the scrape taken after the run as AFTER "
                             f"and {before.file} as --before (if they are not swapped, the "
                             "server restarted between them)"))
    else:
        found.extend(problem(after.file, after.line_of(*key), key[0], "counter_went_down",
                             f"{shown(key)} went down from {number(Fraction(then))} to "
                             f"{number(Fraction(now))}: the server restarted between the "
                             "scrapes; take both from one server run") for key, then, now in down)
    return sums, found


def total(sums: dict[Series, Fraction], counter: str) -> Fraction:
    """A counter's delta summed over its label sets."""
    return sum((v for (name, _), v in sums.items() if name == counter), Fraction(0))


def by_label(sums: dict[Series, Fraction], counter: str, name: str) -> dict[str, Fraction]:
    """A counter's deltas summed by the value of one label (``position``, ``accepted_tokens``)."""
    out: dict[str, Fraction] = {}
    for (counter_, labels), v in sums.items():
        if counter_ == counter:
            key = dict(labels).get(name, "?")
            out[key] = out.get(key, Fraction(0)) + v
    return out


def label_order(value: str) -> tuple[int, Any]:
    """Numbers in numeric order, then anything else."""
    return (0, int(value)) if value.isdigit() else (1, value)


# --- JSON inputs ----------------------------------------------------------------------------------

def json_items(file: str, text: str, what: str) -> list[tuple[int, Any]]:
    """The values of a JSON text with their lines: JSON lines, concatenated values, or an array
    (as an endpoint returns it), each top-level array's elements one by one.

    ``what`` names the expected input in messages. Raises :class:`InvalidInput` (FILE:LINE:COL)
    for text that is not JSON.
    """
    import json
    from bisect import bisect_right

    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    decoder = json.JSONDecoder()
    items: list[tuple[int, Any]] = []
    at, end = (1 if text.startswith("\ufeff") else 0), len(text)

    def skip(i: int) -> int:
        while i < end and text[i] in " \t\r\n":
            i += 1
        return i

    def value(i: int) -> int:
        item, after = decoder.raw_decode(text, i)
        items.append((bisect_right(starts, i), item))
        return int(after)

    try:
        while (at := skip(at)) < end:
            if text[at] != "[":
                at = value(at)
                continue
            at = skip(at + 1)
            while at < end and text[at] != "]":
                at = skip(value(at))
                if at < end and text[at] == ",":
                    at = skip(at + 1)
                elif at >= end or text[at] != "]":
                    raise json.JSONDecodeError("expected ',' or ']'", text, at)
            at += 1
    except json.JSONDecodeError as exc:
        raise InvalidInput([Finding(file, exc.lineno, exc.colno, "", "not_json",
                                    f"not JSON ({exc.msg}); give {what}")]) from None
    except RecursionError:
        raise InvalidInput([problem(file, 0, "", "not_json",
                                    "JSON nested too deeply to be " + what)]) from None
    return items


def prometheus_line(text: str, name: str) -> int:
    """When ``text`` is Prometheus text rather than JSON, the line that writes ``name`` (else its
    first line); 0 when it is JSON or neither (the JSON reader then says why)."""
    first = next((line.strip().lstrip("\ufeff") for line in text.splitlines(keepends=False)
                  if line.strip()), "")
    if not first or first[0] in "[{" or not (first.startswith("#") or _METRIC_RE.match(first)):
        return 0
    return next((n for n, line in enumerate(text.splitlines(), start=1)
                 if _base(line.split("{", 1)[0].split(" ", 1)[0]) == _base(name)), 1)


def count(value: Any) -> int | None:
    """``value`` when it is a count (an integer, not negative, not a boolean), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


# --- the arithmetic ------------------------------------------------------------------------------

def acceptance(tally: Tally, k: int, round_to: int | None, file: str, path: str
               ) -> tuple[float, tuple[float, ...] | None]:
    """AL = 1 + accepted / drafts and, with per-position counts, p_i = per_position[i] / drafts;
    rounded to ``round_to`` decimals when given (the rates still summing to AL − 1).

    Raises :class:`InvalidInput` when the counts cannot be a profile of K: AL above K + 1, more
    accepted than drafted, a position accepted more often than there were drafts or than the
    one before it, or per-position counts that disagree with the accepted total.
    """
    d = tally.drafts
    al = 1 + tally.accepted / d
    rates = None if tally.per_position is None else [n / d for n in tally.per_position]
    problems = []
    if al > k + 1:
        problems.append(f"AL {float(al)!r} exceeds K + 1 = {k + 1}; is --k the server's K?")
    if tally.accepted > tally.draft_tokens:
        problems.append(f"more drafts accepted ({number(tally.accepted)}) than drafted "
                        f"({number(tally.draft_tokens)})")
    if rates is not None:
        if any(r > 1 for r in rates):
            problems.append("a position was accepted more often than there were drafts")
        if any(later > earlier for earlier, later in zip(rates, rates[1:])):
            problems.append("the per-position counts rise with the position; a draft is "
                            "accepted only after every draft before it")
        if abs(sum(rates) - (al - 1)) > Fraction(str(SUM_TOLERANCE)):
            summed = sum(tally.per_position or (), Fraction(0))
            problems.append(f"the per-position counts sum to {number(summed)} but accepted "
                            f"tokens are {number(tally.accepted)}")
    if problems:
        raise InvalidInput([problem(file, 0, path, "inconsistent_counters",
                                    f"{p}; the counters are inconsistent") for p in problems])
    if round_to is None:
        return float(al), None if rates is None else tuple(float(r) for r in rates)
    if rates is None:
        return float(round(al, round_to)), None
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


def draft_token_findings(tally: Tally, k: int, al: float, where: tuple[str, int, str]
                         ) -> list[Finding]:
    """Draft tokens against K × drafts: more is an error (the server's K is above --k); fewer
    is the adaptive-verification warning (AL stands, but the accepted fraction of draft tokens
    then differs from (AL − 1) / K)."""
    file, line, path = where
    full = k * tally.drafts
    if tally.draft_tokens > full:
        return [problem(file, line, path, "draft_tokens_above_k",
                        f"draft tokens ({number(tally.draft_tokens)}) exceed K x drafts ({k} x "
                        f"{number(tally.drafts)} = {number(full)}): the server drafted more "
                        f"than {k} tokens per step; is --k the server's K?")]
    if tally.draft_tokens == full:
        return []
    logged = tally.accepted / tally.draft_tokens if tally.draft_tokens else Fraction(0)
    return [problem(file, line, path, "draft_tokens_not_k_drafts",
                    f"draft tokens ({number(tally.draft_tokens)}) are not K x drafts ({k} x "
                    f"{number(tally.drafts)} = {number(full)}): some steps drafted fewer than "
                    f"K tokens (adaptive verification), or the server's K is not --k {k}. AL is "
                    f"still 1 + accepted / drafts = {al!r}, but the logged acceptance rate "
                    f"(accepted / draft tokens = {float(logged)!r}) then differs from "
                    f"(AL - 1) / K = {float((tally.accepted / tally.drafts) / k)!r}; both "
                    "counts are recorded", severity="warning")]


# --- the profile ---------------------------------------------------------------------------------

def measured_set(facts: Facts, tally: Tally, al: float, rates: tuple[float, ...] | None, *,
                 default_source: str, name: str | None, default_name: str,
                 warnings: list[Finding], settings: tuple[tuple[str, Any], ...] = ()
                 ) -> Ingested:
    """One measured profile with ``tally`` as its counts, as a rendered and validated set.

    A value the spec refuses can only have come from a flag (everything the counts give was
    checked before), so it is a :class:`UsageError` naming the flag.
    """
    provenance = Provenance(
        source=facts.source or default_source, run=facts.run, benchmark=facts.benchmark,
        prompts=facts.prompts, hardware=facts.hardware, engine_image=facts.engine_image,
        sampling=facts.sampling, settings=settings)
    profile = Profile(model=facts.model, speculative_method=facts.method,
                      num_spec_tokens=facts.k, thinking=facts.thinking, category=facts.category,
                      acceptance_length=al, method="measured", per_position_rates=rates,
                      provenance=provenance, counts=tally.counts())
    ps = ProfileSet(name if name is not None else safe_name(default_name), (), (profile,))
    refused = [f"{FLAGS.get(what, what)}: {f.message}" for _, what, f in spec_problems(ps)]
    if refused:
        raise UsageError("; ".join(refused))
    return rendered([ps], warnings)


def stem(location: str) -> str:
    """The default set name's source: a file's stem, the last part of a URL's path."""
    if location == "-":
        return "stdin"
    if location.startswith(("http://", "https://")):
        from urllib.parse import urlsplit

        parts = urlsplit(location)
        return f"{parts.hostname or 'server'}-{Path(parts.path).stem or 'metrics'}"
    return Path(location).stem


def number(value: Fraction) -> int | float:
    """A count as an int when whole (as counters are), else a float."""
    return int(value) if value.denominator == 1 else float(value)
