"""The comment header of an InferenceX golden AL file, read line by line into named facts.

The header is the block of ``#`` lines before the YAML body. Each line is matched against the
forms InferenceX's collectors write (``Source GitHub Actions run:``, ``dataset: ... | ...``,
``thinking_on: ...``, ``speculative-config: ...``, ``Measured on MODEL (CHIP, vLLM METHOD, ...)``
and the rest, listed in :data:`_LINES`); what a line states becomes a field of :class:`Header`
with the position it came from. A line that matches no form, or a part of a line that is not
understood, is a warning at ``FILE:LINE``: the reader never guesses what it might mean. A value
that is understood but impossible (a ``top_p`` of 1.5) is an error at its line.

Nothing here decides what a profile looks like; :mod:`registry_db.sources.inferencex` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from registry_db.errors import Finding

#: A number as the collectors write it (no YAML or Python extras such as ``1_0`` or ``inf``).
_NUMBER_RE = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_INT_RE = re.compile(r"[-+]?[0-9]+")
#: ``name=value``, ``name: value`` or ``name value`` (the per-mode sampling lines use all three).
_PAIR_RE = re.compile(r"\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:[=:]\s*|\s+)(?P<value>[^\s|,]+)")
_KWARGS_RE = re.compile(r"chat_template_kwargs\s*[:=]\s*(?P<json>\{.*\})")
#: The engines a "Measured on" line may name before the method (``vLLM EAGLE3``).
_ENGINES = ("vLLM", "SGLang", "TRT-LLM", "TensorRT-LLM", "ATOM")
_ENGINE_RE = re.compile(rf"(?:{'|'.join(re.escape(e) for e in _ENGINES)})\s+(?P<method>\S+)")
_COPIED_RE = re.compile(r"\b(?:copied|provisional)(?:\b|_)", re.I)
#: ``copied from GLM-5.2`` / ``copied from the glm-5.2-fp8 curve`` / ``copied_from: glm-5.2``.
_COPIED_FROM_RE = re.compile(
    r"\bcopied(?:\s+from|_from\s*:)\s+(?:the\s+)?"
    r"(?P<model>[A-Za-z0-9][A-Za-z0-9._-]*?[A-Za-z0-9])"  # no '/': copied_from's separator
    r"(?='s\b|[\s,;:)(]|\.(?:\s|$)|$)", re.I)

#: Sampling keys of the spec, by the names the headers use for them.
SAMPLING_NAMES = {"temperature": "temperature", "temp": "temperature", "top_p": "top_p",
                  "top_k": "top_k", "output_len": "max_tokens", "max_tokens": "max_tokens"}
#: Other decoding knobs the headers state; they go to ``provenance.settings`` as numbers.
SETTING_NAMES = ("presence_penalty", "frequency_penalty", "repetition_penalty", "min_p")

Where = tuple[int, int]


@dataclass
class ModeLine:
    """What a ``thinking_on`` / ``thinking_off`` line states for its mode."""

    line: int
    sampling: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class Header:
    """The facts a header states, each with the (line, column) it came from."""

    run: str | None = None
    benchmark: str | None = None
    category: tuple[str, Where] | None = None
    sampling: dict[str, Any] = field(default_factory=dict)   # shared by both modes
    settings: dict[str, Any] = field(default_factory=dict)   # shared by both modes
    modes: dict[str, ModeLine] = field(default_factory=dict)
    spec_settings: dict[str, str] = field(default_factory=dict)
    spec_method: tuple[str, Where] | None = None      # speculative-config's method=
    measured_model: tuple[str, Where] | None = None
    hardware: str | None = None
    tp: int | None = None
    method: tuple[str, Where] | None = None           # "Measured on (..., vLLM METHOD)"
    key_method: tuple[str, Where] | None = None       # "key = num_speculative_tokens (X level)"
    draft_model: str | None = None
    engine_image: str | None = None
    copied_lines: list[tuple[int, str]] = field(default_factory=list)
    copied_from: tuple[str, Where] | None = None


def header_lines(text: str) -> list[tuple[int, int, str]]:
    """The leading comment block as (1-based line, 1-based column of the text, the text after
    ``#``); blank lines and bare ``#`` lines are skipped."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        body = stripped[1:].strip()
        if body:
            out.append((number, raw.index(body) + 1, body))
    return out


def read_header(text: str, file: str) -> tuple[Header, list[Finding]]:
    """Read the header of one file's ``text``; ``file`` is the name findings carry."""
    reader = _Reader(file)
    for number, column, body in header_lines(text):
        reader.column = column
        reader.line(number, body)
    return reader.header, reader.findings


class _Reader:
    def __init__(self, file: str):
        self.file = file
        self.header = Header()
        self.findings: list[Finding] = []
        self.column = 1  # the column of the current line's text, after "# "

    def col(self, index: int) -> int:
        """The 1-based column of ``index`` in the current line's text."""
        return self.column + index

    def warn(self, line: int, code: str, message: str, column: int = 1) -> None:
        self.findings.append(Finding(self.file, line, column, "header", code, message,
                                     severity="warning"))

    def error(self, line: int, code: str, message: str, column: int = 1) -> None:
        self.findings.append(Finding(self.file, line, column, "header", code, message))

    def line(self, number: int, body: str) -> None:
        for pattern, handler in _LINES:
            m = pattern.match(body)
            if m:
                handler(self, number, m)
                return
        if _COPIED_RE.search(body):
            self._copied(number, body)
            return
        self.warn(number, "unknown_header_line",
                  f"header line not understood and left out: {body!r}")

    # --- one handler per line form ---------------------------------------------------------

    def _run(self, number: int, m: re.Match) -> None:
        self.header.run = m["url"]

    def _benchmark(self, number: int, m: re.Match) -> None:
        self.header.benchmark = m["benchmark"].strip()

    def _ignored(self, number: int, m: re.Match) -> None:
        """A line understood but carrying nothing the profile records (``Auto-generated by``)."""

    def _dataset(self, number: int, m: re.Match) -> None:
        for part, column in self._split(m.string, "|"):
            name, sep, value = part.partition(":")
            name, value = name.strip(), value.strip()
            if not sep or not value:
                self.warn(number, "unknown_header_item",
                          f"{part.strip()!r} is not 'name: value'; left out", column)
            elif name == "dataset":
                self.header.category = (value, (number, column))
            else:
                self._knob(number, column, name, value, self.header.sampling,
                           self.header.settings)

    def _mode(self, number: int, m: re.Match) -> None:
        mode = m["mode"]
        line = self.header.modes.setdefault(mode, ModeLine(number))
        rest = m["rest"]
        offset = m.start("rest")
        kwargs = _KWARGS_RE.search(rest)
        if kwargs:
            try:
                json.loads(kwargs["json"])
            except ValueError:
                self.warn(number, "unknown_header_item",
                          f"chat_template_kwargs {kwargs['json']!r} is not JSON; left out",
                          self.col(offset + kwargs.start("json")))
            else:
                line.settings["chat_template_kwargs"] = kwargs["json"]
            # blanked, not cut, so that the columns of what follows stay true
            blank = " " * (kwargs.end() - kwargs.start())
            rest = rest[:kwargs.start()] + blank + rest[kwargs.end():]
        rest = rest.replace("|", " ").replace(",", " ")
        at = 0
        while rest[at:].strip():
            pair = _PAIR_RE.match(rest, at)
            if pair is None:
                self.warn(number, "unknown_header_item",
                          f"{rest[at:].strip()!r} on the thinking_{mode} line is not understood; "
                          "left out", self.col(offset + at))
                break
            self._knob(number, self.col(offset + pair.start("name")), pair["name"], pair["value"],
                       line.sampling, line.settings)
            at = pair.end()

    def _speculative(self, number: int, m: re.Match) -> None:
        for part, column in self._split(m.string, "|", start=m.start("rest")):
            name, sep, value = part.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or not name or not value:
                self.warn(number, "unknown_header_item",
                          f"{part.strip()!r} is not 'name=value'; left out", column)
            elif name == "method":
                self.header.spec_method = (value.lower(), (number, column))
            else:
                self.header.spec_settings[name] = value

    def _measured(self, number: int, m: re.Match) -> None:
        self.header.measured_model = (m["model"], (number, self.col(m.start("model"))))
        items = self._split(m.string, ",", start=m.start("inner"), end=m.end("inner"))
        for i, (item, column) in enumerate(items):
            item = item.strip()
            engine = _ENGINE_RE.fullmatch(item)
            if i == 0 and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", item) and not engine:
                self.header.hardware = item.lower()
            elif re.fullmatch(r"TP\s*[0-9]+", item, re.I):
                self.header.tp = int(item[2:].strip())
            elif engine:
                self.header.method = (engine["method"].lower(), (number, column))
            elif item.startswith("draft:") and item[6:].strip():
                self.header.draft_model = item[6:].strip()
            else:
                self.warn(number, "unknown_header_item",
                          f"{item!r} in the 'Measured on' line is not understood; left out",
                          column)

    def _key(self, number: int, m: re.Match) -> None:
        if m["method"]:
            self.header.key_method = (m["method"].lower(), (number, self.col(m.start("method"))))

    def _image(self, number: int, m: re.Match) -> None:
        self.header.engine_image = m["image"]

    def _copied(self, number: int, body: str) -> None:
        self.header.copied_lines.append((number, body))
        source = _COPIED_FROM_RE.search(body)
        if source and self.header.copied_from is None:
            self.header.copied_from = (source["model"], (number, self.col(source.start("model"))))

    def _split(self, text: str, sep: str, start: int = 0, end: int | None = None
               ) -> list[tuple[str, int]]:
        """``text[start:end]`` split on ``sep``, each part with its 1-based column in the line."""
        end = len(text) if end is None else end
        out, at = [], start
        for part in text[start:end].split(sep):
            lead = len(part) - len(part.lstrip())
            out.append((part, self.col(at + lead)))
            at += len(part) + len(sep)
        return out

    # --- values ------------------------------------------------------------------------------

    def _knob(self, number: int, column: int, name: str, value: str,
              sampling: dict[str, Any], settings: dict[str, Any]) -> None:
        """One ``name value`` pair: a sampling key, a known setting, or a warning."""
        key = SAMPLING_NAMES.get(name)
        if key is None and name not in SETTING_NAMES:
            self.warn(number, "unknown_header_item",
                      f"{name!r} is not a sampling parameter the reader knows; left out", column)
            return
        integer = key in ("top_k", "max_tokens")
        if not (_INT_RE if integer else _NUMBER_RE).fullmatch(value):
            want = "an integer" if integer else "a number"
            self.warn(number, "unknown_header_item",
                      f"{name} {value!r} is not {want}; left out", column)
            return
        number_value: int | float = int(value) if integer else float(value)
        problem = _out_of_range(key, number_value)
        if problem:  # kept all the same, so that no "missing temperature" follows
            self.error(number, "bad_sampling", f"{name} is {value}; {problem}", column)
        if key is None:
            settings[name] = number_value
        else:
            sampling[key] = number_value


def _out_of_range(key: str | None, value: float) -> str | None:
    """The spec's sampling limits, so that a bad header value is reported where it was written."""
    if key == "temperature" and value < 0:
        return "a temperature is not negative (0 is greedy)"
    if key == "top_p" and not 0 < value <= 1:
        return "top_p lies in (0, 1]"
    if key == "top_k" and value < -1:
        return "top_k is at least -1 (-1 and 0 disable it)"
    if key == "max_tokens" and value < 0:
        return "output_len is not negative"
    return None


_LINES: list[tuple[re.Pattern, Callable[[_Reader, int, re.Match], None]]] = [
    (re.compile(r"Source (?:GitHub Actions )?run:\s*(?P<url>\S+)\s*$"), _Reader._run),
    (re.compile(r"Acceptance Length \(AL\) reference values measured with "
                r"(?P<benchmark>.+?)\.?\s*$"), _Reader._benchmark),
    (re.compile(r"dataset\s*:"), _Reader._dataset),
    (re.compile(r"thinking_(?P<mode>on|off)(?![A-Za-z0-9_])\s*:?\s*(?P<rest>.*)$"),
     _Reader._mode),
    (re.compile(r"speculative-config\s*:\s*(?P<rest>.*)$"), _Reader._speculative),
    (re.compile(r"Measured on (?P<model>\S+) \((?P<inner>[^)]*)\)"
                r"(?:,? per num_speculative_tokens)?\.?\s*$"), _Reader._measured),
    (re.compile(r"key = num_speculative_tokens(?: \((?P<method>\S+) level\))?; "
                r"value = golden AL\s*$"), _Reader._key),
    (re.compile(r"(?:engine[_ ]image|image)\s*:\s*(?P<image>\S+)\s*$", re.I), _Reader._image),
    (re.compile(r"Auto-generated by \S+"), _Reader._ignored),
]
