"""A measured run against the registry (``registry check``): the run's counts, the value the
registry resolves for the run, and whether the two agree.

:func:`compare` is the comparison: the difference, z = (measured − registered) /
√(stderr_m² + stderr_r²) (:func:`~registry_db.model.z_score`; a value without counts has
stderr 0; with counts, "registered" is their own mean, of which the stored AL may be a rounding)
and the verdict past a :class:`Threshold`. :func:`check_run` resolves one run exactly
as ``resolve`` does and compares; :func:`check_lines` does it for JSON lines, each a ``resolve
--batch`` request plus ``"counts"``, through the batch's own
:func:`~registry_db.resolve.batch.answer_lines` (every run of every line in one lookup).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from registry_db.errors import RegistryError
from registry_db.inputs.batch_stream import CHUNK
from registry_db.inputs.counts import COUNTS
from registry_db.inputs.deployment import Deployment, Pool
from registry_db.inputs.run import Request, Run
from registry_db.inputs.schema import Checker
from registry_db.model import Counts, Refusal, Uncertainty, z_score
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Resolution
from registry_db.resolve.batch import answer_chunk
from registry_db.resolve.deployment import DeploymentAnswer, resolve_deployment
from registry_db.resolve.plan import resolve

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind

__all__ = ["CONSISTENT", "DEFAULT_MAX_Z", "DRIFT", "CheckLine", "CheckResult", "Measurement",
           "Threshold", "check_chunks", "check_deployment", "check_lines", "check_run", "compare",
           "measured_pool"]

CONSISTENT, DRIFT = "consistent", "drift"
#: How many combined standard errors a measured run may lie from the registry's value.
DEFAULT_MAX_Z = 3.0


@dataclass(frozen=True, slots=True)
class Threshold:
    """Where drift starts: past ``max_z`` combined standard errors, or (``tolerance`` given
    instead) past ``tolerance`` in AL. Exactly one of the two is set."""

    max_z: float | None = DEFAULT_MAX_Z
    tolerance: float | None = None

    def __post_init__(self) -> None:
        if (self.max_z is None) == (self.tolerance is None):
            raise ValueError("a threshold is max_z or tolerance, one of them")


@dataclass(frozen=True, slots=True)
class Measurement:
    """A run's counts at its K: AL = 1 + accepted_tokens / drafts (the nearest float of the
    exact value) and its standard error (:meth:`~registry_db.model.Counts.uncertainty`)."""

    counts: Counts
    num_spec_tokens: int

    @property
    def acceptance_length(self) -> float:
        c = self.counts
        return float(1 + Fraction(c.accepted_tokens, c.drafts))

    @property
    def uncertainty(self) -> Uncertainty:
        return self.counts.uncertainty(self.num_spec_tokens)

    def to_json(self) -> dict[str, Any]:
        """The contract's ``measured``: ``{"acceptance_length", "drafts", "stderr", "exact"}``."""
        return {"acceptance_length": self.acceptance_length, **self.uncertainty.to_json()}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The measured run, the registry's answer for it, how far apart and the verdict."""

    verdict: str
    measured: Measurement
    registered: Resolution
    #: Measured AL minus the registered AL.
    difference: float
    #: The difference in combined standard errors; None when both are 0 (no spread).
    z: float | None
    threshold: Threshold

    @property
    def drifted(self) -> bool:
        return self.verdict == DRIFT

    def to_json(self) -> dict[str, Any]:
        """The contract's object, keys in its order."""
        return {"verdict": self.verdict, "measured": self.measured.to_json(),
                "registered": self.registered.to_json(), "difference": self.difference,
                "z": self.z, "max_z": self.threshold.max_z,
                "tolerance": self.threshold.tolerance}


def compare(measured: Measurement, registered: Resolution,
            threshold: Threshold = Threshold()) -> CheckResult:
    """``measured`` against ``registered`` (a value without counts has stderr 0): drift when
    |z| exceeds ``max_z`` (with no spread at all, when they differ), or when |difference|
    exceeds ``tolerance``."""
    if measured.num_spec_tokens != registered.num_spec_tokens:
        raise ValueError(f"counts at K = {measured.num_spec_tokens} cannot be checked against "
                         f"a value at K = {registered.num_spec_tokens}")
    al, stated = measured.acceptance_length, registered.acceptance_length
    difference = al - stated
    stated_stderr = 0.0 if registered.uncertainty is None else registered.uncertainty.stderr
    # The stored error is about the counts' own mean, of which the stored AL may be a rounding.
    centre = stated if registered.counts is None else registered.counts.mean
    z = z_score(centre, stated_stderr, al, measured.uncertainty.stderr)
    if threshold.tolerance is not None:
        drift = abs(difference) > threshold.tolerance
    else:
        assert threshold.max_z is not None
        drift = difference != 0 if z is None else abs(z) > threshold.max_z
    return CheckResult(DRIFT if drift else CONSISTENT, measured, registered, difference, z,
                       threshold)


def check_run(bind: ReadBind, request: Request | Run, counts: Counts,
              threshold: Threshold = Threshold()) -> CheckResult:
    """Resolve ``request`` as :func:`~registry_db.resolve.plan.resolve` does (raising
    :class:`~registry_db.errors.ResolutionRefused` when it is refused) and compare ``counts``,
    the run's, checked at its K, with the answer."""
    registered = resolve(bind, request)
    return compare(Measurement(counts, registered.num_spec_tokens), registered, threshold)


def measured_pool(deployment: Deployment) -> Pool:
    """The one pool of ``deployment`` that speculates: a run's counters are one server's, so a
    deployment is checked only when exactly one pool drafts (else :class:`RegistryError`)."""
    pools = deployment.speculating
    if len(pools) == 1:
        return pools[0]
    raise RegistryError(_pools_message([p.name for p in pools]))


def check_deployment(bind: ReadBind, request: Request | Run, deployment: Deployment,
                     counts: Counts, threshold: Threshold = Threshold()) -> CheckResult:
    """:func:`check_run` for a run served by ``deployment``, at its one speculating pool's method
    and K (:func:`measured_pool`), resolved as ``resolve --deployment`` does."""
    measured_pool(deployment)
    answer = resolve_deployment(bind, request, deployment)
    ((_, registered),) = answer.pools
    return compare(Measurement(counts, registered.num_spec_tokens), registered, threshold)


def _pools_message(names: Sequence[str]) -> str:
    if not names:
        return ("no pool of the deployment speculates, so there is no acceptance to check the "
                "counters against")
    return (f"{len(names)} pools of the deployment speculate ({', '.join(map(repr, names))}), "
            "and a run's counters "
            "are one server's: check each pool's counters with its own --method and --k, or "
            "give a deployment with one speculating pool")


# --- many runs ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CheckLine:
    """One line's answer (a :class:`CheckResult` or the :class:`~registry_db.model.Refusal`
    that answers it), the line's ``id`` (None: it has none) and its number in the input (blank
    lines counted, as the answers' messages count them; 0: not told)."""

    answer: CheckResult | Refusal
    id: Any = None
    line: int = 0

    @property
    def consistent(self) -> bool:
        """Whether the line was checked and found consistent (anything else fails a CI run)."""
        return type(self.answer) is CheckResult and not self.answer.drifted


def check_lines(bind: ReadBind, lines: Iterable[str | Refusal],
                threshold: Threshold = Threshold()) -> Iterator[CheckLine]:
    """The check of each line of ``lines`` that is not blank, in order (:func:`check_chunks`,
    :data:`~registry_db.inputs.batch_stream.CHUNK` lines at a time)."""
    it = iter(lines)
    for checked in check_chunks(bind, iter(lambda: list(itertools.islice(it, CHUNK)), []),
                                threshold):
        yield from checked


def check_chunks(bind: ReadBind, chunks: Iterable[Sequence[str | Refusal]],
                 threshold: Threshold = Threshold()) -> Iterator[list[CheckLine]]:
    """The checks of each chunk of lines, one list per chunk as soon as it has come, every
    chunk in one snapshot (as :func:`~registry_db.resolve.batch.answer_chunks`)."""
    from registry_db.resolve.reading import snapshot

    with snapshot(bind) as held:
        start = 1
        for chunk in chunks:
            yield list(_check_chunk(held, chunk, start, threshold))
            start += len(chunk)


def _check_chunk(bind: ReadBind, lines: Sequence[str | Refusal], start: int,
                 threshold: Threshold) -> Iterator[CheckLine]:
    """The check of each line of ``lines`` (the first is line ``start``) that is not blank,
    in order. A line is a ``resolve --batch`` request plus ``"counts"`` (the contract's counts
    mapping, checked at the run's K); its answer is the comparison, or the refusal: the
    resolver's, or ``invalid_request`` naming the line (a line that is no request, or whose
    counts are missing or invalid)."""
    split = [(line, _ABSENT) if type(line) is Refusal else _without_counts(line)  # type: ignore[arg-type]
             for line in lines]
    numbered = ((n, counts) for n, (line, (_, counts)) in enumerate(zip(lines, split), start)
                if type(line) is Refusal or line.strip())  # type: ignore[union-attr]
    answers = answer_chunk(bind, [request for request, _ in split], start)
    for line, (number, raw) in zip(answers, numbered, strict=True):
        answer: Any = line.answer
        if line.well_formed and raw is _ABSENT:
            answer = _invalid(number, "counts is required: the run's measured counts (drafts, "
                                      "draft_tokens, accepted_tokens, optionally "
                                      "accepted_per_position)")
        elif line.well_formed:
            answer = _checked(answer, raw, number, threshold)
        yield CheckLine(answer, line.id, number)


def _checked(answer: Any, raw: Any, number: int, threshold: Threshold) -> CheckResult | Refusal:
    """One well-formed line's answer: its counts checked at the run's K (when it resolved),
    then compared with the value it resolved to; a refused run keeps its refusal."""
    registered = answer
    if type(answer) is DeploymentAnswer:  # the counts are its one speculating pool's
        registered = answer.pools[0][1] if len(answer.pools) == 1 else _invalid(
            number, _pools_message([name for name, _ in answer.pools]))
    k = registered.num_spec_tokens if type(registered) is Resolution else None
    ck = Checker("")
    counts = COUNTS.load(ck, raw, "counts", outer={"num_spec_tokens": k})
    if counts is None:
        return _invalid(number, "; ".join(f"{f.path}: {f.message}" for f in ck.findings
                                          if f.is_error))
    if type(registered) is not Resolution:
        return registered
    return compare(Measurement(counts, registered.num_spec_tokens), registered, threshold)


def _invalid(number: int, message: str) -> Refusal:
    return Refusal(R.INVALID_REQUEST, f"line {number}: {message}")


#: A line without counts.
_ABSENT: Any = object()


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a key appears twice")  # the batch's reader says which, on the line
    return out


def _without_counts(line: str) -> tuple[str, Any]:
    """The line as a ``resolve --batch`` request (its ``counts`` taken out) and its counts
    (``_ABSENT``: none, or null). A line that is no JSON object, or repeats a key, is left as
    it is, for the batch's reader to refuse as it refuses any such line."""
    if not line.strip():
        return line, _ABSENT
    try:
        obj = json.loads(line, object_pairs_hook=_unique)
    except (ValueError, RecursionError):
        return line, _ABSENT
    if type(obj) is not dict or "counts" not in obj:
        return line, _ABSENT
    counts = obj.pop("counts")
    # ASCII escapes keep every character the reader checks for (NUL, a lone surrogate) visible.
    return json.dumps(obj), _ABSENT if counts is None else counts
