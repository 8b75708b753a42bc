"""``--batch`` lines: one run per line, read into a checked :class:`~registry_db.inputs.run.Run`
(or a :class:`DeploymentRun`), or the refusal that answers the line.

A line is a JSON object whose keys are the batch keys of :data:`registry_db.inputs.layers.INPUTS`
(``id``, any JSON value, is the caller's name for the line). A line that is not one (bad JSON, a
missing, unknown, duplicated or mistyped key) is answered ``invalid_request``; the line's run is
then checked by :func:`registry_db.inputs.run.check`, as every run is. Blank lines are skipped.

:class:`~registry_db.inputs.run.Request` is re-exported here, where callers have found it.
Workload and scenario files, which state some of a run's inputs, are read by
:mod:`registry_db.inputs.run_files`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from registry_db.inputs import layers
from registry_db.inputs.deployment import Deployment, check_deployment
from registry_db.inputs.run import Request, Run, check, check_object, read_stated
from registry_db.inputs.schema import near_key, type_name
from registry_db.model import Refusal
from registry_db.model import RefusalReason as R

__all__ = ["POOL_STANDS_IN", "DeploymentRun", "Request", "batch_lines", "deployment_run_from_json",
           "line_id", "parse_line", "parse_lines", "request_from_json"]


def batch_lines(text: str) -> list[str]:
    """One request per ``\n``-terminated line, nothing else: U+2028, U+0085, ``\x1c`` and the
    other characters ``str.splitlines`` breaks on may stand inside a JSON string, and a lone
    ``\r`` is JSON whitespace; splitting on them would pair answers with the wrong lines."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


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


def parse_line(line: str, number: int, fast: bool = True) -> Run | DeploymentRun | Refusal:
    """One ``--batch`` line as a checked run (a :class:`DeploymentRun` when it carries a
    ``"deployment"``), or the refusal that answers it (``invalid_request`` naming the line).
    ``fast``: a line of the common shape is read by :func:`~registry_db.inputs.run.check_object`
    (the same run; a test compares both ways), anything else the plain way."""
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
    found: Run | DeploymentRun | Refusal | None
    if type(obj) is dict and obj.get("deployment") is not None:
        found = deployment_run_from_json(obj)
    else:
        if type(obj) is dict:
            obj.pop("deployment", None)  # null is "not given", as for every key
            found = check_object(obj) if fast else None
            if found is not None:
                return found
        request = _decoded(obj)
        found = request if isinstance(request, Refusal) else check(request)
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


def parse_lines(lines: Iterable[str | Refusal], start: int = 1
                ) -> list[Run | DeploymentRun | Refusal]:
    """Every line of a ``--batch`` input that is not blank, in order (the first is line
    ``start``); blank lines (spaces only, or nothing) get no answer, and refusals keep the
    input's line numbers. A line may be the refusal that answers it already (a line that is
    not UTF-8, :func:`registry_db.inputs.batch_stream.decode_line`)."""
    # A line repeated word for word is the same run: a trace that asks for one configuration
    # again and again is read once per distinct line. Only runs are shared: a refusal names
    # its line.
    read: dict[str, Run | DeploymentRun] = {}
    out: list[Run | DeploymentRun | Refusal] = []
    for n, line in enumerate(lines, start):
        if type(line) is Refusal:
            out.append(line)
            continue
        found = read.get(line)  # type: ignore[arg-type]
        if found is None:
            if not line.strip():  # type: ignore[union-attr]
                continue
            parsed = parse_line(line, n)  # type: ignore[arg-type]
            if isinstance(parsed, Refusal):
                out.append(parsed)
                continue
            found = read[line] = parsed  # type: ignore[index]
        out.append(found)
    return out


def line_id(line: str) -> Any:
    """The ``id`` of a batch line that was refused as it was read (``invalid_request``,
    ``invalid_value``), when the line is still a JSON object holding one (None otherwise), so
    that its answer can echo it too."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    found = obj.get("id") if isinstance(obj, dict) else None
    # An id that UTF-8 cannot carry (a lone surrogate escape) cannot be echoed: it is left out.
    return found if "\\u" not in line or _plain_text(found) else None


def _invalid(number: int, message: str) -> Refusal:
    return Refusal(R.INVALID_REQUEST, f"line {number}: {message}")


def request_from_json(obj: Any) -> Request | Refusal:
    """A request from a decoded ``--batch`` object, or the refusal that answers it:
    ``invalid_request`` when a key is missing, unknown or mistyped, ``invalid_value`` when a
    stated value or pin breaks the spec's rules (its mapping becomes the schema's dataclass).
    The run's terms are checked when the request is (:func:`~registry_db.inputs.run.check`)."""
    request = _decoded(obj)
    if type(request) is Refusal:
        return request
    values = {}
    for row in layers.INPUTS:
        given = getattr(request, row.name)
        if row.layer is not None and given is not None:
            found = read_stated(given, row)
            if type(found) is Refusal:
                return found
            values[row.name] = found
    return replace(request, **values) if values else request


def _decoded(obj: Any) -> Request | Refusal:
    """A decoded batch object as a request, its values as the line holds them: every key
    known, each of its JSON type (null is "not given"), every required key given; else
    ``invalid_request`` naming every key that is not."""
    problems = _malformed(obj)
    if problems:
        return Refusal(R.INVALID_REQUEST, "; ".join(problems))
    values = {}
    for row in layers.INPUTS:
        value = obj.get(row.key)
        values[row.name] = value if value is None or row.from_json is None else row.from_json(value)
    return Request(**values)


def _malformed(obj: Any) -> list[str]:
    """What makes ``obj`` no batch request: each key that is missing, unknown or mistyped, or
    that it is not a JSON object at all (empty: nothing)."""
    if not isinstance(obj, dict):
        return [f"a request is a JSON object, got {type_name(obj)}"]
    problems = [near_key(key, layers.KEYS) for key in obj if key not in layers.BATCH_KEYS]
    for row in layers.INPUTS:
        value = obj.get(row.key)
        if value is None:
            if row.required:
                problems.append(f"{row.key} is required ({row.json})")
        elif not row.json_ok(value):
            problems.append(f"{row.key} must be {'an' if row.json[0] in 'aeiou' else 'a'} "
                            f"{row.json}, got {type_name(value)}")
    return problems


@dataclass(frozen=True, slots=True)
class DeploymentRun:
    """A run served by a deployment: ``request`` is resolved once per pool that speculates,
    at the pool's method and K (:mod:`registry_db.resolve.deployment`); until then its own
    method and K are :data:`POOL_STANDS_IN`'s, which nothing resolves. A batch line's request
    is a checked :class:`~registry_db.inputs.run.Run`; a library caller's may be either."""

    request: Request | Run
    deployment: Deployment

    @property
    def id(self) -> Any:
        return self.request.id


#: The method and K of a run whose deployment's pools state them.
POOL_STANDS_IN: dict[str, Any] = {"method": "-", "k": 1}


def deployment_run_from_json(obj: dict[str, Any]) -> DeploymentRun | Refusal:
    """A batch line with a ``"deployment"`` (the registry's deployment format, as a JSON
    object): ``invalid_request`` naming every problem with the deployment (by its key path)
    and with the line's other keys; the pools state the method and K, so the line may not."""
    problems = [f"{key} is the pools' (each speculating pool's engine.speculative states its "
                f"method and K); drop {key!r} from a line with a deployment"
                for key in POOL_STANDS_IN if obj.get(key) is not None]
    deployment, findings = check_deployment(obj["deployment"], "", "deployment")
    problems.extend(f"{f.path}: {f.message}" for f in findings if f.is_error)
    request = _decoded({**{k: v for k, v in obj.items() if k != "deployment"},
                        **POOL_STANDS_IN})
    found = request if isinstance(request, Refusal) else check(request)
    if type(found) is Refusal and found.reason == R.INVALID_REQUEST:
        problems.append(found.message)
    if problems:
        return Refusal(R.INVALID_REQUEST, "; ".join(problems))
    if type(found) is Refusal:
        return found
    assert deployment is not None and type(found) is Run
    return DeploymentRun(found, deployment)
