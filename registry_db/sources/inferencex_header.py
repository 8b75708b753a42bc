"""The comment header of an InferenceX golden AL file, read by a table of line forms.

Each row of :data:`FORMS` is one form of line that InferenceX's collectors (or the people who
edited their output) write: its pattern and the fields its groups fill, and, for a line holding
a list (``name: value | ...``, ``(B300, vLLM MTP, draft: X)``, a JSON block), the reader of that
list with its own table (:data:`ITEMS`, :data:`KEYS`). A row may continue over the lines after
it (a sentence wrapped in two, a JSON block). The first row that matches a line reads it; a new
form is one row. A line no row reads is a warning at ``FILE:LINE``, never a guess, except in a
curve that says it was copied, whose unread lines are the reasoning that becomes its rationale.

:data:`docs/inferencex.md` lists each row with the real file and commit it was read from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from registry_db.model import Counts
from registry_db.sources.inferencex_facts import BadValue, Fact, Facts, Origin, read_value

#: The engines a "Measured on" item names before the method (``vLLM EAGLE3``).
_ENGINES = "vLLM|SGLang|TRT-LLM|TensorRT-LLM|ATOM"
_BENCH = r"[A-Z][\w-]*(?: [A-Z][\w-]*)*"   # capitalised words: SPEED-Bench Qualitative
_CAT = r"[a-z0-9_-]+"
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


def read_header(text: str, file: str) -> Header:
    """Read the header of one file's ``text`` (without a BOM); ``file`` names the findings."""
    reader = _Reader(Header(Facts(file)))
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
    def __init__(self, header: Header):
        self.header = header
        self.facts = header.facts

    def origin(self, span: Span, offset: int) -> Origin:
        line, column = span.at(offset)
        return Origin(self.facts.file, line, column, f"line {line}")

    def line(self, lines: list[Line], at: int) -> int:
        """Read the line at ``at`` (and any it continues on); returns how many it took."""
        for form in FORMS:
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

    def fill(self, name: str, raw: str, span: Span, offset: int, mode: str | None,
             k: int | None = None) -> None:
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
        self.facts.add(Fact(name, value, origin, scope or mode, k))

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


def _items(sep: str) -> ListReader:
    """Each part read by the first of :data:`ITEMS` that matches it whole."""
    def read(r: _Reader, m: re.Match[str], group: str, span: Span, base: int) -> bool:
        text, offset, mode = _where(m, group, base)
        for part, at in _parts(text, sep):
            for item in ITEMS:
                if found := item.pattern.fullmatch(part):
                    r.read(item, found, span, offset + at, mode)
                    break
            else:
                r.warn_item(span, offset + at, part)
        return True
    return read


def _pairs(sep: str, keys: Mapping[str, str], other: str | None = None) -> ListReader:
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


def _name_value(r: _Reader, m: re.Match[str], group: str, span: Span, base: int) -> bool:
    """One ``name=value`` item, its name looked up in :data:`KEYS`."""
    name = KEYS.get(m["name"])
    if name is None:
        r.warn_item(span, base + m.start(), m.group())
    else:
        r.fill(name, m["value"], span, base + m.start("value"), m.groupdict().get("mode"))
    return True


#: ``name=value``, ``name: value`` or ``name value`` (the thinking lines use all three).
_TOKEN_RE = re.compile(r"\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:[=:]\s*|\s+)(?P<value>[^\s|,]+)")
_KWARGS_RE = re.compile(r"chat_template_kwargs\s*[:=]\s*(?P<json>\{.*\})")


def _mode_pairs(r: _Reader, m: re.Match[str], group: str, span: Span, base: int) -> bool:
    """A thinking line's sampling and settings, as the collectors write them."""
    text, offset, mode = _where(m, group, base)
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
        name = KEYS.get(token["name"])
        if name is None:
            r.warn_item(span, offset + token.start("name"), token.group())
        else:
            r.fill(name, token["value"], span, offset + token.start("value"), mode)
        at = token.end()
    return True


def _json_block(r: _Reader, m: re.Match[str], group: str, span: Span, base: int) -> bool:
    """A JSON object of the collector's inputs, each key by :data:`KEYS`."""
    text, offset, mode = _where(m, group, base)
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    if not isinstance(doc, dict):
        return False
    for key, value in doc.items():
        raw = value if isinstance(value, str) else json.dumps(value)
        at = offset + max(text.find(json.dumps(key)), 0)
        name = KEYS.get(key)
        if name == "speculative_config" and _spec_config(r, raw, span, at, mode):
            continue
        if name is None or name == "speculative_config":
            r.warn_item(span, at, f"{key}: {raw}")
        else:
            r.fill(name, raw, span, at, mode)
    return True


def _spec_config(r: _Reader, raw: str, span: Span, offset: int, mode: str | None) -> bool:
    """A speculative config as JSON: its names by :data:`SPECULATIVE`, others as settings."""
    try:
        config = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(config, dict):
        return False
    for key, value in config.items():
        text = value if isinstance(value, str) else json.dumps(value)
        r.fill(SPECULATIVE.get(key, f"settings.{key}"), text, span, offset, mode)
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


def _counters(r: _Reader, m: re.Match[str], group: str, span: Span, base: int) -> bool:
    """``thinking_on k=3: AR=...; accepted=...; proposed=...; drafts=...``: one cell's counts."""
    text, offset, mode = _where(m, group, base)
    counts, problems = read_counters(text)
    for at, what in problems:
        r.facts.warn(r.origin(span, offset + at), "bad_counts", f"{what}; left out")
    if counts is not None:
        r.facts.add(Fact("counts", counts, r.origin(span, offset), mode, int(m["k"])))
    return True


# --- the tables ----------------------------------------------------------------------------------

#: The names the headers give fields, in ``name: value`` lists, ``name=value`` items and the
#: JSON block (``@on``: that thinking mode only). A name not here is a warning at its line.
KEYS: dict[str, str] = {
    "dataset": "category", "CATEGORY": "category",
    "temperature": "sampling.temperature", "temp": "sampling.temperature",
    "top_p": "sampling.top_p", "top_k": "sampling.top_k", "output_len": "sampling.max_tokens",
    "max_tokens": "sampling.max_tokens", "SPEEDBENCH_OUTPUT_LEN": "sampling.max_tokens",
    "image": "engine_image", "IMAGE": "engine_image", "TP": "tp", "method": "method",
    "Draft model": "draft_model",
    # the served model's own name and revision: the profile's model is the catalog's
    "model": "settings.target_model", "MODEL": "settings.target_model",
    "MODEL_REVISION": "settings.target_revision", "PRECISION": "settings.precision",
    "chat_template_kwargs": "settings.chat_template_kwargs",
    "CHAT_TEMPLATE_KWARGS_ON": "settings.chat_template_kwargs@on",
    "CHAT_TEMPLATE_KWARGS_OFF": "settings.chat_template_kwargs@off",
    "SPEEDBENCH_SPECULATIVE_CONFIG": "speculative_config",
    "SPEEDBENCH_SEED": "settings.seed", "SPEEDBENCH_CONCURRENCY": "settings.concurrency",
    "SPEEDBENCH_PREPARE_REVISION": "settings.speedbench_prepare_revision",
    "Prepared dataset SHA256": "settings.prepared_dataset_sha256",
    "target weights": "settings.target_weights", "target KV cache": "settings.target_kv_cache",
    "MTP_LIST": "ks", "THINKING_MODES": "modes",
    **{name: f"settings.{name}" for name in (
        "presence_penalty", "frequency_penalty", "repetition_penalty", "min_p", "seed",
        "concurrency", "context", "draft_sample_method", "rejection_sample_method",
        "enable_adaptive_verification", "engram cpu_offload", "draft_snapshot")},
}
#: A speculative config's names; any other is a setting under its own name (vLLM's keys).
SPECULATIVE = {"method": "method", "model": "draft_model", "revision": "settings.draft_revision"}


def _form(name: str, pattern: str, fills: Mapping[str, str] | None = None,
          rest: tuple[str, ListReader] | None = None, starts: str | None = None) -> Form:
    return Form(name, re.compile(pattern), fills or {}, rest,
                re.compile(starts) if starts else None)


#: What an item of a list holds (``Measured on m (B300, TP4, vLLM MTP, draft: X)``,
#: ``Image: IMAGE; H200; TP=1; ...``): each matches the item whole.
ITEMS: tuple[Form, ...] = (
    _form("chip", r"(?P<hardware>[A-Z]{1,3}[0-9]{2,4}[A-Z]?)", {"hardware": "hardware"}),
    _form("tp", r"TP\s*=?\s*(?P<tp>[0-9]+)", {"tp": "tp"}),
    _form("engine release and method", rf"(?P<engine_image>(?:{_ENGINES}) [0-9]\S*)"
          r"(?: native)? (?P<method>[A-Za-z]\S*)",
          {"engine_image": "engine_image", "method": "method"}),
    _form("engine and method", rf"(?:{_ENGINES})(?: native)? (?P<method>[A-Za-z]\S*)",
          {"method": "method"}),
    _form("draft", r"draft: (?P<draft_model>\S+)", {"draft_model": "draft_model"}),
    _form("prompts", r"all (?P<prompts>[0-9]+) requests succeeded(?: in every cell)?",
          {"prompts": "prompts"}),
    _form("output length", r"maximum output length (?P<max_tokens>[0-9]+)",
          {"max_tokens": "sampling.max_tokens"}),
    _form("run of a mode", r"thinking_(?P<mode>on|off) (?P<run>\S+)", {"run": "run"}),
    _form("name=value", r"(?P<name>[A-Za-z_]+)=(?P<value>\S+)",
          rest=("name", _name_value)),
)

#: Every line form, first match wins. The real line each was read from: docs/inferencex.md.
FORMS: tuple[Form, ...] = (
    _form("run", r"Source (?:GitHub Actions )?run:\s*(?P<run>\S+)$", {"run": "run"}),
    _form("run per mode", r"Source GitHub Actions runs:\s*(?P<runs>.+)$",
          rest=("runs", _items(";"))),
    _form("evidence", r"Source evidence:\s*(?P<run>\S+)$", {"run": "run"}),
    _form("lengths refused", r"(?P<caveat>Draft lengths? [0-9][0-9 ,-]* (?:rejected|refused) .+)$",
          {"caveat": "caveat"}),
    _form("benchmark", r"Acceptance Length \(AL\)(?: reference values)? measured with "
          rf"(?P<benchmark>{_BENCH})(?: (?P<category>{_CAT}))?\.$",
          {"benchmark": "benchmark", "category": "category"}),
    _form("benchmark and cells", rf"(?P<benchmark>{_BENCH}) (?P<category>{_CAT}); "
          r"(?P<items>.+?)\.?$", {"benchmark": "benchmark", "category": "category"},
          rest=("items", _items(";"))),
    _form("workload", rf"(?P<category>{_CAT}), (?P<prompts>[0-9]+) successful requests, "
          r"(?P<max_tokens>[0-9]+) maximum output tokens\.$",
          {"category": "category", "prompts": "prompts", "max_tokens": "sampling.max_tokens"}),
    _form("counts", r"thinking_(?P<mode>on|off) k=(?P<k>[0-9]+): (?P<counts>.+)$",
          rest=("counts", _counters)),
    _form("thinking mode", r"thinking_(?P<mode>on|off)(?![A-Za-z0-9_])\s*:?\s*(?P<pairs>.*?)\.?$",
          rest=("pairs", _mode_pairs)),
    _form("speculative-config", r"speculative-config\s*:\s*(?P<pairs>.*)$",
          rest=("pairs", _pairs(r"\|", SPECULATIVE, other="settings."))),
    _form("measured on", r"Measured on (?P<model>\S+) \((?P<items>[^)]*)\)"
          r"(?:,? per num_speculative_tokens)?\.?$", {"model": "model"},
          rest=("items", _items("[,;]")), starts=r"Measured on "),
    _form("key", r"key = num_speculative_tokens(?: \((?P<method>\S+) level\))?"
          r"(?:; value = golden AL|; AL includes the target verification token\.)$",
          {"method": "method"}),
    _form("image", r"(?:[Ee]ngine[_ ]image|[Ii]mage)\s*:\s*(?P<engine_image>[^\s;|]+)"
          r"(?:;\s*(?P<items>.+?))?\.?$", {"engine_image": "engine_image"},
          rest=("items", _items(";"))),
    _form("target", r"Target: (?P<target>\S+) @ (?P<revision>[^\s;]+)(?:; (?P<pairs>.+?))?\.?$",
          {"target": "settings.target_model", "revision": "settings.target_revision"},
          rest=("pairs", _pairs(";", KEYS))),
    _form("MTP head", r"Native (?P<method>MTP) head: (?P<draft>\S+) @ (?P<revision>[^\s;]+)"
          r"(?:; (?P<weights>.+?))?\.?$",
          {"method": "method", "draft": "draft_model", "revision": "settings.draft_revision",
           "weights": "settings.draft_weights"}),
    _form("JSON block", r"(?P<json>\{.*\})$", rest=("json", _json_block), starts=r"\{$"),
    # Read, and nothing to record: SGLang's counters without the drafted tokens (counts need
    # them), where the curve was collected by, what the format's comments mean.
    _form("AL formula", r"AL = 1 \+ sum\(.+\) / sum\(.+\)$"),
    _form("AL arithmetic", r"= 1 \+ [0-9]+ / [0-9]+ = [0-9.]+ -> [0-9.]+$"),
    _form("collector", r"(?:Auto-generated by|Collector:) \S+.*$"),
    _form("format notes", r"(?:AL includes the bonus token|Counter comments retain) .+$"),
    _form("inherited", r"Inherited value provenance \(.+\):$"),
    _form("name: value list", r"(?P<pairs>[^:|]+:\s*\S.*)$", rest=("pairs", _pairs(r"\|", KEYS))),
)
