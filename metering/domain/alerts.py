"""The params of metering's alert kinds (kpis.md section 3c): reconciliation drift, a silent
source, a scrape target down. Pure: each check returns the params normalized, defaults
filled in, or raises a FieldError naming `params.<x>`; the evaluations read the figures
(metering.selectors.alerts)."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from metering.domain.usage.sources import QUIET_FOR, RECENT
from portal.errors import FieldError

DRIFT_HOURS: Final = 2  # consecutive flagged whole hours that fire, by default
DRIFT_HOURS_MAX: Final = 168  # a week: the evaluation reads this many hours and a day more
SILENT_MINUTES: Final = int(QUIET_FOR / timedelta(minutes=1))  # 15
# A source quiet for a day is no longer expected to send (RECENT): a longer N never fires.
SILENT_MINUTES_MAX: Final = int(RECENT / timedelta(minutes=1)) - 1
SCRAPE_FAILURES: Final = 4  # consecutive failed scrapes (about 2 minutes at one every 30 s)
SCRAPE_FAILURES_MAX: Final = 2880  # a day of scrapes at one every 30 s


def reconciliation_drift_params_check(params: dict) -> dict:
    """{"hours": N}: whole hours from 1 to 168, default 2."""
    return {"hours": _whole(params, "hours", default=DRIFT_HOURS, most=DRIFT_HOURS_MAX)}


def source_silent_params_check(params: dict) -> dict:
    """{"minutes": N}: whole minutes from 1 to 1439 (under a day), default 15."""
    return {"minutes": _whole(params, "minutes", default=SILENT_MINUTES, most=SILENT_MINUTES_MAX)}


def scrape_down_params_check(params: dict) -> dict:
    """{"failures": N}: consecutive failed scrapes from 1 to 2880, default 4."""
    return {
        "failures": _whole(params, "failures", default=SCRAPE_FAILURES, most=SCRAPE_FAILURES_MAX)
    }


def _whole(params: dict, name: str, *, default: int, most: int) -> int:
    """The rule's one param `name`, a whole number from 1 to `most` (absent: `default`)."""
    if unknown := sorted(set(params) - {name}):
        raise FieldError(f"params.{unknown[0]}", f"this kind takes {name} only")
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise FieldError(f"params.{name}", f"a whole number of {name} from 1 to {most}")
    return value
