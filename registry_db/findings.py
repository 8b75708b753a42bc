"""Findings: one problem in one place of one input, as every command reports them.

A finding renders as ``FILE:LINE:COL: PATH: MESSAGE`` (the contract's form) and as the contract's
JSON object. ``code`` is a stable name per rule; ``severity`` is ``error`` or ``warning``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Finding:
    """One problem: where (file, 1-based line and column, key path), which rule, and what."""

    file: str
    line: int
    column: int
    path: str
    code: str
    message: str
    severity: str = "error"

    def render(self) -> str:
        """``FILE:LINE:COL: PATH: MESSAGE`` (warnings say so)."""
        where = f"{self.file}:{self.line}:{self.column}"
        what = self.message if self.severity == "error" else f"warning: {self.message}"
        return f"{where}: {self.path or '(document)'}: {what}"

    def to_json(self) -> dict:
        """The contract's problem object."""
        return asdict(self)

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Deterministic order: by file, then position, then code."""
    return sorted(findings, key=lambda f: (f.file, f.line, f.column, f.path, f.code))
