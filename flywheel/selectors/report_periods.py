"""Report periods: UTC months and quarters, parsed from their keys and listed from the usage."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from metering.selectors.usage import first_metered_hour
from portal import clock
from portal.periods import hour_floor


@dataclass(frozen=True)
class ReportPeriod:
    """A report's period: a UTC month (YYYY-MM) or quarter (YYYY-Qn), clipped to now."""

    key: str
    label: str
    start: datetime
    end: datetime
    is_to_date: bool = False


_MONTH = re.compile(r"^(\d{4})-(\d{2})$")

_QUARTER = re.compile(r"^(\d{4})-Q([1-4])$")


def _month(year: int, month: int) -> datetime:
    return datetime(year + (month - 1) // 12, (month - 1) % 12 + 1, 1, tzinfo=UTC)


def report_period_parse(value: str, *, now: datetime | None = None) -> ReportPeriod:
    """`YYYY-MM` or `YYYY-Qn`; a period still running ends at the current hour. ValueError
    when the text is neither or the period has not started."""
    now = now or clock.now()
    if match := _MONTH.match(value or ""):
        year, month = int(match[1]), int(match[2])
        if not 1 <= month <= 12:
            raise ValueError("period: the month must be 01 to 12")
        start, end = _month(year, month), _month(year, month + 1)
        label = start.strftime("%B %Y")
    elif match := _QUARTER.match(value or ""):
        year, quarter = int(match[1]), int(match[2])
        start, end = _month(year, 3 * quarter - 2), _month(year, 3 * quarter + 1)
        label = f"Q{quarter} {year}"
    else:
        raise ValueError("period: use YYYY-MM (a month) or YYYY-Qn (a quarter)")
    if start >= now:
        raise ValueError("period: it has not started yet")
    current_hour = hour_floor(now)
    is_to_date = end > now
    if is_to_date:
        end = max(current_hour, start + timedelta(hours=1))
        label = f"{label} (to {end:%d %b %H:00} UTC)"
    return ReportPeriod(key=value, label=label, start=start, end=end, is_to_date=is_to_date)


def report_periods(*, now: datetime | None = None) -> list[ReportPeriod]:
    """Every month and quarter from the first metered usage to now, newest first."""
    now = now or clock.now()
    first = first_metered_hour()
    if first is None:
        return []
    keys: list[str] = []
    month = _month(first.year, first.month)
    while month < now:
        quarter = f"{month.year}-Q{(month.month - 1) // 3 + 1}"
        keys += [f"{month:%Y-%m}"] + ([quarter] if quarter not in keys else [])
        month = _month(month.year, month.month + 1)
    periods = [report_period_parse(key, now=now) for key in keys]
    return sorted(periods, key=lambda p: (p.start, p.end), reverse=True)
