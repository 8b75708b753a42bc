"""A run served by a deployment: one resolution per pool that speculates.

The spec's last check: with a deployment in the bundle, every stated value must name the K of
each pool that speculates, and when no pool speculates a stated value draws a warning. The run
is resolved once per speculating pool, at that pool's method and K (they replace the request's,
which only stand in), and the answer lists the pools by name.

Each run goes through two steps around the resolver: :func:`plan_deployment` compares every
stated value's K with the pools' and either answers at once (no pool speculates, or a refusal)
or gives the one run per pool (the pool's method and K checked by their rules,
:func:`registry_db.inputs.run.with_terms`); :func:`deployment_answer` puts the pools' answers
together. :func:`resolve_deployment` does both for one run; :func:`resolve_runs` does them for a
``--batch`` whose lines may carry deployments, with every pool of every line in the same one
set-based :func:`~registry_db.resolve.plan.resolve_many`. Both check each request once, where it
enters (:func:`registry_db.inputs.run.check`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from registry_db.errors import ResolutionRefused
from registry_db.inputs import layers
from registry_db.inputs.deployment import Deployment
from registry_db.inputs.request import DeploymentRun
from registry_db.inputs.run import Request, Run, check, with_terms
from registry_db.model import Refusal
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Resolution
from registry_db.resolve.answer_json import AnswerText
from registry_db.resolve.answer_row import Steps, asked_here
from registry_db.resolve.plan import resolve_steps

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind

__all__ = ["DeploymentAnswer", "deployment_answer", "plan_deployment", "resolve_deployment",
           "resolve_runs", "resolve_runs_steps"]


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


def plan_deployment(run: Run, deployment: Deployment
                    ) -> list[Run | Refusal] | DeploymentAnswer | Refusal:
    """The runs to resolve, one per speculating pool in the deployment's order (each pool's
    method and K replace the run's; a pool whose method or K breaks its rule is refused
    there), or the answer already decided.

    Every stated value must name the K of every speculating pool (spec: Checks), else
    ``k_mismatch`` names the pool. When no pool speculates the answer says so, with a warning
    for each layer that stated a value (it is not used).
    """
    stated = [(row.layer, value) for row, found in zip(layers.LAYERS, run.stated)
              if found is not None and (value := row.value(found)) is not None]
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
    return [with_terms(run, method=pool.method, k=pool.num_spec_tokens) for pool in speculating]


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


def resolve_deployment(bind: ReadBind, request: Request | Run, deployment: Deployment
                       ) -> DeploymentAnswer:
    """Resolve ``request`` once for each pool of ``deployment`` that speculates; raise
    :class:`~registry_db.errors.ResolutionRefused` when the run is refused (``k_mismatch``
    names the pool whose K a stated value misses; any pool's refusal names its pool)."""
    (answer,) = resolve_runs(bind, [DeploymentRun(request, deployment)])
    if isinstance(answer, Refusal):
        raise ResolutionRefused(answer)
    assert isinstance(answer, DeploymentAnswer)
    return answer


def resolve_runs(bind: ReadBind, runs: Sequence[Request | Run | DeploymentRun],
                 stored: dict[Any, Any] | None = None, text: bool = False
                 ) -> list[Resolution | Refusal | DeploymentAnswer | AnswerText]:
    """:func:`~registry_db.resolve.plan.resolve_many` for runs of which some carry a
    deployment (a ``--batch`` line's ``"deployment"``): one answer per run, in order, each
    what the run alone would get, and every pool of every run in the same set-based lookup
    (``stored`` and ``text``: as :func:`~registry_db.resolve.plan.resolve_many`'s; a
    deployment's pools are put together from their resolutions, so they get no text)."""
    return asked_here(resolve_runs_steps(bind, runs, stored, text))


def resolve_runs_steps(bind: ReadBind, runs: Sequence[Request | Run | DeploymentRun],
                       stored: dict[Any, Any] | None = None, text: bool = False
                       ) -> Steps[list[Any]]:
    """:func:`resolve_runs` in two steps, as :func:`~registry_db.resolve.plan.resolve_steps`
    is :func:`~registry_db.resolve.plan.resolve_many`."""
    if all(type(item) is not DeploymentRun for item in runs):  # most batches: no pools to pair
        plain: list[Any] = yield from resolve_steps(bind, cast("Sequence[Run]", runs), stored,
                                                    text)
        return plain
    # Per run: its deployment (None: a plain run) and what it asks resolve_many (one run per
    # speculating pool, or the run itself; a refusal stands for its own answer), or its answer.
    work: list[tuple[Deployment | None, list[Run | Refusal]] | DeploymentAnswer | Refusal] = []
    for item in runs:
        if type(item) is DeploymentRun:
            run = check(item.request)
            planned = run if isinstance(run, Refusal) else plan_deployment(run, item.deployment)
            work.append((item.deployment, planned) if isinstance(planned, list) else planned)
        else:
            work.append((None, [check(item)]))  # type: ignore[arg-type]
    asked: list[Run] = []
    lone: set[int] = set()  # the places in ``asked`` of runs that are no pool's: text allowed
    for w in work:
        if isinstance(w, tuple):
            for p in w[1]:
                if type(p) is Run:
                    if w[0] is None:
                        lone.add(len(asked))
                    asked.append(p)
    answers = iter((yield from resolve_steps(bind, asked, stored, lone if text else False)))
    out: list[Resolution | Refusal | DeploymentAnswer | AnswerText] = []
    for w in work:
        if not isinstance(w, tuple):
            out.append(w)
            continue
        deployment, planned = w
        got: list[Any] = [next(answers) if isinstance(p, Run) else p for p in planned]
        out.append(got[0] if deployment is None else deployment_answer(deployment, got))
    return out
