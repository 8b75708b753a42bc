"""One exception hierarchy for everything the registry refuses.

Each error knows its exit code (the contract's table) and says what went wrong, where, and how to
fix it. The CLI maps these to exit codes and never shows a traceback for them; the library raises
them for callers to catch as :class:`RegistryError`.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from registry_db.model import Refusal, visible

#: What writing the output fails with when it has nowhere to go (a full disk, `> /dev/full`, a
#: closed pipe): the command line's edge reports it, no database translator claims it.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EPIPE})


@dataclass(frozen=True)
class Finding:
    """One problem: where (file, 1-based line and column, key path), which rule, and what.

    Line 0 means the problem has no position in the file (a missing file, a whole scrape's
    counters): it is then rendered ``FILE: PATH: MESSAGE`` and its JSON position is null,
    since editors reject line 0."""

    file: str
    line: int
    column: int
    path: str
    code: str
    message: str
    severity: str = "error"

    def render(self) -> str:
        """``FILE:LINE:COL: PATH: MESSAGE`` (warnings say so); ``FILE: PATH: MESSAGE`` when
        the problem has no position. On one line: a control character in the file's name, the
        key or the message is shown as its escape (:func:`registry_db.model.visible`), so a file
        named ``a\nb.yaml`` cannot split it."""
        where = f"{self.file}:{self.line}:{max(self.column, 1)}" if self.line > 0 else self.file
        what = self.message if self.severity == "error" else f"warning: {self.message}"
        return visible(f"{where}: {self.path or '(document)'}: {what}")

    def to_json(self) -> dict:
        """The contract's problem object (``line`` and ``column`` null without a position)."""
        out = asdict(self)
        if self.line <= 0:
            out["line"] = out["column"] = None
        return out

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Deterministic order: by file, then position, then code."""
    return sorted(findings, key=lambda f: (f.file, f.line, f.column, f.path, f.code))


#: Findings shown per file; the rest are counted in one last finding (``more_problems``).
MAX_FINDINGS_PER_FILE = 100


def cap_findings(findings: Sequence[Finding]) -> list[Finding]:
    """The first :data:`MAX_FINDINGS_PER_FILE` findings of each file (in the given order), then
    one finding per file saying how many more there are: a file with 300,000 unknown keys is
    100 lines and a count, not 300,000 lines."""
    out: list[Finding] = []
    kept: dict[str, int] = {}
    more: dict[str, list[Finding]] = {}
    for f in findings:
        if kept.get(f.file, 0) < MAX_FINDINGS_PER_FILE:
            kept[f.file] = kept.get(f.file, 0) + 1
            out.append(f)
        else:
            more.setdefault(f.file, []).append(f)
    for file, rest in more.items():
        errors = sum(1 for f in rest if f.is_error)
        last = max(i for i, f in enumerate(out) if f.file == file)
        out.insert(last + 1, Finding(
            file, rest[0].line, rest[0].column, "", "more_problems",
            f"{len(rest):,} more problem(s) in this file are not shown ({errors:,} error(s), "
            f"{len(rest) - errors:,} warning(s)); fix the first {MAX_FINDINGS_PER_FILE} and "
            "run again", "error" if errors else "warning"))
    return out


class RegistryError(Exception):
    """Base of every expected failure. ``exit_code`` follows the contract."""

    exit_code = 1


class InvalidInput(RegistryError):
    """One or more input files (or values) break the spec. Carries every finding at once."""

    #: The loaded document when loading failed only in ways the validator can look past (a
    #: duplicate key keeps the first value), so that every other problem is still reported.
    document: Any = None

    def __init__(self, findings: Sequence[Finding], message: str | None = None):
        self.findings = list(findings)
        errors = [f for f in self.findings if f.severity == "error"]
        super().__init__(message or f"{len(errors)} problem(s) found")


class UsageError(RegistryError):
    """A request that cannot be carried out as asked (exit 2 from the CLI)."""

    exit_code = 2


class NotFound(RegistryError):
    """A named set (or other object) is not in the database."""


class DataWouldBeLost(RegistryError):
    """A schema downgrade would destroy data the older schema cannot hold; ``--force`` says to
    go ahead (exit 1)."""


class EmptySelection(RegistryError):
    """Filters that match no stored profile; the message says what the registry does hold."""


class MissingExtra(RegistryError):
    """An optional dependency is not installed; the message names the command that installs it."""


class ResolutionRefused(RegistryError):
    """The one-at-a-time resolver refuses a run: raised with the :class:`~registry_db.model.Refusal`
    (``reason``, one of :class:`~registry_db.model.RefusalReason`, and ``message``) that the
    many-at-once resolver returns as a value."""

    def __init__(self, reason: str | Refusal, message: str | None = None):
        self.refusal = reason if isinstance(reason, Refusal) else Refusal(reason, message or "")
        super().__init__(self.refusal.message)

    @property
    def reason(self) -> str:
        return self.refusal.reason

    @property
    def message(self) -> str:
        return self.refusal.message

    def to_json(self) -> dict:
        """The contract's refusal object."""
        return self.refusal.to_json()


class DatabaseError(RegistryError):
    """The database is unreachable, out of date, or locked past the wait (exit 3)."""

    exit_code = 3


class DatabaseUnavailable(DatabaseError):
    """The server cannot be reached or the file cannot be opened."""


class NoRegistry(DatabaseUnavailable):
    """No registry there: a missing SQLite file, or an empty database, which a command that
    only reads (or is refused) does not create or migrate."""


class SchemaOutOfDate(DatabaseError):
    """The database's revision is not the code's head (older, newer, or unknown)."""


class DatabaseLocked(DatabaseError):
    """Another writer held the database longer than the wait allows."""


class QueryError(RegistryError):
    """The database refused or could not run the analyst's SQL (exit 1).

    ``reason`` is ``read_only`` (a write was refused), ``one_statement`` (the string held more
    than one statement), ``parameters`` (a ``:name`` without ``-p``, or a ``-p`` the SQL does
    not use), ``role`` (the PostgreSQL login role may write), ``timeout``, ``copy`` (COPY is
    not a query) or ``sql`` (anything else the database rejected: syntax, unknown names, types).
    """

    def __init__(self, reason: str, message: str):
        self.reason = reason
        super().__init__(message)


class QueryInterrupted(RegistryError):
    """Ctrl-C stopped the analyst's query (exit 130, as a shell reports SIGINT)."""

    exit_code = 130


class QueryTerminated(QueryInterrupted):
    """SIGTERM stopped the analyst's query, on the server too (exit 143, as a shell reports
    SIGTERM)."""

    exit_code = 143
