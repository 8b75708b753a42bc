"""A run's ``as_of``: the moment whose registry it resolves against (``--as-of``, a batch line's
``"as_of"``, :attr:`Request.as_of <registry_db.inputs.request.Request.as_of>`).

The time is ISO 8601 in its extended form: a date (``2026-11-30``, midnight), or a date and a
time to the hour, minute, second or fraction (``2026-11-30T12:00:00.5``; ``T`` or one space
between them), with an optional zone (``Z``, ``+01:00``, ``+0100``, ``+01``). No zone means UTC.
A library caller may give a :class:`~datetime.datetime` instead (naive: UTC). Either way the run
holds the UTC instant (:func:`read_as_of`, once, when the run is checked); how the resolver's
statements compare it with the stored import times is
:func:`registry_db.resolve.lookup.bound`'s business (docs/decisions.md: "as of").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from registry_db.inputs.schema import Problem

#: The accepted text: ISO 8601's extended form. Checked before ``datetime.fromisoformat``, which
#: also takes any character between date and time ("2026-11-30+12:00" would be noon, naive).
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}(?::\d{2}(?::\d{2}(?:[.,]\d+)?)?)?"
                  r"(?:Z|[+-]\d{2}(?::?\d{2})?)?)?", re.ASCII)

#: The zone of a text that :data:`_ISO` matched: after its time.
_ZONE = re.compile(r"[T ][\d:.,]+(?P<z>[+-](?P<h>\d{2})(?::?(?P<m>\d{2}))?)$", re.ASCII)

#: Longer text is not a time; it is cut short in the message.
_LONGEST = 64

_EXAMPLE = "such as 2026-11-30T12:00:00Z (no zone means UTC)"


def _shown(value: str) -> str:
    return repr(value if len(value) <= _LONGEST else value[:_LONGEST] + "...")


#: The labels a batch's lines may name in ``"as_of"`` (name -> moment), read in the batch's
#: snapshot by :func:`registry_db.resolve.batch.answer_chunks`; None outside a batch.
BATCH_LABELS: ContextVar[Mapping[str, datetime] | None] = ContextVar("batch_labels",
                                                                     default=None)


def read_as_of(value: Any) -> datetime | None:
    """The run term's reader: None, or the UTC instant of an ISO 8601 text or a datetime (in a
    batch, a label's name too: :data:`BATCH_LABELS`);
    :class:`~registry_db.inputs.schema.Problem` (one line) for anything else."""
    if value is None:
        return None
    if not isinstance(value, (str, datetime)):
        raise Problem(f"as_of must be an ISO 8601 time {_EXAMPLE}, got {value!r}")
    labels = BATCH_LABELS.get()
    if labels is not None and isinstance(value, str) and _label_shaped(value):
        if value in labels:
            return labels[value]
        known = ", ".join(sorted(labels)[:20]) or "none"
        raise Problem(f"as_of: no label named {_shown(value)} (nor is it a time {_EXAMPLE}); "
                      f"known labels: {known}")
    try:
        return as_of_utc(value)
    except ValueError as exc:
        raise Problem(f"as_of: {exc}") from None


def as_of_utc(value: str | datetime) -> datetime:
    """The UTC instant of ``value`` (an aware datetime); ValueError with a one-line message
    when it is not an ISO 8601 time, or not one a calendar of years 1 to 9999 holds in UTC."""
    if isinstance(value, datetime):
        moment = value
    elif len(value) > _LONGEST or not _ISO.fullmatch(value):
        raise ValueError(f"{_shown(value)} is not an ISO 8601 time {_EXAMPLE}")
    elif (zone := _ZONE.search(value)) and (int(zone["h"]) > 23 or int(zone["m"] or 0) > 59):
        # fromisoformat reads +00:99 as +01:39, and says +24:00 in timedelta's repr.
        raise ValueError(f"{_shown(value)} is not a valid time: its zone {zone['z']} is out "
                         "of range (hours 00-23, minutes 00-59)")
    else:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError as exc:  # a day or hour out of range: say which
            raise ValueError(f"{_shown(value)} is not a valid time: {exc}") from None
    try:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00-05:00 is past the last UTC year
        raise ValueError(f"{_shown(str(value))} is outside the years 1 to 9999 in UTC") from None


# --- labels -------------------------------------------------------------------------------------

#: A label's name: a letter or digit, then letters, digits, ``.``, ``_`` or ``-``; 64 at most.
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", re.ASCII)


class LabelName(str):
    """An ``--as-of`` value that names a label rather than a time: resolved to the label's
    moment where the registry is open (``registry_db.history.labels.moment``)."""

    __slots__ = ()


#: Text a reader could take for a time, whatever this parser says: digits and a time's marks
#: only (``2026-12``, ``20261201``, ``20261201T1200Z``: ISO 8601's reduced and basic forms).
_TIME_LIKE = re.compile(r"\d[\d:.,TZ+-]*", re.ASCII)


def label_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a label, or None: the charset of :data:`LABEL_RE`, and never a
    text that reads as a time (``2026-12-01`` stays a date everywhere; ``2026-12`` too)."""
    if _ISO.fullmatch(name) or _TIME_LIKE.fullmatch(name):
        return (f"label name {_shown(name)} reads as a time, and --as-of would take it as one; "
                "give a name that does not, e.g. release-2026-12")
    if not LABEL_RE.fullmatch(name):
        return (f"label name {_shown(name)} is not a letter or digit followed by up to 63 "
                "letters, digits, '.', '_' or '-'")
    return None


def _label_shaped(value: str) -> bool:
    """Whether ``value`` is read as a label's name rather than a time."""
    return bool(LABEL_RE.fullmatch(value)) and not (_ISO.fullmatch(value)
                                                    or _TIME_LIKE.fullmatch(value))


def time_or_label(value: str) -> datetime | LabelName:
    """An ``--as-of`` value: the UTC instant of a time (:func:`as_of_utc`'s rules), or a label's
    name (:class:`LabelName`) for text that cannot be a time but can be a label's name;
    ValueError (one line) for anything else."""
    if not _label_shaped(value):
        try:
            return as_of_utc(value)
        except ValueError as exc:
            if LABEL_RE.fullmatch(value):  # a time's form: its own error
                raise
            raise ValueError(f"{exc}, nor a label's name (registry labels lists them)") from None
    return LabelName(value)
