"""Workload and scenario files: the two YAML documents of a wider system that state a run's
terms and layers (``--workload``, ``--scenario``).

A workload file states the workload's terms (``thinking``, ``category``) and may state its own
``acceptance`` (an inline value); a scenario file's top-level ``acceptance`` is the pin. Their
other keys are ignored, except that a key one typo away from a known one draws a warning (a
misspelt ``categroy`` would otherwise drop the term in silence). Problems carry
``FILE:LINE:COL: PATH`` from the loader's positions. An inline value or pin that breaks the
spec's rules is the refusal ``invalid_value``; a file that cannot be read, or whose terms have
the wrong type, is invalid input (exit 1 with findings).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from registry_db.errors import Finding, InvalidInput
from registry_db.inputs.inline import INLINE_VALUE, PIN, invalid_value
from registry_db.inputs.readers import THINKING, category_check
from registry_db.inputs.schema import Checker, Field, Map
from registry_db.model import WORKLOAD_KEYS, InlineValue, Pin


@dataclass(frozen=True)
class Workload:
    """A workload file's terms: thinking mode, category and its own stated acceptance."""

    thinking: str | None
    category: str | None
    acceptance: InlineValue | None
    warnings: tuple[Finding, ...] = ()


WORKLOAD = Map("a workload", keys=WORKLOAD_KEYS, unknown="near_miss", steps=(
    Field("thinking", "string", checks=(THINKING,)),
    Field("category", "string", limit="category", checks=(category_check("category"),)),
), also=({"properties": {"acceptance": {"anyOf": [{"type": "null"}, INLINE_VALUE]}}},))
SCENARIO = Map("a scenario", keys=("acceptance",), unknown="near_miss", steps=(),
               also=({"required": ["acceptance"],  # load_scenario's missing_acceptance
                      "properties": {"acceptance": {"anyOf": [{"type": "null"}, PIN]}}},))


def load_workload(path: str | os.PathLike) -> Workload:
    """Read a workload file; raise :class:`InvalidInput` (findings) or, for its value,
    :class:`~registry_db.errors.ResolutionRefused` (``invalid_value``)."""
    doc, ck = _load(path, WORKLOAD)
    acceptance = _stated(ck, doc, INLINE_VALUE, "workload")
    return Workload(doc.get("thinking"), doc.get("category"), acceptance, tuple(ck.findings))


def load_scenario(path: str | os.PathLike) -> tuple[Pin | None, tuple[Finding, ...]]:
    """A scenario file's ``acceptance`` pin (None when it states ``acceptance: null``) and
    warnings. A file without a top-level ``acceptance`` key is invalid input: the run would
    otherwise resolve from the registry as if no scenario had been given (a pin written at the
    top level, ``profiles: SET``, would be dropped in silence)."""
    doc, ck = _load(path, SCENARIO)
    if "acceptance" not in doc:
        stray = [k for k in ("profiles", "fallback_category", "value") if k in doc]
        names = ", ".join(f"`{k}:`" for k in stray)
        hint = (f"; {names} {'goes' if len(stray) == 1 else 'go'} under it "
                f"(`acceptance: {{{stray[0]}: ...}}`)" if stray
                else "; the scenario's pin is `acceptance: {profiles: SET}` (spec)")
        raise InvalidInput([*ck.findings, Finding(
            str(path), 1, 1, "acceptance", "missing_acceptance",
            f"the scenario has no top-level `acceptance:` key{hint}")])
    return _stated(ck, doc, PIN, "scenario"), tuple(ck.findings)


def _load(path: str | os.PathLike, schema: Map) -> tuple[dict, Checker]:
    from registry_db.yaml.load import load_file

    ck = Checker(str(path))
    doc = load_file(path)
    if schema.read(ck, doc, "") is None or ck.errors:
        raise InvalidInput(ck.findings)
    return doc, ck


def _stated(ck: Checker, doc: dict, schema: Map, layer: str) -> Any:
    from registry_db.errors import ResolutionRefused

    if doc.get("acceptance") is None:
        return None
    found = Checker(ck.file)
    value = schema.load(found, doc["acceptance"], "acceptance")
    if value is None:
        raise ResolutionRefused(invalid_value(layer, found.findings))
    return value
