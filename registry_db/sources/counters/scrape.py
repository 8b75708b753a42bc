"""Prometheus scrapes for the counter sources: parsed once, indexed by line, and compared.

A scrape is parsed by ``prometheus_client``'s text parser (OpenMetrics too, whose sample names
escape ``vllm:`` as ``vllm_``), and its lines are indexed once, so that every finding names its
line without scanning the text again. Between two scrapes, a vanished series, a restart and
swapped scrapes are told apart. A restart is seen from every signal a scrape carries: a
counter's ``_created`` sample (the time ``prometheus_client`` made the series), the process's
``process_start_time_seconds``, and a counter that went down; an exporter that writes none of
the first two (ATOM's own registry, prometheus_client's multiprocess mode) is left with the last.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from registry_db.errors import Finding, InvalidInput
from registry_db.sources.counters.common import label, number, problem, read_input

Labels = tuple[tuple[str, str], ...]
#: A series: the counter's name (as the engine spells it) and its labels (sorted pairs).
Series = tuple[str, Labels]

#: A Prometheus sample line's start: a metric name, then labels or a value.
_METRIC_RE = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*(\{.*\})?[ \t]+([-+0-9.eE]+|[+-]?Inf|NaN)\b")
#: The process collector's start time (seconds since the epoch), a restart signal.
START_TIME = "process_start_time_seconds"
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
    #: Each series' ``_created`` sample (when the exporter writes it) and its line.
    created: dict[Series, tuple[float, int]] = field(default_factory=dict)
    #: ``process_start_time_seconds`` by its labels, with its line.
    started: dict[Labels, tuple[float, int]] = field(default_factory=dict)
    #: The unlabelled gauges the reader asked for (``levels``), with their lines.
    levels: dict[str, tuple[float, int]] = field(default_factory=dict)

    def line_of(self, counter: str, labels: Labels | None = None) -> int:
        """The line that writes the series (else the counter's first line; 0 if none)."""
        if labels is not None and (counter, labels) in self.lines:
            return self.lines[(counter, labels)]
        return self.counter_lines.get(counter, 0)

    def pick(self, keep: Callable[[Labels], bool]) -> Scrape:
        """The same scrape with only the series whose labels ``keep`` accepts."""
        return Scrape(self.file, {s: v for s, v in self.series.items() if keep(s[1])},
                      self.lines, self.counter_lines,
                      {s: v for s, v in self.created.items() if keep(s[1])}, self.started,
                      self.levels)


def parse_scrape(location: str, counters: Iterable[str], what: str,
                 text: str | None = None, levels: Iterable[str] = ()) -> Scrape:
    """Read and parse the scrape at ``location`` (``text``: its text, already read), keeping
    the samples of ``counters``, the restart signals, and the gauges named in ``levels``.

    ``what`` names the endpoint in messages (``vLLM's /metrics``). Raises
    :class:`InvalidInput` for text that is not Prometheus format, a series written twice, a
    value that is not a whole, finite, non-negative count, or a counter declared as a gauge.
    """
    from prometheus_client.parser import text_string_to_metric_families

    file = label(location)
    if text is None:
        text = read_input(location)
    wanted = {_base(c): c for c in counters}
    gauges = {_base(g): g for g in levels}
    lines: dict[Series, int] = {}
    counter_lines: dict[str, int] = {}
    type_lines: dict[str, int] = {}
    extra_lines: dict[str, list[int]] = {}  # _created and start-time samples, in order
    for at, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE" and _base(parts[2]) in wanted:
                type_lines.setdefault(wanted[_base(parts[2])], at)
            continue
        head = line.split("{", 1)[0].split()
        counter = wanted.get(_base(head[0])) if head else None
        if counter is None:
            if head and (head[0] == START_TIME or _base(head[0]) in gauges
                         or _created_of(head[0], wanted)):
                extra_lines.setdefault(head[0], []).append(at)
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
    created: dict[Series, tuple[float, int]] = {}
    started: dict[Labels, tuple[float, int]] = {}
    found_levels: dict[str, tuple[float, int]] = {}
    seen: dict[str, int] = {}

    def line_of_extra(name: str) -> int:
        at = seen.get(name, 0)
        seen[name] = at + 1
        found = extra_lines.get(name, [])
        return found[at] if at < len(found) else 0

    try:
        for family in text_string_to_metric_families(text):
            if family.type not in ("unknown", "untyped"):
                declared.setdefault(_base(family.name), family.type)
            for sample in family.samples:
                counter = wanted.get(_base(sample.name))
                if counter is None:
                    labels = tuple(sorted(sample.labels.items()))
                    of = _created_of(sample.name, wanted)
                    if of is not None:
                        created[(of, labels)] = (float(sample.value),
                                                 line_of_extra(sample.name))
                    elif sample.name == START_TIME:
                        started[labels] = (float(sample.value), line_of_extra(sample.name))
                    elif _base(sample.name) in gauges and not labels:
                        found_levels[gauges[_base(sample.name)]] = (
                            float(sample.value), line_of_extra(sample.name))
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
    declared_gauges = [problem(file, type_lines.get(c, counter_lines.get(c, 0)), c, "not_a_counter",
                      f"{c} is declared a {declared[_base(c)]} (# TYPE); a {declared[_base(c)]}"
                      " is a level, not a count, and a delta of it counts nothing; scrape "
                      f"{what}, whose {c}_total is a counter")
              for c in wanted.values() if declared.get(_base(c)) in NOT_COUNTS]
    if declared_gauges:
        raise InvalidInput(declared_gauges)
    return Scrape(file, series, lines, counter_lines, created, started, found_levels)


def _created_of(name: str, wanted: dict[str, str]) -> str | None:
    """The counter whose ``_created`` sample ``name`` is (either format's spelling), else None."""
    if not name.endswith("_created"):
        return None
    return wanted.get(_base(name[:-len("_created")]))


def when(seconds: float) -> str:
    """A Unix time as the scrape writes it and in UTC: ``1796451477.54 (2026-12-05 08:17:57
    UTC)``."""
    from datetime import UTC, datetime

    try:
        shown_at = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return repr(seconds)
    return f"{seconds!r} ({shown_at})"


def restarts(after: Scrape, before: Scrape) -> list[Finding]:
    """A finding for each restart signal that differs between BEFORE and AFTER: the process's
    start time, and (the first series of each counter whose) ``_created`` time changed. Both
    times are named: counts across a restart mix two server runs."""
    found: list[Finding] = []
    hint = ("counts across a restart mix two server runs; take both scrapes from one server "
            "run (scrape BEFORE again after the restart)")
    for labels, (then, then_at) in sorted(before.started.items()):
        now = after.started.get(labels)
        if now is not None and now[0] != then:
            found.append(problem(
                after.file, now[1], START_TIME, "server_restarted",
                f"the server restarted between the scrapes: {START_TIME} is {when(then)} in "
                f"BEFORE ({before.file}:{then_at}) and {when(now[0])} in AFTER; {hint}"))
    reported: set[str] = set()
    for key, (then, then_at) in sorted(before.created.items()):
        now = after.created.get(key)
        if now is None or now[0] == then or key[0] in reported:
            continue
        reported.add(key[0])
        name, labels = key
        inner = ",".join(f'{n}="{v}"' for n, v in labels)
        series = f"{name}_created{{{inner}}}" if inner else f"{name}_created"
        found.append(problem(
            after.file, now[1], name, "server_restarted",
            f"the server restarted between the scrapes: {series} (when the counter was made) "
            f"is {when(then)} in BEFORE ({before.file}:{then_at}) and {when(now[0])} in AFTER; "
            f"{hint}"))
    return found


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
    found: list[Finding] = restarts(after, before)
    restarted = bool(found)
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
    if down and not grew and not restarted:
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
