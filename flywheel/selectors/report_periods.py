"""Report periods: the UTC months and quarters that hold metered usage, resolved by the one
period resolver (portal.periods)."""

from __future__ import annotations

from datetime import datetime

from metering.selectors.usage import first_metered_hour, window_resolve
from portal import clock
from portal.errors import FieldError
from portal.periods import Window, month_start, months_after


def report_period_parse(params, *, now: datetime | None = None) -> Window:
    """A report's period from request parameters: `period=` (`YYYY-MM`, `YYYY-Qn` or a
    preset) or custom `from`/`to`, as every page resolves it; one still running is measured
    to the current hour. FieldError naming `period` (or `from`) when it has not started."""
    now = now or clock.now()
    window = window_resolve(params, now=now)
    if window.start >= now:
        raise FieldError("period" if params.get("period") else "from", "it has not started yet")
    return window


def report_periods(*, now: datetime | None = None) -> list[Window]:
    """Every month and quarter from the first metered usage to now, newest first."""
    now = now or clock.now()
    first = first_metered_hour()
    if first is None:
        return []
    keys: list[str] = []
    month = month_start(first)
    while month < now:
        quarter = f"{month.year}-Q{(month.month - 1) // 3 + 1}"
        keys += [f"{month:%Y-%m}"] + ([quarter] if quarter not in keys else [])
        month = months_after(month, 1)
    periods = [report_period_parse({"period": key}, now=now) for key in keys]
    return sorted(periods, key=lambda p: (p.start, p.period.end), reverse=True)
