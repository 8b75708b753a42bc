"""Numbers rounded for reading: the one rule that the command line's tables and the web pages
share (``--json``, ``--nl``, ``--csv`` and the pages' JSON keep every digit)."""

from __future__ import annotations

import json
import math
from typing import Any

#: Decimal places that tables and pages keep.
READABLE_DIGITS = 4


def readable(value: Any) -> Any:
    """A float rounded for reading (0.6140000000000001 -> 0.614, 4.07 stays 4.07); anything
    else as it is."""
    if isinstance(value, float):
        return round(value, READABLE_DIGITS)
    return value


def readable_text(value: Any) -> str | None:
    """How a page shows ``value`` when rounding changes it: a float, or a JSON array of numbers
    held as text (``[1.0,0.07000000000000003]`` -> ``[1.0, 0.07]``); None when the value
    shows as it is."""
    if isinstance(value, float):
        return repr(readable(value)) if math.isfinite(value) else None
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        try:
            items = json.loads(value)
        except ValueError:
            return None
        if isinstance(items, list) and items and all(
                type(v) in (int, float) for v in items):
            return "[" + ", ".join(repr(readable(v)) for v in items) + "]"
    return None
