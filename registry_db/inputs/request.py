"""Run requests: what a run states, checked, and read from files and ``--batch`` lines.

:class:`Request` is what the resolver takes. :func:`check_request` checks the run's own terms
and :class:`Checks` every stated inline value and pin by the spec's rules (through
:mod:`registry_db.inputs.inline`), once per distinct value in a batch.

A workload file states the workload's terms (``thinking``, ``category``) and may state its own
``acceptance`` (an inline value); a scenario file's top-level ``acceptance`` is the pin. Both are
YAML documents of a wider system, so their other keys are ignored, except that a key one typo
away from a known one draws a warning (a misspelt ``categroy`` would otherwise drop the term in
silence). Problems carry ``FILE:LINE:COL: PATH`` from the loader's positions. An inline value or
pin that breaks the spec's rules is the refusal ``invalid_value``; a file that cannot be read, or
whose terms have the wrong type, is invalid input (exit 1 with findings).

A ``--batch`` line is a JSON object with the contract's keys. A line that is not one (bad JSON,
a missing, unknown, duplicated or mistyped key) is answered ``invalid_request``; the inline
values and pins inside a good line are checked by the spec's rules, as everywhere else.

The YAML loader and the validators are imported where they are used: a run that states no
value (most of a batch, and ``registry resolve`` with flags only) never pays for PyYAML.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from registry_db.errors import InvalidInput, ResolutionRefused
from registry_db.errors import Finding
from registry_db.model import CATEGORY_RE, THINKING_MODES, WORKLOAD_KEYS, InlineValue, Pin

if TYPE_CHECKING:  # pragma: no cover
    from registry_db.inputs.base import Checker


@dataclass(frozen=True)
class Request:
    """One run to resolve. ``workload``, ``pin`` and ``cli`` are what those layers state.

    ``sets`` names the sets that count as the registry (None: every set in the database).
    ``hardware`` is the run's chip; a profile measured on another is recorded. Everything is
    checked when the run is resolved (a bad term is ``invalid_request``, a bad value or pin
    ``invalid_value``); a value or pin may also be given as the spec's mapping.
    """

    model: str
    method: str
    k: int
    thinking: str | None = None
    category: str | None = None
    workload: InlineValue | None = None
    pin: Pin | None = None
    cli: InlineValue | None = None
    hardware: str | None = None
    sets: tuple[str, ...] | None = None


def check_request(req: Request) -> None:
    """The run's own terms; a library caller can pass anything, so they are checked here too."""
    problems = []
    for name in ("model", "method"):
        value = getattr(req, name)
        if not isinstance(value, str) or not value:
            problems.append(f"{name} must be a non-empty string, got {value!r}")
    if not isinstance(req.k, int) or isinstance(req.k, bool) or req.k < 1:
        problems.append(f"k must be an integer of at least 1, got {req.k!r}")
    if req.thinking is not None and req.thinking not in THINKING_MODES:
        problems.append(f"thinking must be 'on' or 'off', got {req.thinking!r}")
    if req.category is not None and (not isinstance(req.category, str)
                                     or not CATEGORY_RE.fullmatch(req.category)):
        problems.append(f"category {req.category!r} is malformed; use lower-case letters, "
                        "digits, '_' and '-'")
    if req.hardware is not None and (not isinstance(req.hardware, str) or not req.hardware):
        problems.append(f"hardware must be a non-empty string, got {req.hardware!r}")
    if req.sets is not None and (isinstance(req.sets, str) or not req.sets or not all(
            isinstance(s, str) and s for s in req.sets)):
        problems.append(f"sets must be a non-empty list of set names, got {req.sets!r}")
    if problems:
        raise ResolutionRefused("invalid_request", "; ".join(problems))


class Checks:
    """Checks stated values by the spec's rules, once per distinct value in a batch."""

    def __init__(self) -> None:
        self._seen: dict[Any, Any] = {}
        self._categories: dict[Any, bool] = {}

    def category(self, category: Any) -> bool:
        """Whether ``category`` is well formed (remembered: a batch repeats a few)."""
        if type(category) is not str:
            return False
        good = self._categories.get(category)
        if good is None:
            good = self._categories[category] = CATEGORY_RE.fullmatch(category) is not None
        return good

    def value(self, value: InlineValue | None, layer: str, path: str) -> InlineValue | None:
        """``value`` as the spec's rules accept it; ``invalid_value`` names what breaks them.

        ``path`` is where the value sits in a ``--batch`` line (``acceptance`` or ``cli``).
        """
        if value is None:
            return None
        from registry_db.inputs.inline import check_inline_value

        return self._check(value, layer, path, check_inline_value, _value_doc)

    def pin(self, pin: Pin | None) -> Pin | None:
        """``pin`` as the spec's rules accept it; ``invalid_value`` names what breaks them."""
        if pin is None:
            return None
        from registry_db.inputs.inline import check_pin

        return self._check(pin, "scenario", "pin", check_pin, _pin_doc)

    def _check(self, obj: Any, layer: str, path: str, check: Any, as_doc: Any) -> Any:
        # Keyed by repr, not by equality: 1, 1.0 and True are equal, yet only two are valid K.
        key = (path, repr(obj)) if type(obj) in (InlineValue, Pin) else None
        found = self._seen.get(key) if key is not None else None
        if found is None:
            good, findings = check(as_doc(obj), "", path)
            found = good if good is not None else invalid_value(layer, findings).message
            if key is not None:
                self._seen[key] = found
        if type(found) is str:  # a fresh exception each time: a raised one keeps its traceback
            raise ResolutionRefused("invalid_value", found)
        return found


def _value_doc(value: Any) -> Any:
    if not isinstance(value, InlineValue):
        return value  # the checker reports what it is instead
    doc: dict[str, Any] = {"num_spec_tokens": value.num_spec_tokens}
    for name in ("acceptance_length", "acceptance_rate", "per_position_rates", "source"):
        item = getattr(value, name)
        if item is not None:
            doc[name] = list(item) if isinstance(item, tuple) else item
    return doc


def _pin_doc(pin: Any) -> Any:
    if not isinstance(pin, Pin):
        return pin
    doc: dict[str, Any] = {}
    if pin.profiles is not None:
        doc["profiles"] = pin.profiles
    if pin.value is not None:
        doc["value"] = _value_doc(pin.value)
    if pin.fallback_category is not None:
        doc["fallback_category"] = pin.fallback_category
    return doc


def invalid_value(layer: str, findings: Iterable[Finding]) -> ResolutionRefused:
    """The refusal for a stated value (or, at the scenario layer, a pin) that breaks the spec."""
    what = "pin" if layer == "scenario" else "value"
    return ResolutionRefused("invalid_value",
                             f"the {layer} layer's {what} is invalid: {describe(findings)}")


def describe(findings: Iterable[Finding]) -> str:
    """Findings as one message: ``FILE:LINE:COL: PATH: MESSAGE`` where positions are known."""
    return "\n".join(f.render() if f.line else f"{f.path}: {f.message}"
                     for f in findings if f.is_error)


#: A batch line's keys: what each must be, and whether it is required.
BATCH_KEYS: dict[str, tuple[str, bool]] = {
    "model": ("string", True),
    "method": ("string", True),
    "k": ("integer", True),
    "thinking": ("string", False),
    "category": ("string", False),
    "acceptance": ("object", False),
    "pin": ("object", False),
    "cli": ("object", False),
    "hardware": ("string", False),
    "sets": ("list of strings", False),
}


@dataclass(frozen=True)
class Workload:
    """A workload file's terms: thinking mode, category and its own stated acceptance."""

    thinking: str | None
    category: str | None
    acceptance: InlineValue | None
    warnings: tuple[Finding, ...] = ()


def load_workload(path: str | os.PathLike) -> Workload:
    """Read a workload file; raise :class:`InvalidInput` (findings) or ``invalid_value``."""
    from registry_db.inputs.base import Checker
    from registry_db.inputs.inline import check_inline_value
    from registry_db.yaml.load import load_file, mark, pos

    file = str(path)
    doc = load_file(path)
    ck = Checker(file)
    if not ck.mapping(doc, mark(doc), "", "a workload"):
        raise InvalidInput(ck.findings)
    _near_misses(ck, doc, WORKLOAD_KEYS)
    thinking = ck.field(doc, "thinking", "", "string")
    if thinking is not None and thinking not in THINKING_MODES:
        ck.error(pos(doc, "thinking"), "thinking", "bad_thinking",
                 f"thinking is {thinking!r}; the thinking modes are 'on' and 'off'")
    category = ck.field(doc, "category", "", "string")
    if category is not None and not CATEGORY_RE.fullmatch(category):
        ck.error(pos(doc, "category"), "category", "bad_category",
                 f"category {category!r} is malformed; use lower-case letters, digits, '_' and "
                 "'-', such as coding")
    if ck.errors:
        raise InvalidInput(ck.findings)
    acceptance = None
    if doc.get("acceptance") is not None:
        acceptance, findings = check_inline_value(doc["acceptance"], file, "acceptance")
        if acceptance is None:
            raise invalid_value("workload", findings)
    return Workload(thinking, category, acceptance, tuple(ck.findings))


def load_scenario(path: str | os.PathLike) -> tuple[Pin | None, tuple[Finding, ...]]:
    """A scenario file's ``acceptance`` pin (None when it has none) and warnings."""
    from registry_db.inputs.base import Checker
    from registry_db.inputs.inline import check_pin
    from registry_db.yaml.load import load_file, mark

    file = str(path)
    doc = load_file(path)
    ck = Checker(file)
    if not ck.mapping(doc, mark(doc), "", "a scenario"):
        raise InvalidInput(ck.findings)
    _near_misses(ck, doc, ("acceptance",))
    if doc.get("acceptance") is None:
        return None, tuple(ck.findings)
    pin, findings = check_pin(doc["acceptance"], file, "acceptance")
    if pin is None:
        raise invalid_value("scenario", findings)
    return pin, tuple(ck.findings)


def _near_misses(ck: Checker, doc: dict, known: tuple[str, ...]) -> None:
    from registry_db.yaml.load import key_pos

    for key in doc:
        if key in known or not isinstance(key, str):
            continue
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
        if near:
            ck.error(key_pos(doc, key), key, "near_known_key",
                     f"{key!r} is ignored; did you mean {near[0]!r}?", severity="warning")


# --- batch lines ---------------------------------------------------------------------------------

def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {dup!r} appears twice")
    return out


#: A batch line's value keys and the layers that state them.
_LAYER_OF = {"acceptance": "workload", "pin": "scenario", "cli": "cli"}

_DECODER = json.JSONDecoder(object_pairs_hook=_refuse_duplicates)


def parse_line(line: str, number: int, seen: dict | None = None) -> Request | ResolutionRefused:
    """One ``--batch`` line as a request, or the refusal that answers it.

    ``seen`` remembers checked values across the lines of one batch.
    """
    if not line.strip():
        return _invalid(number, "the line is empty; each line is one JSON request")
    try:
        obj = _DECODER.decode(line)
    except ValueError as exc:  # JSONDecodeError is a ValueError, and so is a duplicate key
        return _invalid(number, f"not a JSON object: {exc}")
    except RecursionError:
        return _invalid(number, "not a JSON object: it is nested too deeply")
    # Only an escape can put NUL or a lone surrogate in a decoded string (the text is UTF-8).
    if "\\u" in line and not _plain_text(obj):
        return _invalid(number, "a string holds NUL or an unpaired surrogate escape "
                                "(\\u0000, \\ud800-\\udfff); text must be Unicode without NUL")
    try:
        return request_from_json(obj, seen)
    except ResolutionRefused as refusal:
        if refusal.reason == "invalid_request":
            return _invalid(number, refusal.message)
        return refusal


def _plain_text(obj: Any) -> bool:
    """Whether every string (keys included) in a decoded line encodes as UTF-8 and has no NUL:
    what both databases and the answer's output can carry."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if "\0" in item:
                return False
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def parse_lines(lines: Iterable[str]) -> list[Request | ResolutionRefused]:
    """Every line of a ``--batch`` input, in order (a blank line is an invalid request)."""
    seen: dict = {}
    return [parse_line(line, n, seen) for n, line in enumerate(lines, 1)]


def _invalid(number: int, message: str) -> ResolutionRefused:
    return ResolutionRefused("invalid_request", f"line {number}: {message}")


_TYPES = {"string": str, "integer": int, "object": dict, "list of strings": list}
#: Each key's one Python type after ``json.loads`` (``k: true`` is a bool, not an int).
_JSON_TYPES = {key: _TYPES[want] for key, (want, _) in BATCH_KEYS.items()}
_REQUIRED = tuple(key for key, (_, required) in BATCH_KEYS.items() if required)


def request_from_json(obj: Any, seen: dict | None = None) -> Request:
    """A request from a decoded ``--batch`` object; raise ``invalid_request`` or ``invalid_value``.

    ``acceptance`` is the workload's inline value, ``pin`` the scenario's pin, ``cli`` the
    command line's value, each in the spec's form and checked by its rules (once per distinct
    value when ``seen`` is shared across calls).
    """
    # The common line is checked in one pass; anything else takes the long way, which says
    # exactly what is wrong.
    if not (type(obj) is dict and all(obj.get(key) is not None for key in _REQUIRED)
            and all(value is None or type(value) is _JSON_TYPES.get(key)
                    for key, value in obj.items())
            and (obj.get("sets") is None or all(type(s) is str for s in obj["sets"]))):
        _refuse_malformed(obj)
    get = obj.get
    acceptance, pin, cli, sets = get("acceptance"), get("pin"), get("cli"), get("sets")
    if acceptance is not None or pin is not None or cli is not None:
        seen = {} if seen is None else seen
        acceptance = _stated(acceptance, "acceptance", seen)
        pin = _stated(pin, "pin", seen)
        cli = _stated(cli, "cli", seen)
    return Request(obj["model"], obj["method"], obj["k"], get("thinking"), get("category"),
                   acceptance, pin, cli, get("hardware"), None if sets is None else tuple(sets))


def _stated(doc: dict | None, key: str, seen: dict) -> Any:
    """A line's inline value or pin as the spec's dataclass; ``invalid_value`` if it is not one."""
    if doc is None:
        return None
    # Keyed by repr: equal dicts may hold 1, 1.0 or true, which the rules tell apart.
    memo = (key, repr(doc))
    found = seen.get(memo)
    if found is None:
        from registry_db.inputs.inline import check_inline_value, check_pin

        good, findings = (check_pin if key == "pin" else check_inline_value)(doc, "", key)
        found = seen[memo] = good if good is not None else (
            invalid_value(_LAYER_OF[key], findings).message)
    if type(found) is str:
        raise ResolutionRefused("invalid_value", found)
    return found


def _refuse_malformed(obj: Any) -> None:
    """Raise ``invalid_request`` naming every key of ``obj`` that is missing, unknown or
    mistyped, or saying that ``obj`` is not an object at all."""
    from registry_db.inputs.base import type_name

    if not isinstance(obj, dict):
        raise ResolutionRefused("invalid_request", f"a request is a JSON object, got "
                                f"{type_name(obj)}")
    problems = []
    for key in obj:
        if key not in BATCH_KEYS:
            near = difflib.get_close_matches(key, BATCH_KEYS, n=1, cutoff=0.6)
            problems.append(f"unknown key {key!r}; " + (
                f"did you mean {near[0]!r}?" if near else f"known keys: {', '.join(BATCH_KEYS)}"))
    for key, (want, required) in BATCH_KEYS.items():
        value = obj.get(key)
        if value is None:
            if required:
                problems.append(f"{key} is required ({want})")
        elif not _is(value, want):
            problems.append(f"{key} must be {'an' if want[0] in 'aeiou' else 'a'} {want}, "
                            f"got {type_name(value)}")
    if problems:
        raise ResolutionRefused("invalid_request", "; ".join(problems))


def _is(value: Any, want: str) -> bool:
    from registry_db.inputs.base import is_int

    if want == "string":
        return isinstance(value, str)
    if want == "integer":
        return is_int(value)
    if want == "object":
        return isinstance(value, dict)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)

