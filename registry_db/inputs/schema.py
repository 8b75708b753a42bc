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

import functools
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


@dataclass(frozen=True, eq=False)  # a table is itself: compiled once (:func:`_compiled`)
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
    #: Read plain mappings through the compiled first pass (:class:`_Compiled`): for tables an
    #: import reads by the hundred thousand, not for a one-run command's (msgspec's start-up).
    compiled: bool = False
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
        if self.compiled and type(doc) is dict and COMPILED:
            fast = _compiled(self)
            read_fast = None if fast is None else fast.read(ck, doc, path, outer)
            if read_fast is not None:
                return read_fast
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
        if all(type(item) is float for item in seq) and all(map(math.isfinite, seq)):
            return list(seq)  # the common case, decided without a call per item
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



# --- the compiled first pass ---------------------------------------------------------------------

#: Decide a mapping's plain fields with msgspec when it is installed (the ``fast`` extra); tests
#: switch it off to prove that both ways give the same values and findings.
COMPILED = True

#: The rules (finding codes) whose check's ``schema`` states them only in part, and the part
#: left to ``validate`` (:mod:`registry_db.inputs.json_schema` publishes this table).
PARTLY: dict[str, str] = {
    "al_out_of_range": "AL <= K + 1 for the profile's K (the schema holds 1 <= AL <= 65)",
    "wrong_type": "an integer written 5.0 (JSON Schema's integer is any number without a "
                  "fraction)",
    "bad_name": "a name's length in UTF-8 bytes (the schema counts characters)",
}

#: A check's JSON Schema bounds as msgspec's (a ``Meta``'s name, and which bound is the tighter).
_BOUNDS = {"minimum": ("ge", max), "exclusiveMinimum": ("gt", max), "maximum": ("le", min),
           "exclusiveMaximum": ("lt", min)}
#: The largest finite float: bounds that let every finite number by and neither inf nor NaN.
_FLOAT_MAX = sys.float_info.max
#: Integers a number field takes the compiled way (any other is the interpreter's to judge).
_INT_MAX = 2**63 - 1


def _anchored(pattern: str) -> str | None:
    """A JSON Schema ``^...$`` pattern as Python's re matches it (``$`` there is the end of the
    text; Python's also matches before a final newline), or None when it is not anchored so."""
    if pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$"):
        return f"\\A(?:{pattern[1:-1]})\\Z"
    return None


def _plain_type(f: Field, msgspec: Any) -> tuple[Any, tuple[CheckFn, ...]]:
    """The msgspec type of the plain field ``f`` (text, integer, number), and the tests of its
    checks that the type does not state (a check whose schema states it only in part, or not
    at all, runs as written)."""
    from typing import Annotated, Literal, NoReturn

    bounds: dict[str, Any] = {}
    patterns = [r"\A[^\x00]*\Z"] if f.want == "string" else []  # what :meth:`Checker.text_ok` says
    allowed: list[Any] | None = None
    tests: list[CheckFn] = []

    def bound(name: str, value: Any) -> None:
        meta, tighter = _BOUNDS[name]
        bounds[meta] = value if meta not in bounds else tighter(bounds[meta], value)

    if f.want == "integer":
        bound("minimum", -f.bound)
        bound("maximum", f.bound)
    if f.want == "string" and f.blank is not None:
        patterns.append(r"\S")  # not blank: str.strip() and \s know the same whitespace
    for check in f.checks:
        schema = check.schema or {}
        stated = bool(schema) and check.code not in PARTLY
        if stated and f.want != "string" and set(schema) <= set(_BOUNDS):
            for name, value in schema.items():
                bound(name, value)
        elif stated and f.want == "string" and set(schema) <= {"enum", "const"}:
            values = list(schema["enum"]) if "enum" in schema else [schema["const"]]
            allowed = [v for v in values if allowed is None or v in allowed]
        elif stated and f.want == "string" and set(schema) == {"pattern"} and (
                anchored := _anchored(schema["pattern"])) is not None:
            patterns.append(anchored)
        else:
            tests.append(check.test)
    if allowed is not None:  # the table's own values, each held to the text rules too
        allowed = [v for v in allowed if type(v) is str and len(v) <= f.max_length and all(
            re.search(p, v) for p in patterns)]
        return (Literal[tuple(allowed)] if allowed else NoReturn), tuple(tests)
    if f.want == "string":
        meta = msgspec.Meta(pattern="".join(f"(?={p})" for p in patterns),
                            max_length=None if f.limit is None else f.max_length)
        return Annotated[str, meta], tuple(tests)
    if f.want == "integer":
        return Annotated[int, msgspec.Meta(**_one_a_side(bounds))], tuple(tests)
    # A number: an integer within 64 bits (a larger one is the interpreter's to judge), or a
    # float within the finite ones (neither inf nor NaN is, as Checker.read wants).
    ints = _one_a_side({"ge": -_INT_MAX, "le": _INT_MAX, **bounds})
    low, high = ("ge" if "ge" in ints else "gt"), ("le" if "le" in ints else "lt")
    ints[low], ints[high] = max(ints[low], -_INT_MAX), min(ints[high], _INT_MAX)
    floats = _one_a_side({"ge": -_FLOAT_MAX, "le": _FLOAT_MAX, **bounds})
    return (Annotated[int, msgspec.Meta(**ints)] | Annotated[float, msgspec.Meta(**floats)],
            tuple(tests))


def _one_a_side(bounds: dict[str, Any]) -> dict[str, Any]:
    """Of a strict and a loose bound on one side, the tighter (msgspec takes one a side)."""
    out = dict(bounds)
    for strict, loose, tighter in (("gt", "ge", max), ("lt", "le", min)):
        if strict in out and loose in out:
            keep = strict if tighter(out[strict], out[loose]) == out[strict] else loose
            del out[loose if keep == strict else strict]
    return out


class _Compiled:
    """A :class:`Map`'s plain fields (text, integers, numbers: no ``content``) as a msgspec
    Struct, which types and bounds them in C, with each check its ``schema`` states; a check it
    states in part or not at all runs as written. It only ever *accepts*: a mapping with anything
    to report (a wrong type, a missing key, a failed check) is read again by the interpreter,
    which reports it. On a mapping it accepts, the fields with ``content`` and the ``Rule``
    steps are read by the interpreter's own code in the table's order, so the result is
    :meth:`Map.read`'s."""

    def __init__(self, table: Map, msgspec: Any) -> None:
        self.convert, self.invalid = msgspec.convert, msgspec.ValidationError
        self.asdict = msgspec.structs.asdict
        self.key_set = table.key_set
        fields: list[tuple[str, Any, Any]] = []
        tests: list[tuple[str, CheckFn]] = []
        required_if: list[tuple[str, Callable[[dict], bool]]] = []
        for f in table.steps:
            if type(f) is not Field or f.content is not None:
                continue
            kind, own = _plain_type(f, msgspec)
            tests += ((f.key, test) for test in own)
            # Absent reads as None; an explicit null is not of the type, so it is refused.
            fields.append((f.key, kind, msgspec.NODEFAULT if f.required is True else None))
            if callable(f.required):
                required_if.append((f.key, f.required))
        self.struct = msgspec.defstruct(f"Compiled_{table.what.replace(' ', '_')}", fields,
                                        kw_only=True)
        self.tests, self.required_if = tuple(tests), tuple(required_if)
        #: The steps the interpreter still reads: fields with ``content``, and ``Rule``s.
        self.rest = tuple(s for s in table.steps if type(s) is not Field or s.content is not None)

    def read(self, ck: Checker, doc: dict, path: str, outer: dict | None) -> dict | None:
        """:meth:`Map.read` of ``doc``, or None when the interpreter must read it."""
        if not self.key_set.issuperset(doc):
            return None
        try:
            got = self.asdict(self.convert(doc, self.struct))
        except self.invalid:
            return None
        if outer is not None:
            got = {**outer, **got}
        for key, test in self.tests:
            value = got[key]
            if value is not None and test(value, got) is not None:
                return None
        for key, required in self.required_if:
            if got[key] is None and required(got):
                return None
        read = ck.read
        for step in self.rest:
            if type(step) is Field:
                got[step.key] = read(step, doc, path, got)
            else:
                step(ck, doc, path, got)
        return got


@functools.lru_cache(maxsize=16)  # a few tables
def _compiled(table: Map) -> _Compiled | None:
    """``table`` compiled, once (the cache's reason), or None: msgspec is not installed, or the
    table lets unknown keys by (only tables that refuse them are compiled)."""
    try:
        import msgspec
    except ImportError:
        return None
    if table.unknown != "error":
        return None
    return _Compiled(table, msgspec)
