"""A run as asked (:class:`Request`) and as checked (:class:`Run`): :func:`check` turns the one
into the other, or into the refusal that answers it.

Every way in calls :func:`check` once: ``registry resolve``, a ``--batch`` line
(:mod:`registry_db.inputs.request`), a deployment's pools (:func:`with_terms`) and the library's
``resolve()`` and ``resolve_many()``. What comes out is normalised (K an ``int``, the scope a
sorted tuple, the time an aware UTC ``datetime``, each stated value the schema's dataclass), so
two runs are equal exactly when they are the same run and the resolver never checks again. The
stated values are a tuple in :data:`~registry_db.inputs.layers.LAYERS`' order, read from the
table, so a new layer is part of a run (and of its equality) by existing.
"""

from __future__ import annotations

import functools
from dataclasses import MISSING, dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from registry_db.inputs import layers
from registry_db.inputs.inline import INLINE_VALUE, invalid_value
from registry_db.inputs.schema import Checker, Map, Problem
from registry_db.model import InlineValue, Pin, Refusal
from registry_db.model import RefusalReason as R

__all__ = ["Request", "Run", "check", "check_object", "with_terms"]


@dataclass(frozen=True)
class Request:
    """One run to resolve, as a caller states it. ``workload``, ``pin`` and ``cli`` are what
    those layers state.

    ``sets`` names the sets that count as the registry (None: every set in the database).
    ``hardware`` is the run's chip; a profile measured on another is recorded. ``as_of``
    resolves against the registry as it stood then (sets deleted later still answer). Nothing
    is checked here: :func:`check` does it once, where the request enters (a bad term is
    ``invalid_request``, a bad value or pin ``invalid_value``); a value or pin may also be
    given as the spec's mapping.
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


@dataclass(frozen=True, slots=True)
class Run:
    """One run, checked and normalised: what the resolver takes (see the module)."""

    model: str
    method: str
    k: int
    thinking: str | None = None
    category: str | None = None
    hardware: str | None = None
    #: The sets that count as the registry, distinct and sorted; None: every set.
    scope: tuple[str, ...] | None = None
    #: The registry as it stood at this UTC instant (aware); None: as it stands.
    as_of: datetime | None = None
    #: What each layer of :data:`~registry_db.inputs.layers.LAYERS` states, in its order
    #: (checked: an :class:`~registry_db.model.InlineValue`, a :class:`~registry_db.model.Pin`),
    #: None where it states nothing (the registry always).
    stated: tuple[Any, ...] = ()
    #: A batch line's ``id``, echoed in its answer; not part of the run.
    id: Any = field(default=None, compare=False)


#: Which term of a :class:`Run` each input row gives (the rest keep their row's name).
_RUN_FIELD = {"sets": "scope"}


def check(request: Request | Run) -> Run | Refusal:
    """``request`` as a :class:`Run`, or its refusal: ``invalid_request`` naming every term
    that breaks its row's rule, else ``invalid_value`` for the first stated value or pin that
    breaks the spec's rules. A :class:`Run` is returned as it is (it was checked)."""
    if type(request) is Run:
        return request
    terms: dict[str, Any] = {}
    problems: list[str] = []
    given: dict[str, tuple[layers.Input, Any]] = {}  # by layer: what its input states
    for row in layers.INPUTS:
        value = getattr(request, row.name)
        if row.read is not None:
            try:
                terms[_RUN_FIELD.get(row.name, row.name)] = row.read(value)
            except Problem as problem:
                problems.append(str(problem))
        elif row.layer is not None and value is not None:
            given[row.layer] = (row, value)
    if problems:
        return Refusal(R.INVALID_REQUEST, "; ".join(problems))
    stated: list[Any] = []
    for layer in layers.LAYERS:  # lowest first: the first invalid value refuses the run
        entry = given.get(layer.layer)
        found = None if entry is None else read_stated(entry[1], entry[0])
        if type(found) is Refusal:
            return found
        stated.append(found)
    return Run(**terms, stated=tuple(stated), id=request.id)


#: Each term's row as :func:`check_object` reads it: (batch key, the run's field, the rule, the
#: exact Python type its JSON value must have, whether it is required).
_TYPES: dict[str, type] = {"string": str, "integer": int, "list of strings": list}
_TERMS = tuple((row.key, _RUN_FIELD.get(row.name, row.name), row.read, _TYPES[row.json],
                row.required) for row in layers.INPUTS if row.read is not None)
_KNOWN = frozenset(layers.BATCH_KEYS)
#: Each stated layer's input row, by batch key, in the layers' order (lowest first).
_STATED_ROWS = tuple(layers.STATED[layer.layer] for layer in layers.LAYERS
                     if layer.layer in layers.STATED)


def check_object(obj: dict[str, Any]) -> Run | None:
    """A decoded ``--batch`` object of the common shape as its :class:`Run`: every key known,
    every term of its exact JSON type and within its rule, every stated value or pin valid;
    the same run :func:`check` makes of it. None for anything else, which the caller reads the
    plain way (:func:`registry_db.inputs.request.parse_line`), to say exactly what is wrong.
    The checks are the rows' own rules; only the generic bookkeeping around them is skipped."""
    if not obj.keys() <= _KNOWN:
        return None
    terms: dict[str, Any] = {}
    for index, (key, name, read, kind, required) in enumerate(_TERMS):
        value = obj.get(key)
        try:
            if value is None:
                if required:
                    return None
                terms[name] = read(None)
            elif type(value) is not kind:
                return None
            elif type(value) is list:
                if not all(type(v) is str for v in value):
                    return None
                terms[name] = read(value)
            elif key in _CONTEXTUAL:
                terms[name] = read(value)
            else:  # a string or an int, of its exact type: the rule's answer is the value's
                terms[name] = _read_term(index, value)
        except Problem:
            return None
    stated: list[Any] = [None]  # the registry states nothing
    for row in _STATED_ROWS:
        value = obj.get(row.key)
        if value is None:
            stated.append(None)
            continue
        if type(value) is not dict:
            return None
        found = _stated_scalars(row.key, _scalar_items(value)) if _all_scalar(value) \
            else read_stated(value, row)
        if found is None or type(found) is Refusal:
            return None
        stated.append(found)
    return Run(**terms, stated=tuple(stated), id=obj.get("id"))


#: Terms whose reading depends on more than the value (a label's name in ``as_of`` is read
#: against the batch's own labels): never kept by :func:`_read_term`.
_CONTEXTUAL = frozenset({"as_of"})


@functools.lru_cache(maxsize=4096)  # a batch names a few models, methods, categories, many times
def _read_term(index: int, value: Any) -> Any:
    """Term ``index`` of :data:`_TERMS` read by its rule (a value that breaks it raises
    :class:`~registry_db.inputs.schema.Problem`, and is not kept)."""
    return _TERMS[index][2](value)


def _all_scalar(value: dict[str, Any]) -> bool:
    return all(v is None or type(v) in (str, int, float, bool) for v in value.values())


def _scalar_items(value: dict[str, Any]) -> tuple:
    # Each value with its type, and a float with its bits: 1, 1.0 and true are equal in Python,
    # and so are 0.0 and -0.0, and none is the same value as another.
    return tuple((k, type(v), v.hex() if type(v) is float else None, v)
                 for k, v in value.items())


@functools.lru_cache(maxsize=1024)  # a batch states a few distinct pins and values, many times
def _stated_scalars(key: str, items: tuple) -> Any:
    """A stated layer's mapping of scalar values, read by its row (:func:`read_stated`)."""
    return read_stated({k: v for k, _, _, v in items}, layers.STATED_BY_KEY[key])


def with_terms(run: Run, **terms: Any) -> Run | Refusal:
    """``run`` with some of its terms given anew (a deployment pool's method and K), each
    checked by its row's rule: ``invalid_request`` naming every one that breaks it."""
    rows = {row.name: row for row in layers.INPUTS if row.name in terms}
    read: dict[str, Any] = {}
    problems: list[str] = []
    for name, value in terms.items():
        try:
            read[_RUN_FIELD.get(name, name)] = rows[name].read(value)  # type: ignore[misc]
        except Problem as problem:
            problems.append(str(problem))
    if problems:
        return Refusal(R.INVALID_REQUEST, "; ".join(problems))
    return replace(run, **read)


def read_stated(obj: Any, row: layers.Input) -> Any:
    """What a layer's input states (a mapping or the schema's dataclass), checked by the row's
    schema: its value (None when it states nothing), or the refusal ``invalid_value``."""
    if obj is None:
        return None
    schema = row.schema
    assert schema is not None and row.layer is not None  # a stating row has both
    ck = Checker("")
    found = schema.load(ck, as_document(obj, schema), row.key)
    return found if found is not None else invalid_value(row.layer, ck.findings)


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
