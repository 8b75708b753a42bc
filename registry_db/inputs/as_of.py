"""A run's ``as_of``: the moment whose registry it resolves against (``--as-of``, a batch line's
``"as_of"``, :attr:`Request.as_of <registry_db.inputs.request.Request.as_of>`).

The time is ISO 8601 in its extended form: a date (``2026-11-30``, midnight), or a date and a
time to the hour, minute, second or fraction (``2026-11-30T12:00:00.5``; ``T`` or one space
between them), with an optional zone (``Z``, ``+01:00``, ``+0100``, ``+01``). No zone means UTC.
A library caller may give a :class:`~datetime.datetime` instead (naive: UTC). Either way the
resolver works with the UTC instant (:func:`as_of_utc`); how it is compared with the stored
import times on each backend is :func:`bound`'s business (docs/decisions.md: "as of").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

#: The accepted text: ISO 8601's extended form. Checked before ``datetime.fromisoformat``, which
#: also takes any character between date and time ("2026-11-30+12:00" would be noon, naive).
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}(?::\d{2}(?::\d{2}(?:[.,]\d+)?)?)?"
                  r"(?:Z|[+-]\d{2}(?::?\d{2})?)?)?", re.ASCII)

#: Longer text is not a time; it is cut short in the message.
_LONGEST = 64

_EXAMPLE = "such as 2026-11-30T12:00:00Z (no zone means UTC)"

def _shown(value: str) -> str:
    return repr(value if len(value) <= _LONGEST else value[:_LONGEST] + "...")


def as_of_problem(value: Any) -> str | None:
    """Why ``value`` is not a usable as-of time (one line), or None when it is."""
    try:
        as_of_utc(value)
    except ValueError as exc:
        return str(exc)
    return None


def check_as_of(value: Any) -> str | None:
    """The request term's rule (``invalid_request``): None, an ISO 8601 text or a datetime."""
    if value is None:
        return None
    if not isinstance(value, (str, datetime)):
        return f"as_of must be an ISO 8601 time {_EXAMPLE}, got {value!r}"
    problem = _memo_problem(value)
    return None if problem is None else f"as_of: {problem}"


_PROBLEMS: dict[Any, str | None] = {}


def _memo_problem(value: str | datetime) -> str | None:
    # A batch repeats a few times; each is parsed once (bounded: a hostile batch's are many).
    if value in _PROBLEMS:
        return _PROBLEMS[value]
    if len(_PROBLEMS) >= 4096:
        _PROBLEMS.clear()
    found = _PROBLEMS[value] = as_of_problem(value)
    return found


_UTC: dict[Any, datetime] = {}


def as_of_utc(value: str | datetime) -> datetime:
    """The UTC instant of ``value`` (an aware datetime); ValueError with a one-line message
    when it is not an ISO 8601 time, or not one a calendar of years 1 to 9999 holds in UTC."""
    if not isinstance(value, (str, datetime)):
        raise ValueError(f"{value!r} is not an ISO 8601 time {_EXAMPLE}")
    found = _UTC.get(value)
    if found is not None:
        return found
    if isinstance(value, datetime):
        moment = value
    elif len(value) > _LONGEST or not _ISO.fullmatch(value):
        raise ValueError(f"{_shown(value)} is not an ISO 8601 time {_EXAMPLE}")
    else:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError as exc:  # a day or hour out of range: say which
            raise ValueError(f"{_shown(value)} is not a valid time: {exc}") from None
    try:
        found = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00-05:00 is past the last UTC year
        raise ValueError(f"{_shown(str(value))} is outside the years 1 to 9999 in UTC") from None
    if len(_UTC) >= 4096:
        _UTC.clear()
    _UTC[value] = found
    return found


def bound(moment: datetime, dialect: str) -> Any:
    """``moment`` (UTC) as the statement's parameter on ``dialect``: PostgreSQL compares
    ``timestamptz`` values; SQLite compares text, in the stored format."""
    if dialect == "sqlite":
        # Not strftime: its %Y writes year 1 as "1" on glibc, which would sort after "2026".
        m = moment
        return (f"{m.year:04d}-{m.month:02d}-{m.day:02d} {m.hour:02d}:{m.minute:02d}:"
                f"{m.second:02d}.{m.microsecond:06d}")
    return moment
