"""How an InferenceX curve's comment header is read by a table of line forms.

The table itself is :data:`registry_db.sources.inferencex.forms.FORMS`; this module is what
reads by it: a :class:`Form` row (a pattern, the field each group fills, the reader of a group
holding a list), the lines a row may continue over (a sentence wrapped in two, a JSON block),
and the list readers the rows name. The first row that matches a line reads it. A line no row
reads is a warning at ``FILE:LINE``, never a guess, except in a curve that says it was copied,
whose unread lines are the reasoning that becomes its rationale.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from registry_db.model import Counts
from registry_db.sources.inferencex.facts import BadValue, Fact, Facts, Origin, read_value

_COPIED_RE = re.compile(r"\b(?:copied|provisional)(?:\b|_)", re.I)
#: ``copied from GLM-5.2`` / ``copied from the base curve`` / ``copied from glm5.2_mtp.yaml``.
_COPIED_FROM_RE = re.compile(
    r"\bcopied(?:\s+from|_from\s*:)\s+(?:the\s+)?"
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*?[A-Za-z0-9])"  # no '/': copied_from's separator
    r"(?='s\b|[\s,;:)(]|\.(?:\s|$)|$)", re.I)
#: How many lines a wrapped form (a sentence, a JSON block) may span.
MAX_LINES = 64


class Line(NamedTuple):
    """One header line: its 1-based number, the column its text starts at, the text."""

    number: int
    column: int
    text: str


class Span(NamedTuple):
    """One or more header lines read as one text (joined by a space)."""

    lines: tuple[Line, ...]

    @property
    def text(self) -> str:
        return " ".join(line.text for line in self.lines)

    def at(self, offset: int) -> tuple[int, int]:
        """The (line, column) of ``offset`` in :attr:`text`."""
        for line in self.lines:
            if offset <= len(line.text):
                return line.number, line.column + offset
            offset -= len(line.text) + 1
        last = self.lines[-1]
        return last.number, last.column + len(last.text)


#: Reads the list a row's group holds: ``(reader, match, group, span, base)``, ``base`` being
#: where the match's text starts in the span's; returns False when the line is not this form.
ListReader = Callable[["_Reader", "re.Match[str]", str, Span, int], bool]


class Form(NamedTuple):
    """One line form: its pattern, the field each group fills, and the reader of its list."""

    name: str
    pattern: re.Pattern[str]
    fills: Mapping[str, str] = {}
    #: ``(group, reader)``: the group that holds a list, and how its parts are read
    rest: tuple[str, ListReader] | None = None
    #: a line starting so that does not match alone is joined with the lines after it
    starts: re.Pattern[str] | None = None


@dataclass
class Header:
    """What a header states: the facts, and the lines that say the curve was copied."""

    facts: Facts
    #: lines that say the values were copied or are provisional
    copied: list[Line] = field(default_factory=list)
    #: what the first of them says the values were copied from: a model or a file name
    copy_source: tuple[str, Origin] | None = None
    #: lines no form reads, in order: a copy's reasoning, else each a warning
    prose: list[Line] = field(default_factory=list)

    @property
    def rationale(self) -> str | None:
        return " ".join(line.text for line in self.prose) if self.copied else None


def header_lines(text: str) -> list[Line]:
    """The leading comment block, without blank lines and bare ``#`` lines."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        body = stripped[1:].strip()
        if body:
            out.append(Line(number, raw.index(body) + 1, body))
    return out


def read_lines(text: str, file: str, forms: tuple[Form, ...]) -> Header:
    """Read the header of one file's ``text`` (without a BOM) by the table ``forms``; ``file``
    names the findings."""
    reader = _Reader(Header(Facts(file)), forms)
    lines = header_lines(text)
    at = 0
    while at < len(lines):
        at += reader.line(lines, at)
    header = reader.header
    if not header.copied:
        for line in header.prose:
            header.facts.warn(Origin(file, line.number, line.column, f"line {line.number}"),
                              "unknown_header_line",
                              f"header line not understood and left out: {line.text!r}")
    return header


class _Reader:
    def __init__(self, header: Header, forms: tuple[Form, ...]):
        self.header = header
        self.facts = header.facts
        self.forms = forms

    def origin(self, span: Span, offset: int) -> Origin:
        line, column = span.at(offset)
        return Origin(self.facts.file, line, column, f"line {line}")

    def line(self, lines: list[Line], at: int) -> int:
        """Read the line at ``at`` (and any it continues on); returns how many it took."""
        for form in self.forms:
            span = Span((lines[at],))
            m = form.pattern.match(span.text)
            if m is None and form.starts is not None and form.starts.match(span.text):
                for more in lines[at + 1:at + MAX_LINES]:
                    span = Span(span.lines + (more,))
                    if m := form.pattern.match(span.text):
                        break
            if m is not None:
                if self.read(form, m, span):
                    return len(span.lines)
                break
        self.unread(lines[at])
        return 1

    def read(self, form: Form, m: re.Match[str], span: Span, base: int = 0,
             mode: str | None = None) -> bool:
        """Fill the fields of ``form``'s groups; ``mode`` is the line's when an item is read."""
        mode = m.groupdict().get("mode") or mode
        if form.rest is not None:
            group, reader = form.rest
            if m[group] is not None and not reader(self, m, group, span, base):
                return False
        for group, name in form.fills.items():
            if m[group] is not None:
                self.fill(name, m[group], span, base + m.start(group), mode)
        return True

    def fill(self, name: str, raw: str, span: Span, offset: int, mode: str | None) -> None:
        name, _, scope = name.partition("@")
        origin = self.origin(span, offset)
        try:
            value = read_value(name, raw)
        except BadValue as exc:
            self.facts.unreadable.add(name)
            self.facts.error(origin, "bad_header_value",
                             f"{name.split('.')[-1]} {raw.strip()!r} cannot be read: {exc}; "
                             "fix the header")
            return
        self.facts.add(Fact(name, value, origin, scope or mode))

    def warn_item(self, span: Span, offset: int, text: str) -> None:
        self.facts.warn(self.origin(span, offset), "unknown_header_item",
                        f"{text.strip()!r} in this line is not understood; left out")

    def unread(self, line: Line) -> None:
        self.header.prose.append(line)
        if _COPIED_RE.search(line.text):
            self.header.copied.append(line)
            source = _COPIED_FROM_RE.search(line.text)
            if source and self.header.copy_source is None:
                self.header.copy_source = (source["name"], Origin(
                    self.facts.file, line.number, line.column + source.start("name"),
                    f"line {line.number}"))


# --- the readers of a line's list ----------------------------------------------------------------

def _parts(text: str, sep: str) -> list[tuple[str, int]]:
    """``text`` split on the pattern ``sep``, each part stripped, with its offset in ``text``."""
    out = []
    for m in re.finditer(rf"(?:(?!{sep}).)+", text):
        part = m.group()
        if part.strip():
            out.append((part.strip(), m.start() + len(part) - len(part.lstrip())))
    return out


def _where(m: re.Match[str], group: str, base: int) -> tuple[str, int, str | None]:
    return m[group], base + m.start(group), m.groupdict().get("mode")


def items(sep: str, table: tuple[Form, ...]) -> ListReader:
    """Each part read by the first form of ``table`` that matches it whole."""
    def read(r: _Reader, m: re.Match[str], group: str, span: Span, base: int) -> bool:
        text, offset, mode = _where(m, group, base)
        for part, at in _parts(text, sep):
            for item in table:
                if found := item.pattern.fullmatch(part):
                    r.read(item, found, span, offset + at, mode)
                    break
            else:
                r.warn_item(span, offset + at, part)
        return True
    return read


def pairs(sep: str, keys: Mapping[str, str], other: str | None = None) -> ListReader:
    """``name: value`` (or ``name=value``) parts, each name looked up in ``keys``; a name it
    lacks is a setting of that name when ``other`` says so (``"settings."``), else a warning.
    A first name it lacks means the line is not this form (it may be prose)."""
    def read(r: _Reader, m: re.Match[str], group: str, span: Span, base: int) -> bool:
        text, offset, mode = _where(m, group, base)
        for i, (part, at) in enumerate(_parts(text, sep)):
            pair = re.fullmatch(r"(?P<name>[^:=]+?)\s*[:=]\s*(?P<value>.+)", part)
            name = pair["name"] if pair else ""
            target = keys.get(name) or (f"{other}{name}" if other and pair else None)
            if pair is None or target is None:
                if i == 0:
                    return False
                r.warn_item(span, offset + at, part)
                continue
            r.fill(target, pair["value"], span, offset + at + pair.start("value"), mode)
        return True
    return read


def name_value(keys: Mapping[str, str]) -> ListReader:
    """One ``name=value`` item, its name looked up in ``keys``."""
    def read(r: _Reader, m: re.Match[str], group: str, span: Span, base: int) -> bool:
        name = keys.get(m["name"])
        if name is None:
            r.warn_item(span, base + m.start(), m.group())
        else:
            r.fill(name, m["value"], span, base + m.start("value"), m.groupdict().get("mode"))
        return True
    return read


#: ``name=value``, ``name: value`` or ``name value`` (the thinking lines use all three).
_TOKEN_RE = re.compile(r"\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:[=:]\s*|\s+)(?P<value>[^\s|,]+)")
_KWARGS_RE = re.compile(r"chat_template_kwargs\s*[:=]\s*(?P<json>\{.*\})")


def mode_pairs(keys: Mapping[str, str]) -> ListReader:
    """A thinking line's sampling and settings, as the collectors write them."""
    return lambda r, m, group, span, base: _mode_pairs(keys, r, *_where(m, group, base), span)


def _mode_pairs(keys: Mapping[str, str], r: _Reader, text: str, offset: int, mode: str | None,
                span: Span) -> bool:
    kwargs = _KWARGS_RE.search(text)
    if kwargs:
        r.fill("settings.chat_template_kwargs", kwargs["json"], span,
               offset + kwargs.start("json"), mode)
        # blanked, not cut, so that the columns of what follows stay true
        text = text[:kwargs.start()] + " " * (kwargs.end() - kwargs.start()) + text[kwargs.end():]
    text = text.replace("|", " ").replace(",", " ")
    at = 0
    while text[at:].strip():
        token = _TOKEN_RE.match(text, at)
        if token is None:
            rest = text[at:]
            r.warn_item(span, offset + at + len(rest) - len(rest.lstrip()), rest)
            break
        name = keys.get(token["name"])
        if name is None:
            r.warn_item(span, offset + token.start("name"), token.group())
        else:
            r.fill(name, token["value"], span, offset + token.start("value"), mode)
        at = token.end()
    return True


def json_block(keys: Mapping[str, str], speculative: Mapping[str, str]) -> ListReader:
    """A JSON object of the collector's inputs, each key by ``keys``; the one ``keys`` names
    ``speculative_config`` is a JSON object of its own, its names by ``speculative``."""
    return lambda r, m, group, span, base: _json_block(keys, speculative, r,
                                                       *_where(m, group, base), span)


def _json_block(keys: Mapping[str, str], speculative: Mapping[str, str], r: _Reader, text: str,
                offset: int, mode: str | None, span: Span) -> bool:
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    if not isinstance(doc, dict):
        return False
    for key, value in doc.items():
        raw = value if isinstance(value, str) else json.dumps(value)
        at = offset + max(text.find(json.dumps(key)), 0)
        name = keys.get(key)
        if name == "speculative_config" and _spec_config(speculative, r, raw, span, at, mode):
            continue
        if name is None or name == "speculative_config":
            r.warn_item(span, at, f"{key}: {raw}")
        else:
            r.fill(name, raw, span, at, mode)
    return True


def _spec_config(speculative: Mapping[str, str], r: _Reader, raw: str, span: Span, offset: int,
                 mode: str | None) -> bool:
    """A speculative config as JSON: its names by ``speculative``, others as settings."""
    try:
        config = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(config, dict):
        return False
    for key, value in config.items():
        text = value if isinstance(value, str) else json.dumps(value)
        r.fill(speculative.get(key, f"settings.{key}"), text, span, offset, mode)
    return True


#: Counter comments: InferenceX's names for the counts (contract, third round).
COUNTERS = {"accepted": "accepted_tokens", "proposed": "draft_tokens", "drafts": "drafts"}


def read_counters(text: str) -> tuple[Counts | None, list[tuple[int, str]]]:
    """``AR=0.50; accepted=126838; proposed=252426; drafts=84142``: the counts, and what was
    not understood (the offset in ``text`` and what). ``AR`` must be accepted / proposed."""
    got: dict[str, int] = {}
    ar: tuple[str, int] | None = None
    problems = []
    for part, at in _parts(text.rstrip("."), ";"):
        name, _, value = (s.strip() for s in part.partition("="))
        if name in COUNTERS and re.fullmatch(r"[0-9]+", value):
            got[COUNTERS[name]] = int(value)
        elif name == "AR" and re.fullmatch(r"[0-9]*\.?[0-9]+", value):
            ar = (value, at)
        else:
            problems.append((at, f"{part!r} is not a counter (accepted, proposed, drafts, AR)"))
    if len(got) != len(COUNTERS):
        if got:
            problems.append((0, "counts need all of accepted, proposed and drafts"))
        return None, problems
    counts = Counts(got["drafts"], got["draft_tokens"], got["accepted_tokens"])
    if ar is not None and counts.draft_tokens and not rounds_to(
            counts.accepted_tokens / counts.draft_tokens, ar[0]):
        problems.append((ar[1], f"AR={ar[0]} is not accepted / proposed = "
                                f"{counts.accepted_tokens / counts.draft_tokens:.6g}"))
    return counts, problems


def rounds_to(exact: float, written: str) -> bool:
    """Whether ``written`` (a number's text) is ``exact`` rounded to the decimals it shows."""
    decimals = len(written.partition(".")[2])
    return abs(float(written) - exact) <= 0.5 * 10 ** -decimals + 1e-12


def counters(r: _Reader, m: re.Match[str], group: str, span: Span, base: int) -> bool:
    """``thinking_on k=3: AR=...; accepted=...; proposed=...; drafts=...``: one cell's counts."""
    text, offset, mode = _where(m, group, base)
    counts, problems = read_counters(text)
    for at, what in problems:
        r.facts.warn(r.origin(span, offset + at), "bad_counts", f"{what}; left out")
    if counts is not None:
        r.facts.add(Fact("counts", counts, r.origin(span, offset), mode, int(m["k"])))
    return True
