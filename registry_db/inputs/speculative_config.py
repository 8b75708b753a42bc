"""``--into JSON|FILE``: the vLLM ``--speculative-config`` object an engine's hand-off is merged
into, read and checked where it enters.

The value is the JSON text itself when it starts with ``{`` (after blanks), else the path of a
file holding it. It must be one JSON object; its keys are the user's and stay as they are (the
merge, and the refusal of a conflicting K, is :mod:`registry_db.resolve.launch`'s).
"""

from __future__ import annotations

import json
from typing import Any

from registry_db.errors import Finding, InvalidInput, UsageError

__all__ = ["load_speculative_config", "parse_speculative_config"]


def load_speculative_config(value: str) -> dict[str, Any]:
    """The object ``--into VALUE`` names: inline JSON text (a usage error, exit 2, when it is
    not one object) or a file (a finding ``FILE:LINE:COL``, exit 1, when it is not)."""
    if value.lstrip().startswith("{"):
        config, problem = parse_speculative_config(value)
        if problem is not None:
            raise UsageError(f"--into: {problem[2]} (line {problem[0]}, column {problem[1]})")
        return config
    try:
        with open(value, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise InvalidInput([Finding(value, 0, 0, "", "unreadable_file",
                                    f"cannot read the speculative config: {why}")]) from None
    config, problem = parse_speculative_config(text)
    if problem is not None:
        line, column, message = problem
        raise InvalidInput([Finding(value, line, column, "", "invalid_speculative_config",
                                    message)])
    return config


def parse_speculative_config(text: str) -> tuple[dict[str, Any], tuple[int, int, str] | None]:
    """``text`` as one JSON object, or ``({}, (line, column, message))``: what is wrong and
    where. Also the reading of a command's own ``--speculative-config`` value."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, (exc.lineno, exc.colno, f"not JSON: {exc.msg}")
    if not isinstance(config, dict):
        return {}, (1, 1, f"a speculative config is a JSON object, not {type(config).__name__}")
    return config, None
