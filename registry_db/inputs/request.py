"""Run requests: what a run states, as a library call, a workload or scenario file, or a
``--batch`` line, checked by the rows of :mod:`registry_db.inputs.layers`.

:class:`Request` is what the resolver takes. Its terms (model, method, K, thinking, category,
hardware, sets) are checked by each row's rule (:func:`check_terms`, the refusal
``invalid_request``); what its layers state (an inline value, a pin) by the schemas of
:mod:`registry_db.inputs.inline` (:class:`Checks`, the refusal ``invalid_value``), once per
distinct value in a batch.

Workload and scenario files, which state some of a run's inputs, are read by
:mod:`registry_db.inputs.run_files`.

A ``--batch`` line is a JSON object whose keys are the rows' batch keys (``id``, any JSON
value, is the caller's name for the line). A line that is not one (bad JSON, a missing, unknown,
duplicated or mistyped key) is answered ``invalid_request``; the values and pins inside a good
line are checked by the spec's rules, as everywhere else. Blank lines are skipped.

The YAML loader is imported where it is used: a run that states no value (most of a batch, and
``registry resolve`` with flags only) never pays for PyYAML.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from operator import attrgetter, call
from typing import Any

from registry_db.inputs import layers
from registry_db.inputs.deployment import Deployment, check_deployment
from registry_db.inputs.inline import INLINE_VALUE, invalid_value
from registry_db.inputs.schema import (
    Checker,
    Map,
    near_key,
    type_name,
)
from registry_db.model import InlineValue, Pin, Refusal
from registry_db.model import RefusalReason as R


@dataclass(frozen=True)
class Request:
    """One run to resolve. ``workload``, ``pin`` and ``cli`` are what those layers state.

    ``sets`` names the sets that count as the registry (None: every set in the database).
    ``hardware`` is the run's chip; a profile measured on another is recorded. ``as_of``
    resolves against the registry as it stood then (sets deleted later still answer). Everything is
    checked when the run is resolved (a bad term is ``invalid_request``, a bad value or pin
    ``invalid_value``); a value or pin may also be given as the spec's mapping.
    The fields are the rows of :data:`registry_db.inputs.layers.INPUTS`, in order.
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
    #: Resolve against the registry as it stood at this moment (ISO 8601 text or a datetime;
    #: no zone means UTC); None: the current registry.
    as_of: str | datetime | None = None
    #: A batch line's ``id`` (any JSON value; None: none), echoed in its answer. Not part of
    #: the run: two requests that differ only by id are equal.
    id: Any = field(default=None, compare=False)


def check_terms(req: Any) -> Refusal | None:
    """The run's own terms by each row's rule: ``invalid_request`` naming every problem."""
    found = list(map(call, _CHECKS, _TERMS_OF(req)))
    if found.count(None) == len(found):
        return None
    return Refusal(R.INVALID_REQUEST, "; ".join(p for p in found if p is not None))


_contains = set.__contains__
#: The request's terms in one call, their rules in the same order, and which terms are
#: integers: 1, 1.0 and True are equal, and only the first is an integer, so those terms are
#: looked up among the good values only when they hold an int.
_TERMS_OF = attrgetter(*(name for name, _ in layers.TERM_CHECKS))
_CHECKS = tuple(check for _, check in layers.TERM_CHECKS)
_INTS = tuple(i for i, row in enumerate(layers.TERMS) if row.json == "integer")


class Checks:
    """Checks a batch's requests, remembering what was checked: each term's value, and each
    stated value and pin, once per distinct value."""

    #: What one instance remembers at most, per term and of stated values: a long-lived
    #: instance (:data:`SHARED`) forgets everything past it and starts again.
    LIMIT = 4096

    def __init__(self, *, lasting: bool = False) -> None:
        self._seen: dict[Any, Any] = {}
        self._good: tuple[set, ...] = ()  # per term, the values its rule found good
        # One request alone gains nothing from remembering; an instance that outlives its
        # requests (``lasting``) does from the first.
        self._first = not lasting

    def terms(self, req: Any) -> Refusal | None:
        """:func:`check_terms`; a value each term's rule found good before is not checked
        again (a batch repeats a few models, methods, Ks and categories)."""
        values = _TERMS_OF(req)
        good = self._good
        if good:
            for i in _INTS:
                if type(values[i]) is not int and values[i] is not None:
                    break
            else:
                try:
                    if all(map(_contains, good, values)):
                        return None
                except TypeError:  # an unhashable term (a list of sets): checked every time
                    pass
        refusal = check_terms(req)
        if self._first:
            self._first = False
        elif refusal is None:
            if not self._good:
                self._good = tuple(set() for _ in values)
            for term, value in zip(self._good, values):
                if len(term) >= self.LIMIT:
                    term.clear()
                try:
                    term.add(value)
                except TypeError:
                    pass
        return refusal

    def stated(self, req: Any, layer: str) -> Any:
        """What ``layer`` states in ``req``, checked by its schema (None when it states nothing);
        a :class:`Refusal` (``invalid_value``) when it breaks the spec's rules."""
        name, key, schema = layers.STATED_BY[layer]
        return self.check(getattr(req, name), schema, key, layer)

    def check(self, obj: Any, schema: Map, path: str, layer: str) -> Any:
        """``obj`` (a mapping or the schema's dataclass) checked by ``schema`` at ``path``."""
        if obj is None:
            return None
        # Keyed by repr, not by equality: 1, 1.0 and True are equal, yet only one is a valid K.
        key = (path, repr(obj)) if type(obj) in (InlineValue, Pin, dict) else None
        found = self._seen.get(key) if key is not None else None
        if found is None:
            ck = Checker("")
            good = schema.load(ck, as_document(obj, schema), path)
            found = good if good is not None else invalid_value(layer, ck.findings)
            if key is not None:
                if len(self._seen) >= self.LIMIT:
                    self._seen.clear()
                self._seen[key] = found
        return found


#: The checks :func:`registry_db.resolve.plan.resolve` shares across calls: a program that
#: resolves its runs one at a time repeats a few models, methods and categories, and a term's
#: rule depends on its value alone (1 µs of a 30 µs resolution, measured). Bounded by
#: :attr:`Checks.LIMIT`.
SHARED = Checks(lasting=True)


def as_document(obj: Any, schema: Map) -> Any:
    """A dataclass a library caller built (an :class:`InlineValue`, a :class:`Pin`) as the
    mapping its schema reads: the fields it states, and always those it cannot omit (a K of
    None is reported as null, not as missing); anything else as it is."""
    if type(obj) not in (InlineValue, Pin):
        return obj  # a mapping is read as it is; anything else the schema reports
    doc: dict[str, Any] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value is not None or f.default is MISSING:
            doc[f.name] = (as_document(value, INLINE_VALUE) if type(value) is InlineValue
                           else list(value) if type(value) is tuple else value)
    return doc


# --- batch lines ---------------------------------------------------------------------------------

def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {key!r} appears twice")
            seen.add(key)
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_refuse_duplicates)


def parse_line(line: str, number: int, checks: Checks | None = None
               ) -> Request | DeploymentRun | Refusal:
    """One ``--batch`` line as a request (a :class:`DeploymentRun` when it carries a
    ``"deployment"``), or the refusal that answers it.

    ``checks`` remembers checked values across the lines of one batch.
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
    if type(obj) is dict and "deployment" in obj:
        if obj["deployment"] is None:  # null is "not given", as for every key
            del obj["deployment"]
            found: Request | DeploymentRun | Refusal = request_from_json(obj, checks)
        else:
            found = deployment_run_from_json(obj, checks)
    else:
        found = request_from_json(obj, checks)
    if type(found) is Refusal and found.reason == R.INVALID_REQUEST:
        return _invalid(number, found.message)
    return found


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


def parse_lines(lines: Iterable[str]) -> list[Request | DeploymentRun | Refusal]:
    """Every line of a ``--batch`` input that is not blank, in order; blank lines (spaces
    only, or nothing) get no answer, and refusals keep the input's line numbers."""
    checks = Checks()
    # A line repeated word for word is the same request: a trace that asks for one
    # configuration again and again is read once per distinct line. Only requests are
    # shared: a refusal names its line.
    read: dict[str, Request] = {}
    out: list[Request | DeploymentRun | Refusal] = []
    add = out.append
    for n, line in enumerate(lines, 1):
        found: Request | DeploymentRun | Refusal | None = read.get(line)
        if found is None:
            if not line.strip():
                continue
            found = parse_line(line, n, checks)
            if type(found) is Request:
                read[line] = found
        add(found)
    return out


def line_id(line: str) -> Any:
    """The ``id`` of a batch line that was refused as it was read (``invalid_request``,
    ``invalid_value``), when the line is still a JSON object holding one (None otherwise), so
    that its answer can echo it too."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj.get("id") if isinstance(obj, dict) else None


def _invalid(number: int, message: str) -> Refusal:
    return Refusal(R.INVALID_REQUEST, f"line {number}: {message}")


def request_from_json(obj: Any, checks: Checks | None = None) -> Request | Refusal:
    """A request from a decoded ``--batch`` object, or the refusal that answers it:
    ``invalid_request`` when a key is missing, unknown or mistyped, ``invalid_value`` when a
    stated value or pin breaks the spec's rules (each checked once per distinct value when
    ``checks`` is shared across calls). The keys are the rows' batch keys."""
    # The common line is checked in one pass; anything else takes the long way, which says
    # exactly what is wrong.
    if not (type(obj) is dict and _well_shaped(obj)
            and all(check(value) for key, check in layers.ITEM_CHECKS
                    if (value := obj.get(key)) is not None)):
        refusal = _malformed(obj)
        if refusal is not None:
            return refusal
    values = list(map(obj.get, layers.KEYS))
    for i, convert in layers.FROM_JSON:
        if values[i] is not None:
            values[i] = convert(values[i])
    for i, key, schema, layer in layers.STATED_AT:
        if values[i] is not None:
            checks = Checks() if checks is None else checks
            found = checks.check(values[i], schema, key, layer)
            if type(found) is Refusal:
                return found
            values[i] = found
    return Request(*values)


def _well_shaped(obj: dict) -> bool:
    """Whether ``obj``'s keys are known, each value of its key's JSON type (or null, "not
    given"), and every required key given: a function of its keys and its values' types
    alone, so a shape found good is remembered (a batch has a handful; 0.05 s of 100,000
    lines)."""
    shape = (tuple(obj), tuple(map(type, obj.values())))
    if shape in _GOOD_SHAPES:
        return True
    json_types, any_keys = layers.JSON_TYPES, layers.ANY_KEYS
    good = (all(obj.get(key) is not None for key in layers.REQUIRED_KEYS)
            and all(type(value) is json_types.get(key) or key in any_keys
                    or value is None and key in json_types  # null is "not given", if known
                    for key, value in obj.items()))
    if good:
        if len(_GOOD_SHAPES) >= Checks.LIMIT:  # bounded: lines may come in many shapes
            _GOOD_SHAPES.clear()
        _GOOD_SHAPES.add(shape)
    return good


_GOOD_SHAPES: set[tuple] = set()


@dataclass(frozen=True, slots=True)
class DeploymentRun:
    """A run served by a deployment: ``request`` is resolved once per pool that speculates,
    at the pool's method and K (:mod:`registry_db.resolve.deployment`); until then its own
    method and K are :data:`POOL_STANDS_IN`'s, which nothing resolves."""

    request: Request
    deployment: Deployment

    @property
    def id(self) -> Any:
        return self.request.id


#: The method and K of a run whose deployment's pools state them.
POOL_STANDS_IN: dict[str, Any] = {"method": "-", "k": 1}


def deployment_run_from_json(obj: dict[str, Any], checks: Checks | None = None
                             ) -> DeploymentRun | Refusal:
    """A batch line with a ``"deployment"`` (the registry's deployment format, as a JSON
    object): ``invalid_request`` naming every problem with the deployment (by its key path)
    and with the line's other keys; the pools state the method and K, so the line may not."""
    problems = [f"{key} is the pools' (each speculating pool's engine.speculative states its "
                f"method and K); drop {key!r} from a line with a deployment"
                for key in POOL_STANDS_IN if obj.get(key) is not None]
    deployment, findings = check_deployment(obj["deployment"], "", "deployment")
    problems.extend(f"{f.path}: {f.message}" for f in findings if f.is_error)
    rest = {**{k: v for k, v in obj.items() if k != "deployment"}, **POOL_STANDS_IN}
    found = request_from_json(rest, checks)
    if type(found) is Refusal and found.reason == R.INVALID_REQUEST:
        problems.append(found.message)
    if problems:
        return Refusal(R.INVALID_REQUEST, "; ".join(problems))
    if type(found) is Refusal:
        return found
    assert deployment is not None and type(found) is Request
    return DeploymentRun(found, deployment)


def _malformed(obj: Any) -> Refusal | None:
    """``invalid_request`` naming every key of ``obj`` that is missing, unknown or mistyped,
    or saying that ``obj`` is not an object at all."""
    if not isinstance(obj, dict):
        return Refusal(R.INVALID_REQUEST, f"a request is a JSON object, got {type_name(obj)}")
    keys = [row.key for row in layers.INPUTS]
    problems = [near_key(key, keys) for key in obj if key not in keys]
    for row in layers.INPUTS:
        value = obj.get(row.key)
        if value is None:
            if row.required:
                problems.append(f"{row.key} is required ({row.json})")
        elif not row.json_ok(value):
            problems.append(f"{row.key} must be {'an' if row.json[0] in 'aeiou' else 'a'} "
                            f"{row.json}, got {type_name(value)}")
    return Refusal(R.INVALID_REQUEST, "; ".join(problems)) if problems else None
