"""What a run states and which layer wins, as two ordered tables.

:data:`INPUTS` has one row per thing a run states: the :class:`~registry_db.inputs.run.Request`
field, its ``--batch`` key and JSON type, whether it is required, the rule that reads it (a term
of the run: ``invalid_request``) or the schema of what it states (a layer's value or pin:
``invalid_value``), and the ``registry resolve`` flags that give it. :data:`LAYERS` lists the
layers lowest to highest (spec: Resolution): for each, the input that states it, the inline value
it states and the set it names. Everything else follows from the two tables: the batch line's
keys and types, the checked run (:func:`registry_db.inputs.run.check`, which reads both tables
as they stand), the command's options and the usage rules between them, the resolver's
precedence (:mod:`registry_db.resolve.plan`).

Adding an input is one :class:`Input` row (and the :class:`Request` field of the same name);
adding a layer is one more :class:`LayerRow` whose input states it. docs/architecture.md says
where each piece goes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from registry_db.inputs.as_of import read_as_of
from registry_db.inputs.inline import INLINE_VALUE, PIN
from registry_db.inputs.schema import (
    Map,
    Problem,
    category_problem,
    is_int,
    k_problem,
    thinking_problem,
    too_long,
)
from registry_db.model import (
    CATEGORY_RE,
    MAX_K,
    MAX_LENGTH,
    THINKING_MODES,
    InlineValue,
    Layer,
    Pin,
)

# --- the rules of a run's terms: each reads a value into the run's, or raises Problem ------------

def _text(name: str, limit: str, optional: bool = False) -> Callable[[Any], str | None]:
    """A non-empty string within the registry's limit for it (None allowed when optional)."""
    most = MAX_LENGTH[limit]

    def read(value: Any) -> str | None:
        if isinstance(value, str) and value and len(value) <= most:
            return value
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value:
            raise Problem(f"{name} must be a non-empty string, got {value!r}")
        raise Problem(too_long(name, value, limit))
    return read


def _text_keywords(limit: str) -> dict[str, Any]:
    """What :func:`_text` holds a term to, as JSON Schema keywords."""
    return {"minLength": 1, "maxLength": MAX_LENGTH[limit]}


def _k(value: Any) -> int:
    # K is an int, never a bool or a float: 1, 1.0 and True are equal in Python, and only the
    # first is a K, so runs compare equal only when they are the same run.
    if type(value) is int and 1 <= value <= MAX_K:
        return value
    if not is_int(value) or value < 1:
        raise Problem(f"k must be an integer of at least 1, got {value!r}")
    raise Problem(k_problem("k", value))


def _thinking(value: Any) -> str | None:
    problem = None if value is None else thinking_problem(value, term=True)
    if problem is not None:
        raise Problem(problem)
    return value


def _category(value: Any) -> str | None:
    if value is None:
        return None
    problem = category_problem("category", value) or too_long("category", value, "category")
    if problem is not None:
        raise Problem(problem)
    return value


def _sets(value: Any) -> tuple[str, ...] | None:
    """The names of the sets that count as the registry, distinct and sorted (the run's scope)."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(s, str) and s for s in value):
        raise Problem(f"sets must be a non-empty list of set names, got {value!r}")
    return tuple(sorted(set(value)))


# --- the tables ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Flag:
    """One option of ``registry resolve``. ``kind`` says how the command reads it: ``text``,
    ``category``, ``k``, ``thinking``, ``number``, ``rates``, ``time`` or ``file`` (a file that
    states the inputs named in ``states``, read by ``load``)."""

    decl: str
    help: str
    kind: str = "text"
    metavar: str | None = None
    dest: str | None = None
    multiple: bool = False
    #: Whether its value is a stored set's name (the shell completes it from the registry).
    names_a_set: bool = False
    states: tuple[str, ...] = ()
    load: Callable[[str], tuple[dict[str, Any], tuple[Any, ...]]] | None = None

    @property
    def name(self) -> str:
        """The parameter's name in the command (``--fallback-category``: ``fallback_category``)."""
        return self.dest or self.decl.lstrip("-").replace("-", "_")


#: The Python type a JSON value of each batch type decodes to (``k: true`` is a bool, not an int).
_JSON_PY = {"string": str, "integer": int, "object": dict, "list of strings": list,
            "any JSON value": object}
#: Each batch type as JSON Schema says it (the published batch-line schema).
JSON_SCHEMA_TYPES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"}, "integer": {"type": "integer"}, "object": {"type": "object"},
    "list of strings": {"type": "array", "items": {"type": "string"}}, "any JSON value": {}}


@dataclass(frozen=True)
class Input:
    """One thing a run states: a :class:`Request` field, how a batch line and the command line
    give it, and how it is checked (``read`` for a term, ``schema`` for a layer's value).

    ``read`` turns a term's value into the checked run's (:class:`~registry_db.inputs.run.Run`)
    or raises :class:`~registry_db.inputs.schema.Problem` with the rule's one message."""

    name: str
    key: str
    json: str
    required: bool = False
    read: Callable[[Any], Any] | None = None
    layer: Layer | None = None
    schema: Map | None = None
    flags: tuple[Flag, ...] = ()
    from_flags: Callable[[dict[str, Any]], Any] = lambda run: None
    #: How a batch line's value becomes the field's (None: as it is).
    from_json: Callable[[Any], Any] | None = None
    #: What ``read`` holds a term to, as JSON Schema keywords (the published batch-line schema).
    keywords: dict[str, Any] = field(default_factory=dict)

    def json_ok(self, value: Any) -> bool:
        """Whether a decoded batch value has this input's JSON type."""
        if self.json == "integer":
            return is_int(value)
        if self.json == "list of strings":
            return isinstance(value, list) and all(isinstance(v, str) for v in value)
        if self.json == "any JSON value":
            return True
        return isinstance(value, _JSON_PY[self.json])


def _load_workload(path: str) -> tuple[dict[str, Any], tuple[Any, ...]]:
    from registry_db.inputs.run_files import load_workload

    w = load_workload(path)
    return {"thinking": w.thinking, "category": w.category, "workload": w.acceptance}, w.warnings


def _load_scenario(path: str) -> tuple[dict[str, Any], tuple[Any, ...]]:
    from registry_db.inputs.run_files import load_scenario

    pin, warnings = load_scenario(path)
    return {"pin": pin}, warnings


def _pin_flags(run: dict[str, Any]) -> Pin | None:
    if run["profiles"] is None and run["fallback_category"] is None:
        return None
    return Pin(profiles=run["profiles"], fallback_category=run["fallback_category"])


_CLI_VALUE = ("acceptance_length", "acceptance_rate", "per_position_rates")


def _cli_flags(run: dict[str, Any]) -> InlineValue | None:
    stated = {n: run[n] for n in _CLI_VALUE if run[n] is not None}
    if not stated:
        return None
    rates = stated.pop("per_position_rates", None)
    return InlineValue(num_spec_tokens=run["k"], per_position_rates=(
        None if rates is None else tuple(rates)), **stated)


INPUTS: tuple[Input, ...] = (
    Input("model", "model", "string", required=True, read=_text("model", "model"),
          keywords=_text_keywords("model"),
          flags=(Flag("--model", "The catalog model name."),),
          from_flags=lambda run: run["model"]),
    Input("method", "method", "string", required=True,
          read=_text("method", "speculative_method"),
          keywords=_text_keywords("speculative_method"),
          flags=(Flag("--method", "The speculative method, e.g. dspark, mtp."),),
          from_flags=lambda run: run["method"]),
    Input("k", "k", "integer", required=True, read=_k,
          keywords={"minimum": 1, "maximum": MAX_K},
          flags=(Flag("--k", "K, the speculative tokens per step.", kind="k"),),
          from_flags=lambda run: run["k"]),
    Input("thinking", "thinking", "string", read=_thinking,
          keywords={"enum": list(THINKING_MODES)},
          flags=(Flag("--thinking", "The workload's thinking mode.", kind="thinking"),),
          from_flags=lambda run: run["thinking"]),
    Input("category", "category", "string", read=_category,
          keywords={"pattern": CATEGORY_RE.pattern, "maxLength": MAX_LENGTH["category"]},
          flags=(Flag("--category", "The workload's category, e.g. coding.", kind="category"),),
          from_flags=lambda run: run["category"]),
    Input("workload", "acceptance", "object", layer=Layer.WORKLOAD, schema=INLINE_VALUE,
          flags=(Flag("--workload", "Workload YAML: thinking, category, acceptance (an inline "
                      "value).", kind="file", metavar="FILE",
                      states=("thinking", "category", "workload"), load=_load_workload),)),
    Input("pin", "pin", "object", layer=Layer.SCENARIO, schema=PIN,
          flags=(Flag("--profiles", "The scenario's pin: look the profile up in this set "
                      "instead.", metavar="SET", names_a_set=True),
                 Flag("--fallback-category", "The scenario's pin: the category to use when the "
                      "workload's has no curve.", kind="category", metavar="C"),
                 Flag("--scenario", "Scenario YAML with a top-level `acceptance:` pin.",
                      kind="file", metavar="FILE", states=("pin",), load=_load_scenario)),
          from_flags=_pin_flags),
    Input("cli", "cli", "object", layer=Layer.CLI, schema=INLINE_VALUE,
          flags=(Flag("--acceptance-length", "The command line's AL, at K.", kind="number",
                      metavar="X"),
                 Flag("--acceptance-rate", "The command line's acceptance rate (AL - 1) / K, "
                      "at K.", kind="number", metavar="R"),
                 Flag("--per-position-rates", "The command line's K per-position rates.",
                      kind="rates", metavar="R1,R2,...")),
          from_flags=_cli_flags),
    Input("hardware", "hardware", "string", read=_text("hardware", "hardware", optional=True),
          keywords=_text_keywords("hardware"),
          flags=(Flag("--hardware", "The run's chip, e.g. b300.", metavar="CHIP"),),
          from_flags=lambda run: run["hardware"]),
    Input("sets", "sets", "list of strings", read=_sets,
          keywords={"minItems": 1, "items": {"type": "string", "minLength": 1}},
          flags=(Flag("--set", "A set that counts as the registry (repeat; default: every "
                      "set).", metavar="NAME", dest="sets", multiple=True, names_a_set=True),),
          from_flags=lambda run: tuple(run["sets"]) or None,
          from_json=tuple),
    # The registry as it stood at a moment (ISO 8601; no zone: UTC); None: as it stands now.
    Input("as_of", "as_of", "string", read=read_as_of,
          flags=(Flag("--as-of", "Resolve against the registry as it stood at this time "
                      "(ISO 8601, e.g. 2026-11-30T12:00:00Z; no zone means UTC) or at this "
                      "label's (registry labels).",
                      kind="time", metavar="TIME|LABEL"),),
          from_flags=lambda run: run["as_of"]),
    # The caller's name for a batch line, echoed in its answer so that answers can be joined by
    # id as well as by position; the resolver never reads it.
    Input("id", "id", "any JSON value"),
)


@dataclass(frozen=True)
class LayerRow:
    """One layer: the input that states it (None: the registry, stated by the database), the
    inline value it states and the set it names, each read from that input's checked value."""

    layer: Layer
    input: str | None = None
    value: Callable[[Any], InlineValue | None] = lambda stated: stated
    names_set: Callable[[Any], str | None] = lambda stated: None

    @property
    def what(self) -> str:
        """What the layer states, as refusals name it."""
        return "pin" if self.layer == Layer.SCENARIO else "value"


#: The layers, lowest to highest: the highest that states acceptance wins (never merged).
LAYERS: tuple[LayerRow, ...] = (
    LayerRow(Layer.REGISTRY),
    LayerRow(Layer.WORKLOAD, "workload"),
    LayerRow(Layer.SCENARIO, "pin", value=lambda pin: pin.value,
             names_set=lambda pin: pin.profiles),
    LayerRow(Layer.CLI, "cli"),
)

# --- derived -------------------------------------------------------------------------------------

#: The inputs that state a layer's acceptance, by layer, lowest first.
STATED: dict[str, Input] = {row.layer: row for row in INPUTS if row.layer is not None}
#: The same inputs by their batch key.
STATED_BY_KEY: dict[str, Input] = {row.key: row for row in STATED.values()}
#: A batch line's keys in the rows' order.
KEYS: tuple[str, ...] = tuple(row.key for row in INPUTS)
REQUIRED_KEYS: tuple[str, ...] = tuple(row.key for row in INPUTS if row.required)
#: The batch keys and what each must be (the contract's batch line).
BATCH_KEYS: dict[str, tuple[str, bool]] = {row.key: (row.json, row.required) for row in INPUTS}
#: Every option of ``registry resolve`` that describes one run, in the table's order.
FLAGS: tuple[Flag, ...] = tuple(flag for row in INPUTS for flag in row.flags)
