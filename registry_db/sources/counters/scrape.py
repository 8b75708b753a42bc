"""Prometheus scrapes for the counter sources: parsed once, indexed by line, and compared.

A scrape is parsed by ``prometheus_client``'s text parser (OpenMetrics too, whose sample names
escape ``vllm:`` as ``vllm_``), and its lines are indexed once, so that every finding names its
line without scanning the text again. Between two scrapes, a vanished series, a restart and
swapped scrapes are told apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from registry_db.errors import Finding, InvalidInput
from registry_db.sources.counters.common import label, number, problem, read_input

Labels = tuple[tuple[str, str], ...]
#: A series: the counter's name (as the engine spells it) and its labels (sorted pairs).
Series = tuple[str, Labels]

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


def parse_scrape(location: str, counters: Iterable[str], what: str,
                 text: str | None = None) -> Scrape:
    """Read and parse the scrape at ``location`` (``text``: its text, already read), keeping
    the samples of ``counters``.

    ``what`` names the endpoint in messages (``vLLM's /metrics``). Raises
    :class:`InvalidInput` for text that is not Prometheus format, a series written twice, a
    value that is not a whole, finite, non-negative count, or a counter declared as a gauge.
    """
    from prometheus_client.parser import text_string_to_metric_families

    file = label(location)
    if text is None:
        text = read_input(location)
    wanted = {_base(c): c for c in counters}
    lines: dict[Series, int] = {}
    counter_lines: dict[str, int] = {}
    type_lines: dict[str, int] = {}
    for at, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE" and _base(parts[2]) in wanted:
                type_lines.setdefault(wanted[_base(parts[2])], at)
            continue
        head = line.split("{", 1)[0].split()
        counter = wanted.get(_base(head[0])) if head else None
        if counter is None:
            continue
        counter_lines.setdefault(counter, at)
        try:  # only the counters' own lines, each once: the index stays linear in the text
            for family in text_string_to_metric_families(line + "\n"):
                for sample in family.samples:
                    lines.setdefault((counter, tuple(sorted(sample.labels.items()))), at)
        except ValueError:
            pass  # the whole-text parse below reports it
    for counter, at in type_lines.items():
        counter_lines.setdefault(counter, at)

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


def prometheus_line(text: str, name: str) -> int:
    """When ``text`` is Prometheus text rather than JSON, the line that writes ``name`` (else its
    first line); 0 when it is JSON or neither (the JSON reader then says why)."""
    first = next((line.strip().lstrip("\ufeff") for line in text.splitlines(keepends=False)
                  if line.strip()), "")
    if not first or first[0] in "[{" or not (first.startswith("#") or _METRIC_RE.match(first)):
        return 0
    return next((n for n, line in enumerate(text.splitlines(), start=1)
                 if _base(line.split("{", 1)[0].split(" ", 1)[0]) == _base(name)), 1)
