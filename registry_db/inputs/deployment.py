"""Deployment files: the pools a run is served by, and the speculation each one runs.

The spec's last check ("with a deployment in the bundle, every inline value must name the K of
each pool that speculates; when no pool speculates, a stated value draws a warning") needs a
deployment, and the spec shows no format for one, so this is the registry's own (README:
"Deployments"). A deployment lists its pools; a pool has a ``name`` and, when it speculates,
``engine.speculative.method`` and ``engine.speculative.num_spec_tokens``. One pool may be
written on its own, without ``pools:``:

    pools:
      - name: prefill              # no engine.speculative: this pool does not speculate
      - name: decode
        engine:
          image: vllm/vllm-openai:v0.31.0   # other engine keys describe the engine; ignored
          speculative: {method: dspark, num_spec_tokens: 5}

Checked with the inputs layer's :class:`~registry_db.inputs.schema.Checker` and its
:class:`~registry_db.inputs.schema.Field` rows (one per key, below), so a problem is a
finding with ``FILE:LINE:COL: PATH`` (all of them at once) from a YAML file, and with the key
path alone from a ``--batch`` line's ``"deployment"`` object. Whether a stated value names each
speculating pool's K is the resolver's check (``k_mismatch``), not this module's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from registry_db.errors import Finding, InvalidInput
from registry_db.inputs.schema import Checker, Field, join, name_check
from registry_db.yaml.nodes import mark, pos

#: The keys of each level, as the messages name them.
DEPLOYMENT_KEYS = ("pools",)
POOL_KEYS = ("name", "engine")
SPECULATIVE_KEYS = ("method", "num_spec_tokens")
#: The rows of each key (the schema's own reader reports types, blanks and missing keys).
_POOLS = Field("pools", "list")
_NAME = Field("name", "string", required=True, blank="empty_value",
              checks=(name_check("the pool's name"),), missing_message=(
    "name is required; give the pool a name (a string), which the answer lists it by"))
_NAME_OPTIONAL = Field("name", "string", blank="empty_value",
                       checks=(name_check("the pool's name"),))
_ENGINE = Field("engine", "mapping")
_SPECULATIVE = Field("speculative", "mapping")
_METHOD = Field("method", "string", required=True, blank="empty_value",
                checks=(name_check("method"),))
_K = Field("num_spec_tokens", "integer", required=True)
#: The rows by key, for the published JSON Schema (:mod:`registry_db.inputs.json_schema`).
ROWS = {"pools": _POOLS, "name": _NAME, "name_optional": _NAME_OPTIONAL, "engine": _ENGINE,
        "speculative": _SPECULATIVE, "method": _METHOD, "num_spec_tokens": _K}
#: The pool name of a deployment written as one pool without a ``name``.
DEFAULT_POOL = "default"


@dataclass(frozen=True, slots=True)
class Pool:
    """One pool of a deployment; ``method`` and ``num_spec_tokens`` are None when it does not
    speculate."""

    name: str
    method: str | None = None
    num_spec_tokens: int | None = None

    @property
    def speculates(self) -> bool:
        return self.num_spec_tokens is not None


@dataclass(frozen=True, slots=True)
class Deployment:
    """The pools a run is served by, in the file's order."""

    pools: tuple[Pool, ...]

    @property
    def speculating(self) -> tuple[Pool, ...]:
        """The pools that speculate (the resolver answers once for each)."""
        return tuple(p for p in self.pools if p.speculates)


def load_deployment(path: str | os.PathLike) -> Deployment:
    """Read a deployment file; raise :class:`InvalidInput` with every finding."""
    from registry_db.yaml.load import load_file

    file = str(path)
    deployment, findings = check_deployment(load_file(path), file)
    if deployment is None:
        raise InvalidInput(findings)
    return deployment


def check_deployment(doc: Any, file: str, path: str = "") -> tuple[Deployment | None,
                                                                    list[Finding]]:
    """Check a deployment found at key path ``path`` of ``file`` (``""``: the whole document).

    The deployment comes back only when nothing is wrong.
    """
    ck = Checker(file)
    if not ck.mapping(doc, mark(doc), path, "a deployment"):
        return None, ck.findings
    if "pools" in doc:
        ck.unknown_keys(doc, DEPLOYMENT_KEYS, path)
        pools = _pools(ck, doc, path)
    else:  # one pool, written without `pools:`
        pool = _pool(ck, doc, path, default_name=DEFAULT_POOL)
        pools = [] if pool is None else [pool]
    if ck.errors:
        return None, ck.findings
    return Deployment(tuple(pools)), ck.findings


def _pools(ck: Checker, doc: dict, path: str) -> list[Pool]:
    items = ck.read(_POOLS, doc, path, {})
    if items is None:
        return []
    sub = join(path, "pools")
    if not items:
        ck.error(pos(doc, "pools"), sub, "no_pools",
                 "pools is empty; list at least one pool, or write the one pool on its own")
        return []
    pools: list[Pool] = []
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        pool = _pool(ck, item, join(sub, i), where=pos(items, i))
        if pool is None:
            continue
        if pool.name in first:
            ck.error(pos(item, "name"), join(join(sub, i), "name"), "duplicate_pool",
                     f"pool name {pool.name!r} is taken by pools[{first[pool.name]}]; each pool "
                     "needs its own name, which the answer lists it by")
            continue
        first[pool.name] = i
        pools.append(pool)
    return pools


def _pool(ck: Checker, doc: Any, path: str, *, where: tuple[int, int] | None = None,
          default_name: str | None = None) -> Pool | None:
    """One pool; None after reporting what is wrong with it."""
    before = ck.errors
    if not ck.mapping(doc, where or mark(doc), path, "a pool"):
        return None
    ck.unknown_keys(doc, POOL_KEYS, path)
    name = ck.read(_NAME if default_name is None else _NAME_OPTIONAL, doc, path, {})
    if name is None and "name" not in doc:
        name = default_name
    method = k = None
    engine = ck.read(_ENGINE, doc, path, {})
    if engine is not None and engine.get("speculative") is not None:
        # Only the speculative block bears on acceptance; the engine's other keys are its own.
        epath = join(join(path, "engine"), "speculative")
        spec = ck.read(_SPECULATIVE, engine, join(path, "engine"), {})
        if spec is not None:
            ck.unknown_keys(spec, SPECULATIVE_KEYS, epath)
            method = ck.read(_METHOD, spec, epath, {})
            k = ck.read(_K, spec, epath, {})
            if k is not None and k < 1:
                ck.error(pos(spec, "num_spec_tokens"), join(epath, "num_spec_tokens"), "bad_k",
                         f"num_spec_tokens is {k}; a pool that speculates proposes at least 1 "
                         "token per step (leave out engine.speculative if it does not)")
    if ck.errors > before or name is None:
        return None
    return Pool(name, method, k)
