"""Market figures of the cockpit (kpis.md 4b): how concentrated the revenue is, which
tenants bring volume and which bring price, whether tenants grow or leave, and the revenue
of each cohort. Pure functions of the tenants' revenue and paid tokens (their selectors
read the ledger for closed months and the rating otherwise: flywheel.selectors.market)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT, ratio_of

ZERO = Decimal(0)
MILLION = Decimal(1_000_000)

# The 2023 US merger guidelines' grades of a market by its HHI (on shares 0-1).
HIGHLY_CONCENTRATED = "highly concentrated"
MODERATELY_CONCENTRATED = "moderately concentrated"
UNCONCENTRATED = "unconcentrated"
HHI_HIGH = Decimal("0.18")
HHI_MODERATE = Decimal("0.10")

# The quadrant of consumption (share of paid tokens) × value (revenue per million of them).
ANCHOR, VOLUME, PREMIUM, LONG_TAIL = "anchor", "volume", "premium", "long tail"

# Net and gross revenue retention over 12 months, and 3 and 1 where the factory's service
# life is shorter (kpis.md 4b).
LOOKBACKS = (12, 3, 1)


def hhi_grade(hhi: Decimal) -> str:
    """Above 0.18 highly concentrated, 0.10-0.18 moderately, below 0.10 unconcentrated."""
    if hhi > HHI_HIGH:
        return HIGHLY_CONCENTRATED
    if hhi >= HHI_MODERATE:
        return MODERATELY_CONCENTRATED
    return UNCONCENTRATED


@dataclass(frozen=True)
class Concentration:
    """Revenue shares: the largest tenant's, the five largest tenants', their HHI."""

    top1: Decimal
    top5: Decimal
    hhi: Decimal
    grade: str


def concentration(revenues: Mapping[str, Decimal]) -> Concentration | None:
    """Concentration of the revenue of the tenants with revenue (> 0); None without any."""
    earning = sorted((v for v in revenues.values() if v > 0), reverse=True)
    total = sum(earning, ZERO)
    if not earning:
        return None
    with localcontext(KPI_CONTEXT):
        shares = [revenue / total for revenue in earning]
        hhi = sum((share * share for share in shares), ZERO)
        return Concentration(
            top1=shares[0], top5=sum(shares[:5], ZERO), hhi=hhi, grade=hhi_grade(hhi)
        )


@dataclass(frozen=True)
class QuadrantPoint:
    """One tenant in the quadrant: x its share of the paid tokens, y its revenue per million
    paid tokens (None without paid tokens: then it has no place and no label)."""

    tenant: str
    revenue: Decimal
    paid_tokens: int
    x: Decimal
    y: Decimal | None
    label: str | None


@dataclass(frozen=True)
class Quadrant:
    """The tenants with revenue placed against the medians that split them."""

    points: list[QuadrantPoint]
    x_median: Decimal | None
    y_median: Decimal | None


def quadrant(sales: Mapping[str, tuple[Decimal, int]]) -> Quadrant:
    """Each tenant with revenue (> 0), from its (revenue, paid tokens): split at the medians
    over these tenants, a tenant at a median counting as high; high x and high y `anchor`,
    high x and low y `volume`, low x and high y `premium`, low both `long tail`."""
    earning = {t: s for t, s in sales.items() if s[0] > 0}
    paid = sum((tokens for _, tokens in earning.values()), 0)
    with localcontext(KPI_CONTEXT):
        xs = {t: ratio_of(tokens, paid) or ZERO for t, (_, tokens) in earning.items()}
        ys = {t: revenue * MILLION / tokens for t, (revenue, tokens) in earning.items() if tokens}
        x_median = statistics.median(xs.values()) if xs else None
        y_median = statistics.median(ys.values()) if ys else None
    points = []
    for tenant, (revenue, tokens) in sorted(earning.items(), key=lambda item: -item[1][0]):
        x, y = xs[tenant], ys.get(tenant)
        label = None
        if y is not None and x_median is not None and y_median is not None:
            label = {
                (True, True): ANCHOR,
                (True, False): VOLUME,
                (False, True): PREMIUM,
                (False, False): LONG_TAIL,
            }[(x >= x_median, y >= y_median)]
        points.append(QuadrantPoint(tenant, revenue, tokens, x, y, label))
    return Quadrant(points=points, x_median=x_median, y_median=y_median)


def retention(
    *, base: Mapping[str, Decimal], current: Mapping[str, Decimal]
) -> tuple[Decimal | None, Decimal | None]:
    """(NRR, GRR) of month M against month M−L: over the tenants with revenue (> 0) in M−L,
    their revenue in M over their revenue in M−L; GRR caps each tenant's M revenue at its
    M−L revenue. None when no tenant had revenue in M−L."""
    earning = {t: v for t, v in base.items() if v > 0}
    before = sum(earning.values(), ZERO)
    now = sum((current.get(t, ZERO) for t in earning), ZERO)
    kept = sum((min(current.get(t, ZERO), v) for t, v in earning.items()), ZERO)
    return ratio_of(now, before), ratio_of(kept, before)


@dataclass(frozen=True)
class Cohort:
    """The tenants whose first month with revenue is `month`, and their revenue in each of
    the months asked (in their order)."""

    month: datetime
    tenants: int
    revenue: list[Decimal]


def cohorts(
    *,
    history: Mapping[str, Mapping[datetime, Decimal]],
    revenue: Mapping[str, Mapping[datetime, Decimal]],
    months: Iterable[datetime],
) -> list[Cohort]:
    """Tenants grouped by their first month with revenue (> 0) in `history` (every month
    known), each cohort's revenue per month of `months` from `revenue`; cohorts with no
    revenue in those months are left out, oldest cohort first."""
    months = list(months)
    first = {
        tenant: min(month for month, value in by_month.items() if value > 0)
        for tenant, by_month in history.items()
        if any(value > 0 for value in by_month.values())
    }
    members: dict[datetime, list[str]] = {}
    for tenant, month in first.items():
        members.setdefault(month, []).append(tenant)
    table = []
    for month in sorted(members):
        row = [sum((revenue.get(t, {}).get(m, ZERO) for t in members[month]), ZERO) for m in months]
        if any(row):
            table.append(Cohort(month=month, tenants=len(members[month]), revenue=row))
    return table
