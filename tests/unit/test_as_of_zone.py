"""An as-of time's zone (issue 27.13): minutes 00-59 and hours 00-23, said in one line of the
registry's own words, never read as another offset nor in Python's ``timedelta`` repr."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from registry_db.inputs.as_of import as_of_utc, read_as_of
from registry_db.inputs.schema import Problem


@pytest.mark.parametrize("value", ["2026-12-01T08:37:57+00:99", "2026-12-01T08:37:57+0060",
                                   "2026-12-01T08:37:57+24:00", "2026-12-01T08:37:57-2400",
                                   "2026-12-01 08:37+99"])
def test_a_zone_out_of_range_is_refused_in_one_plain_line(value):
    with pytest.raises(ValueError) as caught:
        as_of_utc(value)
    message = str(caught.value)
    assert "out of range (hours 00-23, minutes 00-59)" in message
    assert "timedelta" not in message and "\n" not in message
    with pytest.raises(Problem):
        read_as_of(value)


@pytest.mark.parametrize("value, utc", [
    ("2026-12-01T08:37:57+23:59", datetime(2026, 11, 30, 8, 38, 57, tzinfo=UTC)),
    ("2026-12-01T08:37:57-00:59", datetime(2026, 12, 1, 9, 36, 57, tzinfo=UTC)),
    ("2026-11-30T12+0130", datetime(2026, 11, 30, 10, 30, tzinfo=UTC)),
    ("2026-11-30 12:00-05", datetime(2026, 11, 30, 17, 0, tzinfo=UTC)),
    ("2026-11-30", datetime(2026, 11, 30, tzinfo=UTC)),
])
def test_zones_in_range_still_read(value, utc):
    assert as_of_utc(value) == utc


@pytest.mark.parametrize("moment, text", [
    (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01 00:00:00.000000"),
    (datetime(2026, 12, 1, 8, 37, 57, tzinfo=UTC), "2026-12-01 08:37:57.000000"),
    (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "9999-12-31 23:59:59.999999"),
])
def test_a_time_is_bound_on_sqlite_in_the_stored_format(moment, text):
    """SQLite compares times as text: the bound time has the stored format's fixed width
    (``store.schema``'s ``DateTime``: year in four digits, always six fraction digits), so year
    1 sorts before 2026, and no zone."""
    from registry_db.resolve.lookup import bound

    assert bound(moment, "sqlite") == text
    assert bound(moment, "postgresql") is moment
