"""The demand a scenario assumes, and the monthly basis of the flywheel's figures
(kpis.md section 6, step 3).

- `measured` (the default): the period's production is what customers buy; a lever serves
  it with other resources, it sells nothing more.
- `growth`: a 12-month series, month m's demand the measured production × (1 + g/100)^m,
  served up to what the available GPU-seconds produce when all busy.
- `unlimited`: the market takes every extra token at today's realized prices (the
  diagnosis' "opportunity if demand follows"; not an upper bound of demand).

Pure: imports no Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from typing import cast

from flywheel.domain.kpis import KPI_CONTEXT, period_seconds
from flywheel.domain.tfom import SECONDS_PER_MONTH

DEMANDS = ("measured", "growth", "unlimited")

GROWTH_MIN = Decimal(-50)  # % per month
GROWTH_MAX = Decimal(100)

GROWTH_MONTHS = 12  # a growth scenario's series: months 1 … 12 after the measured period

ONE = Decimal(1)


@dataclass(frozen=True, kw_only=True)
class Demand:
    kind: str = "measured"
    growth_pct_per_month: Decimal | None = None  # growth only

    def __post_init__(self) -> None:
        if self.kind not in DEMANDS:
            raise ValueError(f"demand must be one of {', '.join(DEMANDS)}")
        if self.kind == "growth":
            if self.growth_pct_per_month is None:
                raise ValueError("a growth demand needs growth_pct_per_month")
            if not GROWTH_MIN <= self.growth_pct_per_month <= GROWTH_MAX:
                raise ValueError(
                    f"growth_pct_per_month must be between {GROWTH_MIN} and {GROWTH_MAX}"
                )
        elif self.growth_pct_per_month is not None:
            raise ValueError("growth_pct_per_month applies to a growth demand only")

    @property
    def is_bounded(self) -> bool:
        """Whether production is held to a demand (measured, growth) or follows capacity."""
        return self.kind != "unlimited"

    def scale(self, month: int = GROWTH_MONTHS) -> Decimal | None:
        """Demand as a multiple of the measured production in `month` (1 … 12) after the
        measured period: 1 when measured, (1 + g/100)^month when growing, None unlimited."""
        if self.kind == "unlimited":
            return None
        if self.kind == "measured":
            return ONE
        growth = cast(Decimal, self.growth_pct_per_month)  # a growth demand has one
        with localcontext(KPI_CONTEXT):
            return (ONE + growth / 100) ** month

    @property
    def label(self) -> str:
        if self.kind == "growth":
            growth = cast(Decimal, self.growth_pct_per_month)  # a growth demand has one
            return f"measured demand growing {growth.normalize():f}% a month"
        if self.kind == "unlimited":
            return "unlimited demand (the market takes every extra token)"
        return "measured demand (the period's production, served as measured)"

    def as_json(self) -> dict:
        shape: dict = {"demand": self.kind}
        if self.kind == "growth":
            growth = cast(Decimal, self.growth_pct_per_month)  # a growth demand has one
            shape["growth_pct_per_month"] = float(growth)
        return shape


MEASURED = Demand()
UNLIMITED = Demand(kind="unlimited")


def is_calendar_month(*, start: datetime, end: datetime) -> bool:
    """Whether [start, end) is one whole calendar month (UTC)."""
    first = start.astimezone(UTC)
    if (first.day, first.hour, first.minute, first.second, first.microsecond) != (1, 0, 0, 0, 0):
        return False
    year, month = (first.year + 1, 1) if first.month == 12 else (first.year, first.month + 1)
    return end.astimezone(UTC) == first.replace(year=year, month=month)


def per_month(amount: Decimal, *, start: datetime, end: datetime) -> Decimal:
    """An amount over [start, end) per month: the amount itself when the period is one
    whole calendar month (so it equals TFOM's figure of that month), else the amount over
    months(P), a month of 365/12 days."""
    if is_calendar_month(start=start, end=end):
        return amount
    with localcontext(KPI_CONTEXT):
        return amount * SECONDS_PER_MONTH / period_seconds(start=start, end=end)


def month_basis(*, start: datetime, end: datetime) -> str:
    """What "per month" means for [start, end), as its figures are labelled: "calendar
    month" (the period is one) or "30.4-day month" (the period's figure over months(P))."""
    return "calendar month" if is_calendar_month(start=start, end=end) else "30.4-day month"
