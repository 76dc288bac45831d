"""Period presets and report periods at every test clock: month starts, year ends and the
hour in progress."""

from datetime import UTC, datetime

import pytest

from flywheel.selectors.report_periods import report_period_parse
from portal.periods import month_start, months_before, next_month, period_from_preset
from tests.conftest import on_every_clock


def _day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# Per clock (tests/conftest.py CLOCKS): this month, last month, 30 and 90 days, each
# [from, to) with to the end of today; worked out on a calendar.
PRESETS = {
    datetime(2026, 12, 1, 8, 37, tzinfo=UTC): {
        "this_month": ("2026-12-01", "2026-12-02"),
        "last_month": ("2026-11-01", "2026-12-01"),
        "30d": ("2026-11-02", "2026-12-02"),
        "90d": ("2026-09-03", "2026-12-02"),
    },
    datetime(2026, 12, 16, 10, 0, tzinfo=UTC): {
        "this_month": ("2026-12-01", "2026-12-17"),
        "last_month": ("2026-11-01", "2026-12-01"),
        "30d": ("2026-11-17", "2026-12-17"),
        "90d": ("2026-09-18", "2026-12-17"),
    },
    datetime(2026, 12, 31, 23, 30, tzinfo=UTC): {
        "this_month": ("2026-12-01", "2027-01-01"),
        "last_month": ("2026-11-01", "2026-12-01"),
        "30d": ("2026-12-02", "2027-01-01"),
        "90d": ("2026-10-03", "2027-01-01"),
    },
    datetime(2027, 1, 1, 0, 30, tzinfo=UTC): {
        "this_month": ("2027-01-01", "2027-01-02"),
        "last_month": ("2026-12-01", "2027-01-01"),
        "30d": ("2026-12-03", "2027-01-02"),
        "90d": ("2026-10-04", "2027-01-02"),
    },
}


@on_every_clock
@pytest.mark.parametrize("preset", ["this_month", "last_month", "30d", "90d"])
def test_period_from_preset_at_every_clock(now, preset):
    period, name = period_from_preset({"period": preset})

    assert name == preset
    assert (period.start, period.end) == tuple(map(_day, PRESETS[now][preset]))


@on_every_clock
def test_month_arithmetic_crosses_years(now):
    assert month_start(next_month(now)) == next_month(now) > now >= month_start(now)
    assert months_before(now, 12) == month_start(now).replace(year=month_start(now).year - 1)
    assert next_month(months_before(now, 1)) == month_start(now)


@on_every_clock
def test_report_periods_at_every_clock(now):
    this_month = report_period_parse(f"{now:%Y-%m}")
    last = months_before(now, 1)
    last_month = report_period_parse(f"{last:%Y-%m}")
    quarter = f"{last:%Y}-Q{(last.month - 1) // 3 + 1}"

    # The month in progress runs to the current hour (at least its first hour).
    assert this_month.is_to_date and this_month.start == month_start(now)
    assert this_month.end == max(now.replace(minute=0), month_start(now).replace(hour=1))
    # Last month is whole, whichever year it was in.
    assert (last_month.start, last_month.end, last_month.is_to_date) == (
        last,
        month_start(now),
        False,
    )
    # Its quarter is still running in December, and over on 1 January.
    q4 = report_period_parse(quarter)
    assert q4.is_to_date == (now.month == 12)
    with pytest.raises(ValueError, match="not started"):
        report_period_parse(f"{next_month(now):%Y-%m}")
