"""The one period resolver (kpis.md section 0) at every test clock: presets, months and
quarters, custom bounds, the window actually measured and the bounds on requests."""

from datetime import UTC, date, datetime, timedelta

import pytest

from flywheel.selectors.report_periods import report_period_parse
from portal.errors import FieldError
from portal.periods import Period, month_start, months_before, next_month, period_resolve
from tests.conftest import on_every_clock


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# Per clock (tests/conftest.py CLOCKS): each preset's [start, end) and the end of the window
# measured (to = min(end, measured_until), here now: not floored to the hour, the running
# hour counts as far as it is measured); worked out on a calendar.
PRESETS = {
    datetime(2026, 12, 1, 8, 37, tzinfo=UTC): {
        "this_month": ("2026-12-01", "2027-01-01", "2026-12-01T08:37"),
        "last_month": ("2026-11-01", "2026-12-01", "2026-12-01"),
        "last_7_days": ("2026-11-25", "2026-12-02", "2026-12-01T08:37"),
        "last_30_days": ("2026-11-02", "2026-12-02", "2026-12-01T08:37"),
        "last_90_days": ("2026-09-03", "2026-12-02", "2026-12-01T08:37"),
    },
    datetime(2026, 12, 16, 10, 0, tzinfo=UTC): {
        "this_month": ("2026-12-01", "2027-01-01", "2026-12-16T10:00"),
        "last_month": ("2026-11-01", "2026-12-01", "2026-12-01"),
        "last_7_days": ("2026-12-10", "2026-12-17", "2026-12-16T10:00"),
        "last_30_days": ("2026-11-17", "2026-12-17", "2026-12-16T10:00"),
        "last_90_days": ("2026-09-18", "2026-12-17", "2026-12-16T10:00"),
    },
    datetime(2026, 12, 31, 23, 30, tzinfo=UTC): {
        "this_month": ("2026-12-01", "2027-01-01", "2026-12-31T23:30"),
        "last_month": ("2026-11-01", "2026-12-01", "2026-12-01"),
        "last_7_days": ("2026-12-25", "2027-01-01", "2026-12-31T23:30"),
        "last_30_days": ("2026-12-02", "2027-01-01", "2026-12-31T23:30"),
        "last_90_days": ("2026-10-03", "2027-01-01", "2026-12-31T23:30"),
    },
    datetime(2027, 1, 1, 0, 30, tzinfo=UTC): {
        "this_month": ("2027-01-01", "2027-02-01", "2027-01-01T00:30"),
        "last_month": ("2026-12-01", "2027-01-01", "2027-01-01"),
        "last_7_days": ("2026-12-26", "2027-01-02", "2027-01-01T00:30"),
        "last_30_days": ("2026-12-03", "2027-01-02", "2027-01-01T00:30"),
        "last_90_days": ("2026-10-04", "2027-01-02", "2027-01-01T00:30"),
    },
}


@on_every_clock
@pytest.mark.parametrize(
    "preset", ["this_month", "last_month", "last_7_days", "last_30_days", "last_90_days"]
)
def test_period_resolve_presets_at_every_clock(now, preset):
    window = period_resolve({"period": preset})

    assert window.key == preset
    assert (window.start, window.end, window.to) == tuple(map(_at, PRESETS[now][preset]))
    assert window.data_until == now
    # No future is measured; a finished period is measured whole.
    assert window.to <= now and window.is_to_date == (window.end > now)


@on_every_clock
def test_period_resolve_empty_window_while_the_measurement_ends_before_the_month(now):
    """The running month counts from its first second measured; while the latest
    measurement still ends in the month before (a new month's first seconds), this month's
    window is empty, and its `period` is its first hour (kpis.md section 0)."""
    measured = period_resolve({"period": "this_month"})
    behind = period_resolve(
        {"period": "this_month"}, measured_until=month_start(now) - timedelta(seconds=5)
    )

    assert not measured.is_empty and measured.period == Period(month_start(now), now)
    assert behind.is_empty and behind.to == month_start(now)
    assert behind.period == Period(month_start(now), month_start(now) + timedelta(hours=1))


def test_period_resolve_months_quarters_and_custom_bounds(now):
    november = period_resolve({"period": "2026-11"})
    q3 = period_resolve({"period": "2026-Q3"})
    custom = period_resolve({"from": "2026-11-03", "to": "2026-11-04T06:00:00Z"})

    assert (november.start, november.to, november.label) == (
        _at("2026-11-01"),
        _at("2026-12-01"),
        "November 2026",
    )
    assert (q3.start, q3.to, q3.label) == (_at("2026-07-01"), _at("2026-10-01"), "Q3 2026")
    assert (custom.key, custom.start, custom.to) == (
        "custom",
        _at("2026-11-03"),
        _at("2026-11-04T06:00"),
    )
    # The API default is this month; a custom period reaching into the future stops at now.
    assert period_resolve({}).key == "this_month"
    future = period_resolve({"from": "2026-12-01", "to": "2027-03-01"})
    assert (future.end, future.to) == (_at("2027-03-01"), _at("2026-12-16T10:00"))


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "2026-13-01"}, "from"),  # impossible date
        ({"from": "2026-02-30"}, "from"),
        ({"to": "2026-11-31T00:00:00Z", "from": "2026-11-01"}, "to"),
        ({"from": "0999-01-01", "to": "2026-01-01"}, "from"),  # outside 2000–2100
        ({"from": "2026-01-01", "to": "9999-12-31"}, "to"),
        ({"from": "0001-01-01T00:00:00Z", "to": "9999-12-31T23:00:00Z"}, "from"),
        ({"from": "2000-01-01", "to": "2026-01-01"}, "to"),  # longer than 3 years
        ({"from": "2026-11-01T10:30:00Z", "to": "2026-11-02"}, "from"),  # not a whole hour
        ({"from": "2026-11-01T10:00:00", "to": "2026-11-02"}, "from"),  # no zone
        ({"from": "yesterday"}, "from"),
        ({"from": "2026-11-02", "to": "2026-11-01"}, "to"),
        ({"period": "last_30_days", "from": "2026-11-01"}, "period"),  # both forms
        ({"period": "30d"}, "period"),
        ({"period": "2026-13"}, "period"),
        ({"period": "1999-12"}, "period"),
        ({"period": "2026-Q5"}, "period"),
        ({"period": "0000-01"}, "period"),  # year 0: no date can be built
        ({"period": "0000-Q1"}, "period"),
        ({"period": "9999-12"}, "period"),
    ],
)
def test_period_resolve_refuses_naming_the_parameter(params, field):
    with pytest.raises(FieldError) as refused:
        period_resolve(params)

    assert refused.value.field == field


def test_period_resolve_three_years_is_the_longest(now):
    window = period_resolve({"from": "2023-12-01", "to": "2026-12-01"})

    assert (window.start, window.to) == (_at("2023-12-01"), _at("2026-12-01"))


@on_every_clock
def test_month_arithmetic_crosses_years(now):
    assert month_start(next_month(now)) == next_month(now) > now >= month_start(now)
    assert months_before(now, 12) == month_start(now).replace(year=month_start(now).year - 1)
    assert next_month(months_before(now, 1)) == month_start(now)


@on_every_clock
def test_report_periods_at_every_clock(db, now):
    this_month = report_period_parse({"period": f"{now:%Y-%m}"})
    last = months_before(now, 1)
    last_month = report_period_parse({"period": f"{last:%Y-%m}"})
    quarter = f"{last:%Y}-Q{(last.month - 1) // 3 + 1}"

    # The month in progress runs to where it is measured (here now: not to the hour).
    assert this_month.is_to_date and this_month.start == month_start(now)
    assert this_month.period.end == now
    # Last month is whole, whichever year it was in.
    assert (last_month.start, last_month.period.end, last_month.is_to_date) == (
        last,
        month_start(now),
        False,
    )
    # Its quarter is still running in December, and over on 1 January.
    q4 = report_period_parse({"period": quarter})
    assert q4.is_to_date == (now.month == 12)
    with pytest.raises(FieldError, match="not started"):
        report_period_parse({"period": f"{next_month(now):%Y-%m}"})


def test_window_resolve_stops_where_usage_is_metered(db, now, tenant_a):
    """Usage that arrived three hours ago still waits for the fold: the window ends where it
    was received (to the second, not the hour: before the rate ever ran, the measurement is
    where usage is folded), and says so, instead of counting time not yet metered as idle
    GPUs."""
    from datetime import timedelta

    from metering.models import FoldPending
    from metering.selectors.usage import window_resolve

    assert window_resolve({"period": "this_month"}).to == _at("2026-12-16T10:00")
    at = _at("2026-12-16T07:10")
    FoldPending.objects.create(
        first_id=1, last_id=1, time_min=at, time_max=at, events=1,
        queued_at=now - timedelta(hours=2, minutes=50),
    )  # fmt: skip

    window = window_resolve({"period": "this_month"})
    last_month = window_resolve({"period": "last_month"})

    assert (window.data_until, window.to) == (
        now - timedelta(hours=2, minutes=50),
        _at("2026-12-16T07:10"),
    )
    assert window.is_lagging and not last_month.is_lagging
    assert last_month.to == _at("2026-12-01")  # a finished month is whole


def test_data_until_keeps_moving_while_events_keep_arriving(db, now):
    """Under continuous ingestion something always waits for the fold; data_until is the
    receipt of the oldest event still waiting (kpis.md section 0), not the fold's last idle
    moment, so it moves as the fold catches up."""
    from datetime import timedelta

    from metering.models import FoldMark, FoldPending
    from metering.selectors.usage import usage_metered_until

    FoldMark.objects.create(pk=1, completed_at=now - timedelta(hours=5))  # never idle since
    for event_id, minutes in ((1, 30), (2, 20), (3, 5)):
        FoldPending.objects.create(
            first_id=event_id, last_id=event_id, time_min=now, time_max=now, events=1,
            queued_at=now - timedelta(minutes=minutes),
        )  # fmt: skip
    assert usage_metered_until(now=now) == now - timedelta(minutes=30)
    FoldPending.objects.filter(first_id=1).delete()  # the fold took the oldest
    assert usage_metered_until(now=now) == now - timedelta(minutes=20)


@pytest.mark.parametrize("value", ["0000-01", "9999-12", "2026-00", "2026-1", "", None])
def test_month_parse_refuses_naming_the_field(value):
    from portal.periods import month_parse

    with pytest.raises(FieldError) as refused:
        month_parse(value, field="month")
    assert refused.value.field == "month"


def test_pages_and_apis_taking_a_month_answer_bad_years_without_an_error(db, users, client):
    client.force_login(users["operator"])
    assert client.get("/billing/sla/?month=9999-12").status_code == 200
    assert client.get("/billing/sla/?month=0000-01").status_code == 200
    assert client.get("/api/v1/kpis?period=0000-01").status_code == 400
    assert client.get("/api/v1/close/0000-01").status_code == 400


@pytest.mark.parametrize(
    ("start", "end", "partial"),
    [
        # Last 30 days up to today's 20:00: today only.
        (datetime(2026, 11, 6, tzinfo=UTC), datetime(2026, 12, 5, 20, tzinfo=UTC),
         {date(2026, 12, 5)}),
        # Whole days: none.
        (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC), set()),
        # Custom hours within a day, and hours across two days.
        (datetime(2026, 3, 2, 10, tzinfo=UTC), datetime(2026, 3, 2, 14, tzinfo=UTC),
         {date(2026, 3, 2)}),
        (datetime(2026, 3, 2, 10, tzinfo=UTC), datetime(2026, 3, 4, 1, tzinfo=UTC),
         {date(2026, 3, 2), date(2026, 3, 4)}),
    ],
)  # fmt: skip
def test_a_periods_partial_days_are_those_a_bound_cuts(start, end, partial):
    assert Period(start, end).partial_days == partial
