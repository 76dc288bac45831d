"""What TFOM revenue takes from the ledger beside the rating (kpis.md section 5, Tie-out):
a whole closed month's revenue is the ledger's (the tie-out: its rounding, late lines and
dated documents), and any other part of a period adds the credit notes (negative) and
breakage the ledger dates inside it. The cockpit's revenue per tenant follows the same rule
(flywheel.selectors.market)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, localcontext

from billing.selectors.ledger import ledger_dated_revenue, ledger_revenue
from billing.selectors.rating.rated_usage import TenantSales
from flywheel.domain.kpis import KPI_CONTEXT
from flywheel.selectors.measurement import FactoryData
from portal.closing import closed_months
from portal.periods import day_ceil, month_start, next_month

ZERO = Decimal(0)


def month_over_revenue(sale: TenantSales) -> Decimal:
    """What a tenant's whole month adds to its revenue once the month is over (kpis.md
    section 5): its committed minimum's shortfall and its reservations' unused fees (3d),
    each as its month rated."""
    return sale.minimum_shortfall + sale.reservation_unused


def revenue_tie_out(*, data: FactoryData, start: datetime, end: datetime) -> Decimal:
    """The ledger's revenue minus the rating's over the closed months wholly inside
    [start, end) (kpis.md, Tie-out): finance's TFOM equals the ledger to the cent there."""
    difference = ZERO
    with localcontext(KPI_CONTEXT):
        for month in sorted(closed_months(start=start, end=end)):
            following = next_month(month)
            if following <= end:
                rated = sum(
                    (data.pool_inputs(i, month, following).realized_revenue for i in data.pools),
                    ZERO,
                )
                shortfall, credits = data.revenue_adjustments(start=month, end=following)
                ledger = ledger_revenue(start=month.date(), end=following.date())
                difference += ledger - (rated + shortfall - credits)
    return difference


@dataclass(frozen=True)
class Part:
    """The part [start, end) of the UTC month `month` that a period holds."""

    month: datetime
    start: datetime
    end: datetime

    @property
    def is_whole(self) -> bool:
        return self.start == self.month and self.end == next_month(self.month)

    @property
    def share(self) -> Decimal:
        """Its share of its month's seconds (how much of a monthly amount it takes)."""
        with localcontext(KPI_CONTEXT):
            return Decimal(int((self.end - self.start).total_seconds())) / Decimal(
                int((next_month(self.month) - self.month).total_seconds())
            )


def parts_of(start: datetime, end: datetime) -> list[Part]:
    """[start, end) cut at UTC month boundaries, oldest first."""
    parts, month = [], month_start(start)
    while month < end:
        parts.append(Part(month, max(month, start), min(next_month(month), end)))
        month = next_month(month)
    return parts


def dated_revenue(
    parts: Sequence[Part], *, closed: set[datetime]
) -> dict[Part, dict[str, Decimal]]:
    """Each part that is not a whole closed month (`closed`: their first instants): the
    credit notes (negative) and breakage the ledger dates inside it, per tenant slug (kpis.md
    section 5: revenue less the credit notes dated in the period; a whole closed month takes
    the ledger's whole revenue, which holds them already). Accounting dates are days: a part
    takes the days it touches. One query, whatever the parts."""
    spans = {
        part: (part.start.date(), day_ceil(part.end).date())
        for part in parts
        if not (part.is_whole and part.month in closed)
    }
    documents = ledger_dated_revenue(spans=list(spans.values()))
    dated: dict[Part, dict[str, Decimal]] = {}
    for part, (first, after) in spans.items():
        by_tenant: dict[str, Decimal] = defaultdict(lambda: ZERO)
        for (slug, day), amount in documents.items():
            if first <= day < after:
                by_tenant[slug] += amount
        dated[part] = dict(by_tenant)
    return dated


def revenue_dated(*, start: datetime, end: datetime) -> Decimal:
    """The credit notes (negative) and breakage the ledger dates in [start, end) outside its
    whole closed months, factory-wide (`dated_revenue`)."""
    parts = parts_of(start, end)
    closed = {m.astimezone(UTC) for m in closed_months(start=month_start(start), end=end)}
    return sum(
        (
            v
            for by_tenant in dated_revenue(parts, closed=closed).values()
            for v in by_tenant.values()
        ),
        ZERO,
    )
