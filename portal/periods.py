"""Periods `[from, to)` from query strings: RFC 3339 or dates, UTC; default this month so far."""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_date, parse_datetime

from portal import clock


@dataclass(frozen=True)
class Period:
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def validate_whole_hour(value) -> None:
    """Effective-dated versions start on a whole UTC hour (minutes and seconds zero)."""
    if value.minute or value.second or value.microsecond:
        raise ValidationError("must be a whole UTC hour (minutes and seconds zero)")


def hour_floor(moment: datetime) -> datetime:
    """The start of the UTC hour holding `moment`."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hour_ceil(moment: datetime) -> datetime:
    """`moment` itself on a whole hour, else the start of the next UTC hour (rollups are
    hourly: the hour in progress counts as far as it has been metered)."""
    floor = hour_floor(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


def day_floor(moment: datetime) -> datetime:
    """The start of the UTC day holding `moment`."""
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month(moment: datetime) -> datetime:
    return month_start(month_start(moment) + timedelta(days=32))


def months_before(moment: datetime, months: int) -> datetime:
    """The first instant of the UTC month `months` before the one holding `moment`."""
    start = month_start(moment)
    index = start.year * 12 + start.month - 1 - months
    return start.replace(year=index // 12, month=index % 12 + 1)


def _parse(value: str, field: str) -> datetime:
    day = parse_date(value) if len(value) == 10 else None
    if day is not None:
        return datetime.combine(day, time.min, tzinfo=UTC)
    try:
        parsed = parse_datetime(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise ValidationError({field: "must be an RFC 3339 date-time or a YYYY-MM-DD date"})
    if parsed.tzinfo is None:
        raise ValidationError({field: "must include a time zone (Z or +hh:mm)"})
    return parsed.astimezone(UTC)


def period_from_query(params, *, now: datetime | None = None) -> Period:
    """`from`/`to` of a request (missing: the current calendar month so far)."""
    now = now or clock.now()
    start = _parse(params["from"], "from") if params.get("from") else month_start(now)
    end = _parse(params["to"], "to") if params.get("to") else max(now, start + timedelta(seconds=1))
    if end <= start:
        raise ValidationError({"to": "must be after from"})
    return Period(start, end)


def day_bounds(day: date) -> Period:
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return Period(start, start + timedelta(days=1))


PRESETS = {
    "30d": "Last 30 days",
    "this_month": "This month",
    "last_month": "Last month",
    "90d": "Last 90 days",
}


def period_from_preset(
    params, *, now: datetime | None = None, default: str = "30d"
) -> tuple[Period, str]:
    """A page's period: `from`/`to` when given (preset "custom"), else a named preset."""
    now = now or clock.now()
    if params.get("from") or params.get("to"):
        return period_from_query(params, now=now), "custom"
    preset = params.get("period", default)
    today = datetime.combine(now.astimezone(UTC).date(), time.min, tzinfo=UTC)
    if preset == "this_month":
        return Period(month_start(now), today + timedelta(days=1)), preset
    if preset == "last_month":
        end = month_start(now)
        return Period(month_start(end - timedelta(days=1)), end), preset
    if preset == "90d":
        return Period(today - timedelta(days=89), today + timedelta(days=1)), preset
    return Period(today - timedelta(days=29), today + timedelta(days=1)), "30d"
