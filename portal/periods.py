"""Periods `[start, end)`, UTC, and the one resolver of kpis.md section 0: every page, API
operation and export asks `period_resolve` which window a request means and which part of it
can be measured."""

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TypeVar

from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.utils.dateparse import parse_date, parse_datetime

from portal import clock
from portal.errors import FieldError

# Requests are bounded (kpis.md section 0): bounds within these years, at most this long.
FIRST_YEAR, LAST_YEAR = 2000, 2100
YEARS_MESSAGE = f"must be within the years {FIRST_YEAR}–{LAST_YEAR}"
LONGEST = timedelta(days=3 * 365 + 1)
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Period:
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    @property
    def partial_days(self) -> frozenset[date]:
        """The UTC days the period holds only part of: its first and last, where a bound is
        not at midnight (a day in progress, a custom window's hours)."""
        return frozenset(
            bound.date() for bound in (self.start, self.end) if bound.timetz() != time(tzinfo=UTC)
        )


_M = TypeVar("_M", bound=Model)


def filter_within(
    *,
    queryset: QuerySet[_M],
    field: str,
    start: datetime | None = None,
    end: datetime | None = None,
) -> QuerySet[_M]:
    """The rows of `queryset` whose `field` lies in [start, end) (either bound optional)."""
    bounds = {}
    if start is not None:
        bounds[f"{field}__gte"] = start
    if end is not None:
        bounds[f"{field}__lt"] = end
    return queryset.filter(**bounds) if bounds else queryset


def validate_whole_hour(value) -> None:
    """Effective-dated versions start on a whole UTC hour (minutes and seconds zero)."""
    if value.minute or value.second or value.microsecond:
        raise ValidationError("must be a whole UTC hour (minutes and seconds zero)")


def validate_years(value) -> None:
    """A date within the years the portal takes (kpis.md section 0)."""
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise ValidationError(YEARS_MESSAGE)


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


def day_ceil(moment: datetime) -> datetime:
    """`moment` itself at midnight, else the start of the next UTC day."""
    floor = day_floor(moment)
    return floor if floor == moment else floor + timedelta(days=1)


def month_start(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month(moment: datetime) -> datetime:
    return month_start(month_start(moment) + timedelta(days=32))


def is_part_of_month(month: datetime, *, start: datetime, end: datetime) -> bool:
    """Whether [start, end) holds only part of the UTC month beginning at `month` (the month
    in progress, a first month begun mid-way): ui.md marks such a month as partial."""
    return start != month or end != next_month(month)


def month_last_day(moment: datetime) -> date:
    """The last UTC day of the month holding `moment` (an invoice's accounting date)."""
    return (next_month(moment) - timedelta(days=1)).date()


def months_before(moment: datetime, months: int) -> datetime:
    """The first instant of the UTC month `months` before the one holding `moment`."""
    return months_after(moment, -months)


def last_month(now: datetime) -> datetime:
    """The first instant of the UTC month before the one holding `now`: the period preset
    `last_month`, and the month the month-end close closes by default."""
    return months_before(now, 1)


def months_after(moment: datetime, months: int) -> datetime:
    """The first instant of the UTC month `months` after the one holding `moment`."""
    start = month_start(moment)
    index = start.year * 12 + start.month - 1 + months
    return start.replace(year=index // 12, month=index % 12 + 1)


# The presets of the period picker, in its order; a month (YYYY-MM) and a quarter (YYYY-Qn)
# are keys too, and from/to make a custom period.
PRESETS = {
    "this_month": "This month",
    "last_month": "Last month",
    "last_7_days": "Last 7 days",
    "last_30_days": "Last 30 days",
    "last_90_days": "Last 90 days",
}
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_QUARTER = re.compile(r"^(\d{4})-Q([1-4])$")


@dataclass(frozen=True)
class Window:
    """A period as a request named it (`key`, `label`, `[start, end)`) and the window actually
    measured, `[start, to)` (kpis.md section 0): `to = min(end, measured_until)`, where
    `measured_until` is the end of the latest measurement, the published cut
    (portal.pipeline), to the second and not floored to the hour, so no future and no time
    not yet folded is counted and the running hour counts as far as it is; a closed month is
    whole. `data_until` is how far usage is folded now (at or after `to`)."""

    key: str
    label: str
    start: datetime
    end: datetime
    to: datetime
    data_until: datetime
    now: datetime
    data_from: datetime | None = None  # the factory's first instant in service, if known

    @property
    def is_before_service(self) -> bool:
        """The whole period lies before the factory entered service."""
        return self.data_from is not None and self.end <= self.data_from

    @property
    def period(self) -> Period:
        """The measured window (its first hour when it is empty; see `is_empty`)."""
        return Period(self.start, self.to if self.to > self.start else self.start + HOUR)

    @property
    def requested(self) -> Period:
        return Period(self.start, self.end)

    @property
    def is_empty(self) -> bool:
        return self.to <= self.start

    @property
    def is_to_date(self) -> bool:
        """The period is still running: it is measured up to `to`, not to its end."""
        return self.to < self.end

    @property
    def is_lagging(self) -> bool:
        """Metering lags: usage is folded more than an hour short of the period's end or now
        (pages then say "usage metered until …", so a lag never reads as idle GPUs)."""
        return min(self.end, self.now) - self.data_until > timedelta(hours=1)

    @property
    def caption(self) -> str:
        """The label, saying how far a running period is measured."""
        end = self.period.end
        return f"{self.label} (to {end:%d %b %H:%M:%S} UTC)" if self.is_to_date else self.label


def _year_bound(year: int, field: str) -> int:
    """A year the portal takes (checked before a date is built: year 0 cannot be)."""
    if not FIRST_YEAR <= year <= LAST_YEAR:
        raise FieldError(field, YEARS_MESSAGE)
    return year


def month_parse(value: str | None, *, field: str = "month") -> datetime:
    """A month, YYYY-MM, within the years the portal takes: its first instant (UTC)."""
    match = _MONTH.match((value or "").strip())
    if match is None:
        raise FieldError(field, "must be a month, YYYY-MM")
    year, month = _year_bound(int(match[1]), field), int(match[2])
    if not 1 <= month <= 12:
        raise FieldError(field, "the month must be 01 to 12")
    return datetime(year, month, 1, tzinfo=UTC)


def _year_check(moment: datetime, field: str) -> datetime:
    _year_bound(moment.year, field)
    return moment


def instant_parse(value: str, field: str) -> datetime:
    """A bound: a YYYY-MM-DD date (its midnight) or an RFC 3339 date-time with a zone, on a
    whole UTC hour."""
    value = value.strip()
    try:
        day = parse_date(value) if len(value) == 10 else None
        parsed = (
            datetime.combine(day, time.min, tzinfo=UTC)
            if day is not None
            else parse_datetime(value)
        )
    except (ValueError, OverflowError):
        raise FieldError(field, "is not a possible date") from None
    if parsed is None:
        raise FieldError(field, "must be an RFC 3339 date-time or a YYYY-MM-DD date")
    if parsed.tzinfo is None:
        raise FieldError(field, "must include a time zone (Z or +hh:mm)")
    try:
        parsed = parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise FieldError(field, "is not a possible date") from None
    _year_check(parsed, field)
    if parsed != hour_floor(parsed):
        raise FieldError(field, "must be a whole UTC hour (minutes and seconds zero)")
    return parsed


def _named(key: str, now: datetime) -> tuple[datetime, datetime, str]:
    """`[start, end)` and label of a preset, a month or a quarter."""
    today = day_floor(now)
    days = {"last_7_days": 7, "last_30_days": 30, "last_90_days": 90}
    if key == "this_month":
        return month_start(now), next_month(now), PRESETS[key]
    if key == "last_month":
        return last_month(now), month_start(now), PRESETS[key]
    if key in days:
        return today - timedelta(days=days[key] - 1), today + timedelta(days=1), PRESETS[key]
    if _MONTH.match(key):
        start = month_parse(key, field="period")
        return start, next_month(start), start.strftime("%B %Y")
    if match := _QUARTER.match(key):
        year, quarter = _year_bound(int(match[1]), "period"), int(match[2])
        start = datetime(year, 3 * quarter - 2, 1, tzinfo=UTC)
        return start, months_after(start, 3), f"Q{quarter} {year}"
    raise FieldError(
        "period", f"must be one of {', '.join(PRESETS)}, a month YYYY-MM or a quarter YYYY-Qn"
    )


def period_resolve(
    params,
    *,
    now: datetime | None = None,
    default: str = "this_month",
    data_until=None,
    measured_until=None,
    data_from: datetime | None = None,
) -> Window:
    """The window a request means: `period=` (a preset, `YYYY-MM`, `YYYY-Qn`; default
    `default`) or custom `from`/`to` (whole UTC hours; both forms at once is a 400), bounded
    to the years 2000–2100 and 3 years. `data_until` (default now) is how far usage has been
    folded, `measured_until` (default data_until) the end of the latest measurement, where
    the window's `to` stops; neither exceeds now. `data_from`, the
    factory's first instant in service, bounds what the picker offers (picker_keys)."""
    now = now or clock.now()
    data_until = min(now, data_until) if data_until is not None else now
    measured = data_until if measured_until is None else min(now, measured_until)
    custom = bool(params.get("from") or params.get("to"))
    if custom and params.get("period"):
        raise FieldError("period", "give either period or from/to, not both")
    if custom:
        start = instant_parse(params["from"], "from") if params.get("from") else month_start(now)
        end = instant_parse(params["to"], "to") if params.get("to") else hour_ceil(now)
        if end <= start:
            raise FieldError("to", "must be after from")
        key, label = "custom", f"{start:%Y-%m-%d %H:%M} → {end:%Y-%m-%d %H:%M} UTC"
    else:
        key = (params.get("period") or default).strip()
        start, end, label = _named(key, now)
    if end - start > LONGEST:
        raise FieldError("to" if custom else "period", "a period is at most 3 years long")
    to = max(measured, start) if end > measured else end
    return Window(
        key=key, label=label, start=start, end=end, to=to, data_until=data_until, now=now,
        data_from=data_from,
    )  # fmt: skip


def months_back(count: int, *, now: datetime, since: datetime | None = None) -> list[datetime]:
    """The starts of the last `count` months up to now's, newest first; none that ends before
    `since` (the factory's first instant in service: nothing earlier has figures), and at
    least now's month."""
    months = [months_before(now, n) for n in range(count)]
    if since is not None:
        months = [month for month in months if next_month(month) > since] or months[:1]
    return months


def picker_keys(
    *, now: datetime | None = None, since: datetime | None = None
) -> dict[str, list[str]]:
    """The months (13, as far back as events are kept) and quarters (5) the picker offers,
    newest first; none that ends before `since` (the factory's first instant in service)."""
    months = months_back(13, now=now or clock.now(), since=since)
    quarters = []
    for month in months:
        key = f"{month.year}-Q{(month.month - 1) // 3 + 1}"
        if key not in quarters:
            quarters.append(key)
    return {"Months": [f"{m:%Y-%m}" for m in months], "Quarters": quarters[:5]}


def day_parse(value: str, *, field: str):
    """A YYYY-MM-DD day within the years the portal takes; a 400 naming `field` otherwise."""
    try:
        day = parse_date(value.strip())
    except (ValueError, OverflowError):
        raise FieldError(field, "is not a possible date") from None
    if day is None:
        raise FieldError(field, "must be a day, YYYY-MM-DD")
    _year_bound(day.year, field)
    return day
