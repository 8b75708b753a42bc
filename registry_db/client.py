"""The registry for programs: :class:`Registry`, one object opened by URL that resolves runs
(one, many, or ``--batch`` JSON lines), lists profiles, sets and history, and checks measured
counts, as the command line does. It owns its engine; ``with Registry(url) as reg:`` closes it.

Like the package's ``__init__``, it sits below every stage and nothing inside imports it; the
stages are imported when a method first needs them, so that opening the object costs one
schema check and no more.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from registry_db.model import Counts, Refusal

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from registry_db.history.labels import Label
    from registry_db.history.read import Revision
    from registry_db.inputs.run import Request, Run
    from registry_db.resolve.answer import Resolution
    from registry_db.resolve.batch import LineAnswer
    from registry_db.resolve.check import CheckResult, Threshold
    from registry_db.store.read import ProfileSummary, SetSummary

__all__ = ["Registry"]


class Registry:
    """A registry database, opened read-only by URL (``None``: ``REGISTRY_DATABASE_URL``, else
    ``sqlite:///registry.db``, as the command line picks it; a bare path is an SQLite file).

    A missing SQLite file, an empty database or a schema at another revision raises
    :class:`~registry_db.errors.DatabaseError` (a :class:`~registry_db.errors.RegistryError`),
    as every reading command refuses it; driver errors are translated the same way.

    Example::

        with Registry("sqlite:///registry.db") as reg:
            r = reg.resolve(model="deepseek-v4.1-flash", method="dspark", k=5,
                            thinking="off", category="coding")
    """

    def __init__(self, url: str | None = None) -> None:
        from registry_db.store.engine import translated
        from registry_db.store.migrate import open_registry
        from registry_db.store.urls import resolve_url

        self.url: str = resolve_url(url)
        with translated(self.url):
            self.engine: Engine = open_registry(self.url, readonly=True)

    # --- resolving ------------------------------------------------------------------------

    def resolve(self, request: Request | Run | None = None, /, **fields: Any) -> Resolution:
        """The acceptance of one run, given as a :class:`~registry_db.inputs.run.Request` or
        as its fields (``model=``, ``method=``, ``k=``, ``thinking=``, ``category=``, ...).
        A refusal raises :class:`~registry_db.errors.ResolutionRefused` (``.reason``)."""
        from registry_db.resolve.plan import resolve

        with self._translated():
            return resolve(self.engine, self._labelled(_request(request, fields)))

    def resolve_many(self, requests: Iterable[Request | Run]) -> list[Resolution | Refusal]:
        """One answer per request, in order, in one set-based pass: a refusal is returned as
        a :class:`~registry_db.model.Refusal`, not raised."""
        from registry_db.resolve.plan import resolve_many

        with self._translated():
            return resolve_many(self.engine, [self._labelled(r) for r in requests])

    def batch(self, lines: Iterable[str]) -> Iterator[LineAnswer]:
        """``registry resolve --batch`` without the printing: the answer to each JSON line
        that is not blank, in order (``.answer``, ``.id``, ``.line``), all in one snapshot."""
        from registry_db.resolve.batch import answer_lines

        with self._translated():
            yield from answer_lines(self.engine, lines)

    def check(self, request: Request | Run, counts: Counts,
              threshold: Threshold | None = None) -> CheckResult:
        """A measured run's ``counts`` against the value the registry resolves for it, as
        ``registry check`` compares them (``.verdict``, ``.z``, ``.drifted``); drift past
        ``threshold`` (default: |z| > 3). A refused run raises ``ResolutionRefused``."""
        from registry_db.resolve.check import Threshold, check_run

        with self._translated():
            return check_run(self.engine, self._labelled(request), counts,
                             Threshold() if threshold is None else threshold)

    # --- reading --------------------------------------------------------------------------

    def profiles(self, *, model: str | None = None, method: str | None = None,
                 k: int | None = None, thinking: str | None = None,
                 category: str | None = None, sets: Sequence[str] | None = None,
                 as_of: datetime | str | None = None) -> list[ProfileSummary]:
        """The stored profiles matching every filter given (``registry profiles``), by key,
        then set; with ``as_of`` (an aware time, or a label's name), those the registry held
        then."""
        filters: dict[str, Any] = {"model": model, "method": method, "k": k,
                                   "thinking": thinking, "category": category, "sets": sets}
        with self._translated():
            if isinstance(as_of, str):
                from registry_db.history.labels import moment
                from registry_db.inputs.as_of import time_or_label

                found = time_or_label(as_of)  # ValueError: neither a time nor a label's name
                as_of = moment(self.engine, found)
            if as_of is None:
                from registry_db.store.read import list_profiles

                return list_profiles(self.engine, **filters)
            from registry_db.history.read import profiles_as_of

            return profiles_as_of(self.engine, as_of, **filters)

    def sets(self) -> list[SetSummary]:
        """Every stored set with its profile count and revision (``registry list``)."""
        from registry_db.store.read import list_sets

        with self._translated():
            return list_sets(self.engine)

    def history(self, name: str | None = None) -> list[Revision]:
        """The revisions of set ``name`` (every set's when None), newest first
        (``registry history``)."""
        from registry_db.history.read import history

        with self._translated():
            return history(self.engine, name)

    def labels(self) -> list[Label]:
        """Every label at its latest position, by name (``registry labels``)."""
        from registry_db.history.labels import list_labels

        with self._translated():
            return list_labels(self.engine)

    def label_time(self, name: str) -> datetime:
        """The moment label ``name`` names; an unknown one raises
        :class:`~registry_db.errors.NotFound` naming the known labels."""
        from registry_db.history.labels import moment

        with self._translated():
            found = moment(self.engine, name)
        assert found is not None
        return found

    # --- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the engine's connections (the object can no longer read)."""
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        from registry_db.store.urls import redact

        return f"Registry({redact(self.url)!r})"

    def _labelled(self, request: Any) -> Any:
        """``request`` with an ``as_of`` that names a label (text that is no time but a
        label's name) replaced by the label's time; as it is otherwise (the run's check
        refuses what is neither)."""
        from registry_db.inputs.as_of import LabelName, time_or_label

        as_of = getattr(request, "as_of", None)
        if not isinstance(as_of, str):
            return request
        try:
            found = time_or_label(as_of)
        except ValueError:
            return request
        if not isinstance(found, LabelName):
            return request
        from dataclasses import replace

        from registry_db.history.labels import moment

        return replace(request, as_of=moment(self.engine, found))

    def _translated(self) -> AbstractContextManager[None]:
        from registry_db.store.engine import translated

        return translated(self.url)


def _request(request: Request | Run | None, fields: dict[str, Any]) -> Request | Run:
    """The request given, or one made of its fields (not both)."""
    from registry_db.inputs.run import Request

    if request is not None and fields:
        raise TypeError("give a Request or its fields, not both")
    return Request(**fields) if request is None else request
