"""``ingest inferencex --map MAP.yaml``: the catalog's names for the source's, and per file what
the file does not say.

```yaml
models:  {SOURCE-SPELLING: CATALOG-MODEL}
methods: {FILE.yaml: METHOD}
files:   {FILE.yaml: {model, method, category, hardware, engine_image, tp, benchmark, prompts,
                      sampling: {temperature, top_p, top_k, max_tokens,
                                 thinking_on: {...}, thinking_off: {...}}}}
```

A mode's own sampling (``thinking_off: {temperature: 0.7}``) wins over the entry's shared one for
that mode's profiles, as the header's own lines do.

The map is a schema table like every input (:mod:`registry_db.inputs.schema`): the provenance
and sampling rows are the profile set's own, so a value the spec refuses is refused here with the
same message, at the map's line. :func:`user_facts` turns the flags and a file's entry into
:class:`~registry_db.sources.inferencex.facts.Fact` values that name where they were given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from registry_db.errors import InvalidInput
from registry_db.inputs.profile_set import PROVENANCE, SAMPLING
from registry_db.inputs.readers import category_check
from registry_db.inputs.schema import Checker, Field, Map, join
from registry_db.sources.inferencex.facts import Fact, Origin
from registry_db.yaml.load import key_pos, load_file, pos

Where = tuple[int, int]


def _rows(table: Map) -> dict[str, Field]:
    return {step.key: step for step in table.steps if isinstance(step, Field)}


_PROVENANCE, _SAMPLING = _rows(PROVENANCE), _rows(SAMPLING)
#: A file's entry may give part of the sampling (the header may state the rest).
MODE_SAMPLING = Map("sampling", steps=(
    dataclasses.replace(_SAMPLING["temperature"], required=False),
    _SAMPLING["top_p"], _SAMPLING["top_k"], _SAMPLING["max_tokens"]))
#: The modes' own sampling, keyed as the curves' bodies name the modes.
MODES = {"thinking_on": "on", "thinking_off": "off"}


def _read_sampling(table: Map) -> Any:
    def read(ck: Checker, raw: dict, m: dict, sub: str, got: dict) -> dict | None:
        values = table.read(ck, raw, sub)
        return None if values is None else {k: v for k, v in values.items() if v is not None}
    return read


ENTRY_SAMPLING = Map("sampling", steps=(
    *MODE_SAMPLING.steps,
    *(Field(key, "mapping", content=_read_sampling(MODE_SAMPLING)) for key in MODES)))
_sampling = _read_sampling(ENTRY_SAMPLING)


FILE_ENTRY = Map("a file's entry", steps=(
    Field("model", "string", blank="empty_value", limit="model"),
    Field("method", "string", blank="empty_value", limit="speculative_method"),
    Field("category", "string", limit="category", checks=(category_check("category"),)),
    _PROVENANCE["hardware"], _PROVENANCE["engine_image"], _PROVENANCE["benchmark"],
    _PROVENANCE["tp"], _PROVENANCE["prompts"],
    Field("sampling", "mapping", content=_sampling),
))


def _names(ck: Checker, raw: dict, m: dict, sub: str, got: dict) -> dict[str, str]:
    """A mapping of names to non-empty names."""
    out = {}
    for key, target in raw.items():
        if not isinstance(key, str) or not isinstance(target, str) or not target.strip():
            ck.error(pos(raw, key), join(sub, str(key)), "wrong_type",
                     f"{sub}: {key!r} must map a name to a non-empty name")
        else:
            out[key] = target
    return out


def _files(ck: Checker, raw: dict, m: dict, sub: str, got: dict) -> dict[str, dict]:
    """Each file's entry: ``{field: (value, where)}``, sampling's fields as ``sampling.NAME``."""
    out = {}
    for key, entry in raw.items():
        read = FILE_ENTRY.read(ck, entry, join(sub, str(key)), pos(raw, key))
        if read is None or not isinstance(key, str):
            continue
        fields: dict[str, tuple[Any, Where]] = {}
        for name, value in read.items():
            if name == "sampling" and value is not None:
                for k, v in value.items():
                    if k in MODES:  # a mode's own: sampling.NAME/thinking_MODE
                        fields.update((f"sampling.{n}/{k}", (w, pos(entry["sampling"][k], n)))
                                      for n, w in v.items())
                    else:
                        fields[f"sampling.{k}"] = (v, pos(entry["sampling"], k))
            elif value is not None:
                fields[name] = (value, pos(entry, name))
        out[key] = fields
    return out


MAP_FILE = Map("a map file", steps=(
    Field("models", "mapping", content=_names),
    Field("methods", "mapping", content=_names),
    Field("files", "mapping", content=_files),
))


@dataclass(frozen=True)
class CurveMap:
    """``--map``: source model spellings to catalog names, a method per file, and per file the
    facts its header does not state."""

    models: Mapping[str, str] = field(default_factory=dict)
    #: input file name (``minimaxm3_eagle3_gqa.yaml``) -> the method its profiles get
    methods: Mapping[str, str] = field(default_factory=dict)
    #: input file name -> {field: (value, where the entry writes it)}
    files: Mapping[str, Mapping[str, tuple[Any, Where]]] = field(default_factory=dict)
    file: str | None = None
    #: (section, key) -> where the entry is written, so that an unused one can be pointed at
    where: Mapping[tuple[str, str], Where] = field(default_factory=dict)

    def method(self, name: str) -> tuple[str, tuple[str, str]] | None:
        """The method the map gives file ``name``, and the entry that gives it."""
        entry = self.files.get(name, {})
        if "method" in entry:
            return entry["method"][0], ("files", name)
        if name in self.methods:
            return self.methods[name], ("methods", name)
        return None

    def model(self, name: str | None, source_model: str | None) -> tuple[str, tuple[str, str]
                                                                          ] | None:
        """The catalog model of file ``name`` (its entry's) or of the source spelling."""
        entry = self.files.get(name or "", {})
        if "model" in entry:
            return entry["model"][0], ("files", name or "")
        if source_model is not None and source_model in self.models:
            return self.models[source_model], ("models", source_model)
        return None

    def facts(self, name: str) -> list[Fact]:
        """File ``name``'s entry as facts (fields as :data:`~.facts.FIELDS` names
        them), each naming the map's line."""
        out = []
        for key, (value, (line, column)) in self.files.get(name, {}).items():
            if key in ("model", "method"):
                continue
            field_, _, mode = key.partition("/")
            shown = (f"files.{name}.sampling.{mode}.{field_.split('.', 1)[1]}" if mode
                     else f"files.{name}.{key}")
            out.append(Fact(field_, value, Origin(self.file or "", line, column,
                                                  f"{shown} in {self.file}"),
                            MODES[mode] if mode else None))
        return out


def load_map(path: str) -> CurveMap:
    """Read a ``--map`` file; raises :class:`InvalidInput` with every problem of the file."""
    doc = load_file(path, path)
    ck = Checker(path)
    got = MAP_FILE.read(ck, doc, "", (1, 1))
    if got is None or ck.errors:
        raise InvalidInput(ck.findings)
    models, methods, files = got["models"] or {}, got["methods"] or {}, got["files"] or {}
    where: dict[tuple[str, str], Where] = {}
    for section in ("models", "methods", "files"):
        for key in (got[section] or {}):
            where[(section, key)] = key_pos(doc[section], key)
    for name, method in methods.items():
        other = files.get(name, {}).get("method", (None,))[0]
        if other is not None and other != method:
            line, column = pos(doc["files"][name], "method")
            ck.error((line, column), f"files.{name}.method", "map_disagrees",
                     f"files.{name}.method {other!r} differs from methods.{name} {method!r} "
                     f"(line {where[('methods', name)][0]}); give the method once")
    if ck.errors:
        raise InvalidInput(ck.findings)
    return CurveMap(models, methods, files, path, where)


#: What the flags give, by field; the flag's name is what messages say.
FLAGS = {"hardware": "--hardware", "engine_image": "--engine-image", "tp": "--tp",
         "benchmark": "--benchmark", "prompts": "--prompts", "category": "--category"}


def user_facts(curve_map: CurveMap, name: str, flags: Mapping[str, Any]) -> dict[str, Fact]:
    """What the user says of file ``name``: its map entry, else the flags (the entry is the
    more particular, so it wins over a flag given for every file)."""
    out = {f: Fact(f, v, Origin("", 0, 0, f"{FLAGS[f]} {v}")) for f, v in flags.items()
           if v is not None}
    out.update({user_key(f.name, f.mode): f for f in curve_map.facts(name)})
    return out


def user_key(name: str, mode: str | None) -> str:
    """How :func:`user_facts` keys a field: its name, with ``/thinking_MODE`` for one mode's."""
    return name if mode is None else f"{name}/thinking_{mode}"
