"""What an InferenceX curve states, fact by fact, each with the line (or flag) it came from.

A :class:`Fact` fills one field of the spec's provenance (``run``, ``hardware``,
``sampling.top_p``, ``settings.NAME``, ...) or of the profile key (``category``, ``method``),
for both thinking modes or one. :class:`Facts` holds a file's: the same field stated twice with
two values is an error naming both lines; stated once per mode and once for both, the mode's own
wins. :data:`FIELDS` says how each field's text is read; a value it cannot read is reported at
its line and left out, never guessed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from registry_db.errors import Finding

#: A number as the collectors write it (no YAML or Python extras such as ``1_0`` or ``inf``).
_NUMBER_RE = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_INT_RE = re.compile(r"[-+]?[0-9]+")


class BadValue(ValueError):
    """A field's text that is not what the field holds; the message says why."""


def _text(raw: str) -> str:
    if not raw.strip():
        raise BadValue("it is empty")
    return raw.strip()


def _lower(raw: str) -> str:
    return _text(raw).lower()


def _int(raw: str) -> int:
    if not _INT_RE.fullmatch(raw.strip()):
        raise BadValue("it is not an integer")
    return int(raw)


def _number(raw: str) -> float:
    if not _NUMBER_RE.fullmatch(raw.strip()):
        raise BadValue("it is not a number")
    value = float(raw)
    if not math.isfinite(value):
        raise BadValue("it is not a finite number")
    return value


def _json(raw: str) -> str:
    """A JSON object, kept as the text the header wrote (``chat_template_kwargs``)."""
    try:
        value = json.loads(raw)
    except ValueError:
        raise BadValue("it is not JSON") from None
    if not isinstance(value, dict):
        raise BadValue("it is not a JSON object")
    return raw.strip()


def _scalar(raw: str) -> Any:
    """A setting: ``true``/``false``, an integer, a finite number, or the text as written."""
    text = _text(raw)
    if text in ("true", "false"):
        return text == "true"
    if _INT_RE.fullmatch(text):
        return int(text)
    if _NUMBER_RE.fullmatch(text):
        return _number(text)
    return text


def _ints(raw: str) -> tuple[int, ...]:
    return tuple(_int(part) for part in re.split(r"[\s,]+", _text(raw)))


def _modes(raw: str) -> tuple[str, ...]:
    modes = tuple(re.split(r"[\s,]+", _text(raw)))
    if not set(modes) <= {"on", "off"}:
        raise BadValue("thinking modes are 'on' and 'off'")
    return modes


#: How each field's text is read. ``settings.*`` fields are settings (``_scalar``) unless
#: listed; ``ks`` and ``modes`` are what a header says the body holds (checked, not stored).
FIELDS: dict[str, Callable[[str], Any]] = {
    "run": _text, "benchmark": _text, "hardware": _lower, "engine_image": _text, "tp": _int,
    "prompts": _int, "category": _text, "method": _lower, "model": _text, "draft_model": _text,
    "sampling.temperature": _number, "sampling.top_p": _number, "sampling.top_k": _int,
    "sampling.max_tokens": _int, "settings.chat_template_kwargs": _json, "caveat": _text,
    "ks": _ints, "modes": _modes,
}


def read_value(name: str, raw: str) -> Any:
    """``raw`` read as field ``name``; raises :class:`BadValue`."""
    reader = FIELDS.get(name) or (_scalar if name.startswith("settings.") else None)
    if reader is None:
        raise KeyError(name)
    return reader(raw)


def field_label(name: str) -> str:
    """How messages name a field: ``top_p``, ``setting seed``, ``hardware``."""
    if name.startswith("sampling."):
        return name.split(".", 1)[1]
    if name.startswith("settings."):
        return f"setting {name.split('.', 1)[1]!r}"
    return name


class Origin(NamedTuple):
    """Where a fact was stated: a header line, a flag, or an entry of the map file."""

    file: str
    line: int
    column: int
    #: ``line 5``, ``--hardware`` or ``files.x.yaml.hardware in map.yaml``: what messages name
    label: str


@dataclass(frozen=True)
class Fact:
    """One field's value, for one thinking mode (``on``/``off``) or both (None)."""

    name: str
    value: Any
    origin: Origin
    mode: str | None = None
    k: int | None = None  # only for counts, which are per cell

    @property
    def key(self) -> tuple[str, str | None, int | None]:
        return (self.name, self.mode, self.k)

    def same(self, other: Fact) -> bool:
        """Whether two statements of a field agree (JSON by meaning, not by spacing)."""
        if self.name == "settings.chat_template_kwargs":
            return bool(json.loads(self.value) == json.loads(other.value))
        return bool(self.value == other.value)


def shown(value: Any) -> str:
    """A value as messages quote it (counts as their mapping)."""
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value.to_json() if hasattr(value, "to_json") else value)


@dataclass
class Facts:
    """A file's facts by (field, mode, K), the problems met reading them, in file order."""

    file: str
    by_key: dict[tuple[str, str | None, int | None], Fact] = field(default_factory=dict)
    caveats: list[Fact] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    #: fields stated with a value that could not be read (already an error: not "missing")
    unreadable: set[str] = field(default_factory=set)
    #: every statement, the agreeing repeats too, in the order read
    said: list[Fact] = field(default_factory=list)

    def add(self, fact: Fact) -> None:
        """Record ``fact``; a second statement of its field with another value is an error."""
        self.said.append(fact)
        if fact.name == "caveat":
            self.caveats.append(fact)
            return
        first = self.by_key.get(fact.key)
        if first is None:
            self.by_key[fact.key] = fact
        elif not first.same(fact):
            scope = f" for thinking_{fact.mode}" if fact.mode else ""
            self.error(fact.origin, "conflicting_header",
                       f"{field_label(fact.name)}{scope} is {shown(fact.value)} here but "
                       f"{shown(first.value)} on {first.origin.label}; the header must state "
                       "one value: fix or remove one line")

    def get(self, name: str, mode: str | None = None) -> Fact | None:
        """The fact for ``mode`` (its own first, then the one for both modes), or None."""
        return (self.by_key.get((name, mode, None)) if mode else None) or \
            self.by_key.get((name, None, None))

    def stated(self, name: str) -> Fact | None:
        """The first statement of ``name`` for any mode (for "the header says X" messages)."""
        return next((f for f in self.by_key.values() if f.name == name and f.k is None), None)

    def prefixed(self, prefix: str, mode: str) -> Iterator[Fact]:
        """Every ``prefix*`` fact that applies to ``mode`` (its own over both modes'), in file
        order."""
        chosen: dict[str, Fact] = {}
        for f in self.by_key.values():
            if f.name.startswith(prefix) and f.mode in (None, mode) and f.k is None:
                if f.name not in chosen or f.mode == mode:
                    chosen[f.name] = f
        yield from sorted(chosen.values(), key=lambda f: (f.origin.line, f.origin.column))

    def counts(self, mode: str, k: int) -> Fact | None:
        return self.by_key.get(("counts", mode, k))

    def warn(self, origin: Origin, code: str, message: str) -> None:
        self.findings.append(Finding(origin.file, origin.line, origin.column, "header", code,
                                     message, severity="warning"))

    def error(self, origin: Origin, code: str, message: str, path: str = "header") -> None:
        self.findings.append(Finding(origin.file, origin.line, origin.column, path, code,
                                     message))
