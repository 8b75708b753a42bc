"""Schemas as data: what each input may hold, written once as tables of fields.

An input (a profile set, a provenance, an inline value, a pin, a workload file, ...) is a
:class:`Map`: an ordered tuple of steps, mostly :class:`Field` rows (key, type, required or
conditionally required, length limit, checks) and a few :class:`Rule` steps for what spans
fields (a pin that sets both ``profiles`` and ``value``). One interpreter, :meth:`Map.read`,
walks any of them over a loaded document and reports every problem as a
:class:`~registry_db.errors.Finding` (code, ``FILE:LINE:COL``, key path, message) into a
:class:`Checker`, then hands the fields it read to the table's ``build`` (a dataclass of
:mod:`registry_db.model`). The idea is cfgv's ``Map``/``Required``/``Optional``: a schema is a
table, not a function per field.

Located YAML (:mod:`registry_db.yaml.load`) and plain JSON read alike: positions come from the
loader's marks, and a plain ``dict`` has none (reported as 0:0). Readers report a problem and go
on, so that every problem of a document is reported at once; a field that breaks a rule reads
as absent for the rules after it (an invalid K is not used to check AL against).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from registry_db.errors import MAX_FINDINGS_PER_FILE, Finding
from registry_db.model import (
    CATEGORY_RE,
    CONTROL_RE,
    INT_LIMIT,
    MAX_K,
    MAX_LENGTH,
    THINKING_MODES,
    control_problem,
)
from registry_db.yaml.nodes import Position, key_pos, mark, pos

_LEADING_ZERO_RE = re.compile(r"[-+]?0[0-9]+")

#: The types a field may want, as messages name them.
WANTS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "list": "a list",
    "mapping": "a mapping",
}


def type_name(value: Any) -> str:
    """How a message names the type of a loaded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def is_int(value: Any) -> bool:
    """An integer literal: ``5`` yes; ``true``, ``5.0`` and ``"5"`` no."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An integer or a float, not a boolean (finiteness is checked separately)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite(value: int | float) -> bool:
    """A number a float holds: not NaN, not infinite, not an integer beyond a double's range
    (``math.isfinite`` raises on one, and the registry stores numbers as floats)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def short_repr(value: Any) -> str:
    """``value``'s repr, shortened for a message (an integer may have hundreds of digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


_IS = {"string": lambda v: isinstance(v, str), "integer": is_int, "number": is_number,
       "list": lambda v: isinstance(v, list), "mapping": lambda v: isinstance(v, dict)}
_EXACT: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                      "list": (list,), "mapping": (dict,)}
#: A key a mapping does not hold (``None`` is a value).
_ABSENT = object()


def join(path: str, key: Any) -> str:
    """The key path of ``key`` under ``path``: ``a.b`` for keys, ``a[2]`` for indexes."""
    if type(key) is str:  # nearly every call
        return f"{path}.{key}" if path else key
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def nearest(name: str, known: Sequence[str]) -> list[str]:
    """The (up to three) stored names closest to ``name``, closest first: the one matcher
    behind every "did you mean" about a stored name (a set, a model, a method)."""
    import difflib  # only for a name that is not stored: a resolution's start-up skips it

    return difflib.get_close_matches(name, known, n=3, cutoff=0.5)


def near_key(key: str, known: Sequence[str], cutoff: float = 0.6) -> str:
    """``unknown key 'x'; did you mean 'y'?`` (or the known keys): one message for every input."""
    import difflib

    near = difflib.get_close_matches(key, known, n=1, cutoff=cutoff)
    hint = f"did you mean {near[0]!r}?" if near else f"known keys: {', '.join(known)}"
    return f"unknown key {key!r}; {hint}"


def _hint(value: Any, want: str) -> str:
    """A short "how to fix" for the common wrong types."""
    if want in ("integer", "number") and isinstance(value, str):
        from registry_db.yaml.load import scalar_kind  # a rare path; the loader is PyYAML's

        if _LEADING_ZERO_RE.fullmatch(value):
            return f"; a leading zero makes it text, so write {int(value)}"
        if scalar_kind(value) in ("int", "float"):
            return "; remove the quotes"
        return ""
    if want == "integer" and isinstance(value, float) and math.isfinite(value) \
            and value.is_integer():
        return f"; write {int(value)}, without the decimal point"
    if want == "string" and isinstance(value, bool):
        return "; quote it"
    if value is None:
        return "; give a value or remove the key"
    return ""


# --- rules shared by several inputs, each with its one message -----------------------------------

class Problem(ValueError):
    """A value that breaks its rule; the text is the rule's one message (a run's term readers,
    :data:`registry_db.inputs.layers.INPUTS`, raise it and ``registry resolve`` shows it)."""


def category_problem(label: str, value: Any) -> str | None:
    """The spec's category rule (lower-case letters, digits, ``_`` and ``-``): the message for a
    value that breaks it, naming it ``label``, or None."""
    if isinstance(value, str) and CATEGORY_RE.fullmatch(value) is not None:
        return None
    return (f"{label} {value!r} is malformed; use lower-case letters, digits, '_' and '-', "
            "such as coding")


def thinking_problem(value: Any, *, term: bool = False) -> str | None:
    """The message for a thinking mode that is not one of :data:`THINKING_MODES`, or None: as
    a file's finding says it, or (``term``) as a run's refusal does."""
    if value in THINKING_MODES:
        return None
    modes = " or ".join(map(repr, THINKING_MODES))
    return (f"thinking must be {modes}, got {value!r}" if term
            else f"thinking is {value!r}; it is {modes}")


def too_long(what: str, value: str, limit_name: str) -> str | None:
    """The message for text longer than the registry stores (:data:`MAX_LENGTH`), or None."""
    limit = MAX_LENGTH[limit_name]
    if len(value) <= limit:
        return None
    return f"{what} is {len(value):,} characters long; the registry stores at most {limit:,}"


#: JSON Schema's pattern for text free of :data:`registry_db.model.CONTROL_RE`'s characters.
NO_CONTROL = f"^[^{CONTROL_RE.pattern[1:-1]}]*$"


def name_check(what: str) -> Check:
    """A name's characters (:func:`registry_db.model.control_problem`) as a field's check."""
    return Check("control_character", lambda v, got: control_problem(what, v),
                 {"pattern": NO_CONTROL})


def k_problem(label: str, k: int) -> str | None:
    """The message for a K outside [1, :data:`MAX_K`], or None."""
    if k < 1:
        return f"{label} is {k}; K is at least 1"
    if k > MAX_K:
        return (f"{label} is {k}; K is at most {MAX_K}, the most speculative tokens the "
                "registry stores")
    return None


# --- the table's rows ----------------------------------------------------------------------------

#: A check of a field's value: ``(value, got) -> message or None``; ``got`` holds the fields read
#: before it (None where absent or invalid).
CheckFn = Callable[[Any, dict], "str | None"]


@dataclass(frozen=True)
class Check:
    """One rule of a field's value, with its finding code, and the JSON Schema keywords that
    state it (None: JSON Schema cannot, :mod:`registry_db.inputs.json_schema` lists why)."""

    code: str
    test: CheckFn
    schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class Field:
    """One key of a mapping: its type, whether it is required, its limit and its checks.

    ``required`` is a bool or, for a conditional requirement, a function of the fields read so
    far. ``missing_message`` (and ``blank_message``) may name those fields as ``{method}``.
    A string that is empty or blank is an error only when ``blank`` names its code. ``content``
    reads what a list or mapping holds (items, a nested :class:`Map`) and returns the value.
    """

    key: str
    want: str
    required: bool | Callable[[dict], bool] = False
    missing: str = "missing_key"
    missing_message: str | None = None
    blank: str | None = None
    blank_message: str | None = None
    nonfinite: str = "not_finite"
    limit: str | None = None
    bound: int = INT_LIMIT  # the largest magnitude an integer may have (its column's)
    checks: tuple[Check, ...] = ()
    #: Whether a failed check makes the field read as absent for the rules after it.
    drop_on_failure: bool = True
    content: Callable[[Checker, Any, dict, str, dict], Any] | None = None
    #: What ``content`` reads, as JSON Schema keywords (a :class:`Map` in them stands for its
    #: schema): the published schema's view of a list's items or a nested mapping.
    shape: Any = None
    #: The exact types a good value has (subclasses, such as located YAML's, take ``_IS``).
    exact: tuple[type, ...] = field(init=False)
    #: ``MAX_LENGTH[limit]``, or no bound.
    max_length: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "exact", _EXACT[self.want])
        object.__setattr__(self, "max_length",
                           sys.maxsize if self.limit is None else MAX_LENGTH[self.limit])

    def __call__(self, ck: Checker, m: dict, path: str, got: dict) -> None:
        got[self.key] = ck.read(self, m, path, got)


#: A step that spans fields: ``(checker, mapping, path, got)``; it reports and may set ``got``.
Rule = Callable[["Checker", dict, str, dict], None]


@dataclass(frozen=True)
class Map:
    """A mapping's schema: what it is called, its ordered steps, its keys and what it builds.

    ``unknown`` says what a key outside ``keys`` draws: ``"error"`` (the spec's tables),
    ``"near_miss"`` (a warning only for a key one typo from a known one: workload and scenario
    files are documents of a wider system) or ``"ignore"``.
    """

    what: str
    steps: tuple[Field | Rule, ...]
    keys: tuple[str, ...] = ()
    unknown: str = "error"
    not_a_mapping: str = "not_a_mapping"
    build: Callable[[dict], Any] | None = None
    #: The JSON Schema of what the ``Rule`` steps check, where it can say it (``allOf``
    #: entries; a :class:`Map` in them stands for its schema).
    also: tuple[dict[str, Any], ...] = ()
    fields: tuple[str, ...] = field(init=False)
    #: ``keys`` as a set: most mappings hold known keys only, which one C-level test tells.
    key_set: frozenset = field(init=False)

    def __post_init__(self) -> None:
        names = tuple(s.key for s in self.steps if isinstance(s, Field))
        object.__setattr__(self, "fields", names)
        if not self.keys:
            object.__setattr__(self, "keys", names)
        object.__setattr__(self, "key_set", frozenset(self.keys))

    def read(self, ck: Checker, doc: Any, path: str, where: Position | None = None,
             outer: dict | None = None) -> dict | None:
        """Every field of ``doc`` (None where absent or invalid), or None if it is no mapping;
        with ``outer``, the enclosing mapping's fields too (this one's checks may read them).

        Whether anything was wrong is the checker's count of errors, before and after.
        """
        if not ck.mapping(doc, mark(doc) if where is None else where, path, self.what,
                          self.not_a_mapping):
            return None
        if self.unknown == "error":
            if not self.key_set.issuperset(doc):
                ck.unknown_keys(doc, self.keys, path)
        elif self.unknown == "near_miss":
            ck.near_misses(doc, self.keys)
        got: dict = {} if outer is None else dict(outer)
        read = ck.read
        for step in self.steps:
            if type(step) is Field:  # most steps; one call fewer than step(...)
                got[step.key] = read(step, doc, path, got)
            else:
                step(ck, doc, path, got)
        return got

    def load(self, ck: Checker, doc: Any, path: str, where: Position | None = None,
             outer: dict | None = None) -> Any:
        """:meth:`read`, then ``build`` the value when this mapping drew no error."""
        before = ck.errors
        got = self.read(ck, doc, path, where, outer)
        if got is None or ck.errors > before:
            return None
        return got if self.build is None else self.build(got)


# --- the interpreter -----------------------------------------------------------------------------

class Checker:
    """Collects the findings of one file (or one inline value) and reads fields by their rows."""

    def __init__(self, file: str):
        self.file = file
        self.findings: list[Finding] = []
        #: What a document's readers share, such as a provenance that aliases cite twice.
        self.memo: dict[Any, Any] = {}
        self._counted = self._errors = 0  # findings looked at so far, and the errors among them

    @property
    def errors(self) -> int:
        """How many findings so far are errors."""
        # Asked before and after every mapping is read: the findings only grow, so only the
        # new ones are counted.
        findings = self.findings
        n = len(findings)
        if n != self._counted:
            if n < self._counted:  # the list was cut or replaced: count it all again
                self._counted = self._errors = 0
            self._errors += sum(1 for f in findings[self._counted:] if f.is_error)
            self._counted = n
        return self._errors

    def error(self, where: Position, path: str, code: str, message: str,
              severity: str = "error") -> None:
        """Record one finding."""
        self.findings.append(Finding(file=self.file, line=where[0], column=where[1], path=path,
                                     code=code, message=message, severity=severity))

    def text_ok(self, value: str, where: Position, path: str, what: str) -> bool:
        """False, after reporting it, if ``value`` holds a NUL, which databases cannot store."""
        if "\x00" not in value:
            return True
        self.error(where, path, "bad_character", f"{what} contains a NUL character (\\0), which "
                   "the registry cannot store; remove it")
        return False

    def length_ok(self, value: str, where: Position, path: str, what: str,
                  limit: str | None) -> bool:
        """False, after reporting it, if ``value`` is longer than the registry stores."""
        problem = None if limit is None else too_long(what, value, limit)
        if problem is None:
            return True
        self.error(where, path, "too_long", problem)
        return False

    def mapping(self, value: Any, where: Position, path: str, what: str,
                code: str = "not_a_mapping") -> bool:
        """True if ``value`` is a mapping; otherwise report it (as ``code``)."""
        if isinstance(value, dict):
            return True
        got = "nothing" if value is None and not path else type_name(value)
        self.error(where, path, code, f"{what} must be a mapping, got {got}")
        return False

    def unknown_keys(self, m: dict, known: Sequence[str], path: str) -> None:
        """Report every key of ``m`` that ``known`` lacks, naming the nearest known key (while
        the file's findings are few enough to be shown: past that, only counted, so that a
        flood of unknown keys costs no suggestion each)."""
        for key in m:
            if key not in known:
                message = (near_key(str(key), known) if len(self.findings) <
                           MAX_FINDINGS_PER_FILE else f"unknown key {key!r}")
                self.error(key_pos(m, key), join(path, str(key)), "unknown_key", message)

    def near_misses(self, m: dict, known: Sequence[str]) -> None:
        """Warn of each key of ``m`` one typo away from a known one (the others are ignored)."""
        for key in m:
            if key in known or not isinstance(key, str):
                continue
            import difflib

            near = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
            if near:
                self.error(key_pos(m, key), key, "near_known_key",
                           f"{key!r} is ignored; did you mean {near[0]!r}?", severity="warning")

    def read(self, f: Field, m: dict, path: str, got: dict) -> Any:
        """``m[f.key]`` by its row; report what is wrong and return None if anything is."""
        # Position and key path only for a finding or a deeper reader: most fields are good.
        key = f.key
        value = m.get(key, _ABSENT)
        if value is _ABSENT:
            required = f.required(got) if callable(f.required) else f.required
            if required:
                self.error(mark(m), join(path, key), f.missing,
                           _message(f.missing_message, got)
                           or f"{key} is required; add it ({WANTS[f.want]})")
            return None
        want = f.want
        if type(value) not in f.exact and not _IS[want](value):
            shown = f" {value!r}"[:42] if isinstance(value, (str, int, float)) else ""
            self.error(pos(m, key), join(path, key), "wrong_type", f"{key} must be "
                       f"{WANTS[want]}, got {type_name(value)}{shown}{_hint(value, want)}")
            return None
        if want == "integer" and not -f.bound <= value <= f.bound:
            self.error(pos(m, key), join(path, key), "int_out_of_range",
                       f"{key} is {short_repr(value)}, beyond what the registry stores "
                       f"(±{f.bound})")
            return None
        if want == "string":
            # The text rules below report; this only lets good text by without its position.
            if "\x00" in value or (f.blank is not None and not value.strip()) or (
                    len(value) > f.max_length):
                return self._text(f, value, m, path, got)
        elif want == "number" and not is_finite(value):
            self.error(pos(m, key), join(path, key), f.nonfinite,
                       f"{key} must be a finite number, got {short_repr(value)}")
            return None
        for check in f.checks:
            problem = check.test(value, got)
            if problem is not None:
                self.error(pos(m, key), join(path, key), check.code, problem)
                if f.drop_on_failure:
                    return None
        if f.content is not None:
            return f.content(self, value, m, join(path, key), got)
        return value

    def _text(self, f: Field, value: str, m: dict, path: str, got: dict) -> None:
        """Report what is wrong with the text ``value`` of field ``f`` (it reads as absent)."""
        key = f.key
        where, sub = pos(m, key), join(path, key)
        if not self.text_ok(value, where, sub, key):
            return None
        if f.blank is not None and not value.strip():
            self.error(where, sub, f.blank, _message(f.blank_message or f.missing_message, got)
                       or f"{key} is empty; give it a value or remove the key")
            return None
        self.length_ok(value, where, sub, key, f.limit)
        return None

    def numbers(self, seq: list, path: str, what: str) -> list[float] | None:
        """Every item of ``seq`` as a finite number, or None after reporting the others."""
        out: list[float] = []
        good = True
        for i, item in enumerate(seq):
            if not is_number(item):
                self.error(pos(seq, i), join(path, i), "wrong_type",
                           f"each of {what} must be a number, got {type_name(item)}")
                good = False
            elif not is_finite(item):
                self.error(pos(seq, i), join(path, i), "not_finite",
                           f"each of {what} must be a finite number, got {short_repr(item)}")
                good = False
            else:
                out.append(float(item))
        return out if good else None


def _message(template: str | None, got: dict) -> str | None:
    return None if template is None else template.format_map(_Blank(got))


class _Blank(dict):
    """``str.format_map`` over the fields read so far, ``None`` for those not read."""

    def __missing__(self, key: str) -> None:
        return None
