"""A run served by a deployment: one resolution per pool that speculates.

The spec's last check: with a deployment in the bundle, every stated value must name the K of
each pool that speculates, and when no pool speculates a stated value draws a warning. The run
is resolved once per speculating pool, at that pool's method and K (they replace the request's,
which only stand in), and the answer lists the pools by name.

Each run goes through two steps around the resolver: :func:`plan_deployment` checks every
stated value and its K against the pools, and either answers at once (no pool speculates, or a
refusal) or gives the one request per pool; :func:`deployment_answer` puts the pools' answers
together. :func:`resolve_deployment` does both for one run; :func:`resolve_runs` does them for a
``--batch`` whose lines may carry deployments, with every pool of every line in the same one
set-based :func:`~registry_db.resolve.plan.resolve_many`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from registry_db.errors import ResolutionRefused
from registry_db.inputs.deployment import Deployment
from registry_db.inputs.layers import LAYERS
from registry_db.inputs.request import Checks, DeploymentRun, Request
from registry_db.model import Refusal
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Resolution
from registry_db.resolve.plan import resolve_many

if TYPE_CHECKING:  # pragma: no cover
    from registry_db.resolve.plan import Bind

__all__ = ["DeploymentAnswer", "deployment_answer", "plan_deployment", "resolve_deployment",
           "resolve_runs"]


@dataclass(frozen=True, slots=True)
class DeploymentAnswer:
    """A run with a deployment: one resolution per pool that speculates, by pool name, in the
    deployment's order. No pool speculating is an answer too (``speculating`` false)."""

    pools: tuple[tuple[str, Resolution], ...]
    warnings: tuple[str, ...] = ()

    @property
    def speculating(self) -> bool:
        return bool(self.pools)

    def to_json(self) -> dict[str, Any]:
        """``{"speculating", "pools": {NAME: resolution}, "warnings"}``."""
        return {"speculating": self.speculating,
                "pools": {name: r.to_json() for name, r in self.pools},
                "warnings": list(self.warnings)}


def plan_deployment(request: Request, deployment: Deployment, checks: Checks | None = None
                    ) -> list[Request] | DeploymentAnswer | Refusal:
    """The requests to resolve, one per speculating pool in the deployment's order (each
    pool's method and K replace the request's), or the answer already decided.

    Every stated value is checked first (``invalid_value``); then each must name the K of every
    speculating pool (spec: Checks), else ``k_mismatch`` names the pool. When no pool speculates
    the answer says so, with a warning for each layer that stated a value (it is not used).
    """
    checks = Checks() if checks is None else checks
    stated = []
    for row in LAYERS[1:]:
        found = checks.stated(request, row.layer)
        if type(found) is Refusal:
            return found
        value = None if found is None else row.value(found)
        if value is not None:
            stated.append((row.layer, value))
    speculating = deployment.speculating
    if not speculating:
        return DeploymentAnswer((), tuple(
            f"no pool of the deployment speculates; the {layer} layer's stated acceptance is "
            "not used" for layer, _ in stated))
    for pool in speculating:
        for layer, value in stated:
            if value.num_spec_tokens != pool.num_spec_tokens:
                return Refusal(R.K_MISMATCH, (
                    f"pool {pool.name!r} speculates K = {pool.num_spec_tokens}, but the {layer} "
                    f"layer's value was stated for K = {value.num_spec_tokens}; a value is "
                    "refused rather than rescaled"))
    # A speculating pool has both a method and a K.
    return [replace(request, method=str(pool.method), k=int(pool.num_spec_tokens or 0))
            for pool in speculating]


def deployment_answer(deployment: Deployment, answers: Sequence[Resolution | Refusal]
                      ) -> DeploymentAnswer | Refusal:
    """The speculating pools' answers (in the deployment's order) as the run's answer; a
    refusal for one pool refuses the run, naming the pool."""
    pools: list[tuple[str, Resolution]] = []
    for pool, answer in zip(deployment.speculating, answers, strict=True):
        if isinstance(answer, Refusal):
            return Refusal(answer.reason, f"pool {pool.name!r}: {answer.message}")
        pools.append((pool.name, answer))
    return DeploymentAnswer(tuple(pools))


def resolve_deployment(bind: Bind, request: Request, deployment: Deployment) -> DeploymentAnswer:
    """Resolve ``request`` once for each pool of ``deployment`` that speculates; raise
    :class:`~registry_db.errors.ResolutionRefused` when the run is refused (``k_mismatch``
    names the pool whose K a stated value misses; any pool's refusal names its pool)."""
    planned = plan_deployment(request, deployment)
    if isinstance(planned, list):
        planned = deployment_answer(deployment, resolve_many(bind, planned))
    if isinstance(planned, Refusal):
        raise ResolutionRefused(planned)
    return planned


def resolve_runs(bind: Bind, runs: Sequence[Request | DeploymentRun]
                 ) -> list[Resolution | Refusal | DeploymentAnswer]:
    """:func:`~registry_db.resolve.plan.resolve_many` for runs of which some carry a
    deployment (a ``--batch`` line's ``"deployment"``): one answer per run, in order, each
    what the run alone would get, and every pool of every run in the same set-based lookup."""
    if all(type(run) is Request for run in runs):
        return list(resolve_many(bind, runs))  # type: ignore[arg-type]
    checks = Checks()
    requests: list[Request] = []
    # Per run: where its requests start and end in ``requests``, or its answer already.
    slots: list[tuple[int, int] | DeploymentAnswer | Refusal] = []
    for run in runs:
        if type(run) is DeploymentRun:
            planned = plan_deployment(run.request, run.deployment, checks)
            if isinstance(planned, list):
                slots.append((len(requests), len(requests) + len(planned)))
                requests.extend(planned)
            else:
                slots.append(planned)
        else:
            slots.append((len(requests), len(requests) + 1))
            requests.append(run)  # type: ignore[arg-type]
    answers = resolve_many(bind, requests)
    out: list[Resolution | Refusal | DeploymentAnswer] = []
    for run, slot in zip(runs, slots):
        if not isinstance(slot, tuple):
            out.append(slot)
        elif type(run) is DeploymentRun:
            out.append(deployment_answer(run.deployment, answers[slot[0]:slot[1]]))
        else:
            out.append(answers[slot[0]])
    return out
