"""The cockpit's market figures (kpis.md 4b) over a period: each tenant's revenue and paid
tokens, read from billing's published read models, then concentration, the quadrant, MRR,
NRR and GRR, and cohorts (flywheel.domain.market).

A tenant's revenue is its share of TFOM revenue (kpis.md section 5): for a whole closed
month, the ledger's (revenue accounts by accounting date, per tenant: what finance's books
say to the cent, credit notes dated in it included); for any other part of the period, the
unrounded rating (realized after promotions, covered usage at its reservations' fees), plus
its month's minimum shortfall and unused reservation fees once the month is over
(flywheel.selectors.revenue.month_over_revenue), less its SLA credits, each month's spread
over its seconds, plus the credit notes (negative) and breakage the ledger dates inside it
(TFOM's rule: flywheel.selectors.revenue.dated_revenue). Paid tokens always come from the
rating. A whole month reads one rated row per tenant; only a part of a month that holds
rated usage reads it by the hour. The queries depend on the parts of months holding usage,
never on the period's length.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from typing import Any

from django.conf import settings

from billing.selectors.credits import sla_credits_by_tenant
from billing.selectors.ledger import ledger_revenue_by_tenant_month
from billing.selectors.rating.rated_usage import (
    TenantSales,
    rating_errors,
    tenant_month_sales,
    tenant_sales,
)
from flywheel.domain import market as engine
from flywheel.domain.kpis import KPI_CONTEXT
from flywheel.selectors.revenue import Part, dated_revenue, month_over_revenue, parts_of
from flywheel.selectors.tfom import UNIT_PRICE
from metering.selectors.factory import factory_in_service_from
from portal import clock
from portal.closing import closed_months
from portal.formatting import rfc3339
from portal.models import Tenant
from portal.money import money_str, round_half_up
from portal.periods import Period, Window, month_start, months_before, next_month

ZERO = Decimal(0)
LEDGER, RATING = "ledger", "rating"


@dataclass
class Sales:
    """A part's revenue and paid tokens per tenant slug, and where its revenue comes from."""

    source: str  # LEDGER (a whole closed month) or RATING
    revenue: dict[str, Decimal] = field(default_factory=dict)
    paid_tokens: dict[str, int] = field(default_factory=dict)


def sales_read(parts: list[Part]) -> dict[Part, Sales]:
    """Each part's revenue and paid tokens per tenant (the module's rule), in a few queries
    whatever the number of months: the months' rated rows, SLA credits, the ledger over the
    closed whole months and its dated documents over the others; one more for each part of
    a month that holds rated usage (its rated usage by the hour): the work follows the data."""
    if not parts:
        return {}
    parts = sorted(set(parts), key=lambda p: (p.start, p.end))
    first, last = parts[0].month, parts[-1].end
    closed = {m.astimezone(UTC) for m in closed_months(start=first, end=last)}
    rated = tenant_month_sales(months={p.month for p in parts})
    credits = sla_credits_by_tenant(start=first, end=last)
    by_ledger = [p for p in parts if p.is_whole and p.month in closed]
    ledger = _ledger(by_ledger)
    dated = dated_revenue(parts, closed=closed)
    now = clock.now()
    result = {}
    for part in parts:
        month_sales = {slug: sale for (slug, m), sale in rated.items() if m == part.month}
        if part.is_whole or not month_sales:  # a month nobody was rated in sold nothing
            in_part = month_sales
        else:
            in_part = tenant_sales(period=Period(part.start, part.end))
        if part in by_ledger:
            revenue = {slug: v for (slug, m), v in ledger.items() if m == part.month.date()}
            sales = Sales(LEDGER, revenue=revenue)
        else:
            over = next_month(part.month) <= now  # a minimum's shortfall counts from then
            revenue = _rated(part, in_part, month_sales, credits, dated[part], over=over)
            sales = Sales(RATING, revenue=revenue)
        sales.paid_tokens = {slug: sale.paid_tokens for slug, sale in in_part.items()}
        result[part] = sales
    return result


def _ledger(parts: list[Part]) -> dict[tuple[str, Any], Decimal]:
    """The ledger's revenue per tenant and month over the months of `parts` (one query)."""
    if not parts:
        return {}
    return ledger_revenue_by_tenant_month(
        start=parts[0].month.date(), end=next_month(parts[-1].month).date()
    )


def _rated(
    part: Part,
    in_part: dict[str, TenantSales],
    month_sales: dict[str, TenantSales],
    credits: dict[tuple[str, datetime], Decimal],
    documents: dict[str, Decimal],
    *,
    over: bool,
) -> dict[str, Decimal]:
    """A part's revenue per tenant from the rating: realized after promotions, the part's
    share of the month's minimum shortfall and unused fees (once over) less its SLA credits,
    and the credit notes and breakage the ledger dates inside it."""
    share = part.share
    revenue: dict[str, Decimal] = defaultdict(lambda: ZERO)
    with localcontext(KPI_CONTEXT):
        for slug, sale in in_part.items():
            revenue[slug] += sale.realized
        for slug, sale in month_sales.items():
            if over and (extra := month_over_revenue(sale)):
                revenue[slug] += extra * share
        for (slug, month), amount in credits.items():
            if month == part.month and amount:
                revenue[slug] -= amount * share
        for slug, amount in documents.items():
            revenue[slug] += amount
    return dict(revenue)


@dataclass(frozen=True)
class RetentionRow:
    """NRR and GRR of `month` against `base` (its month `lookback` months before), or why
    there is not enough history."""

    lookback: int
    month: datetime
    base: datetime
    nrr: Decimal | None
    grr: Decimal | None
    reason: str = ""


@dataclass
class Market:
    """The market figures of a window (kpis.md 4b) and what they were read from."""

    window: Window
    currency: str
    service_from: datetime | None = None
    parts: list[tuple[Part, str]] = field(default_factory=list)  # the window's, with source
    revenue: dict[str, Decimal] = field(default_factory=dict)  # per tenant slug
    paid_tokens: dict[str, int] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    concentration: engine.Concentration | None = None
    quadrant: engine.Quadrant = field(default_factory=lambda: engine.Quadrant([], None, None))
    mrr_month: datetime | None = None
    mrr: Decimal | None = None
    mrr_source: str = ""
    retention: list[RetentionRow] = field(default_factory=list)
    cohort_parts: list[Part] = field(default_factory=list)
    cohorts: list[engine.Cohort] = field(default_factory=list)
    rating_errors: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> Decimal:
        return sum(self.revenue.values(), ZERO)

    @property
    def arr(self) -> Decimal | None:
        return None if self.mrr is None else self.mrr * 12

    @property
    def headline(self) -> RetentionRow | None:
        """The longest lookback with figures (12 months, else 3, else 1), if any."""
        return next((row for row in self.retention if not row.reason), None)


def market_read(window: Window) -> Market:
    """The market figures of a window (kpis.md 4b): concentration and the quadrant over its
    tenants with revenue, MRR and ARR of the last whole month by its end, NRR and GRR of that
    month per lookback, and the revenue per cohort in the months it touches."""
    market = Market(window=window, currency=settings.FACTORY_CURRENCY)
    market.service_from = factory_in_service_from()
    if market.service_from is None or window.is_empty:
        return market
    parts = parts_of(window.start, window.to)
    service_month = month_start(market.service_from)
    last_whole = months_before(month_start(window.to), 1)
    history = [p for p in parts_of(service_month, window.to) if p.month <= last_whole]
    current = parts_of(month_start(window.to), window.to) if service_month <= window.to else []
    sales = sales_read([*parts, *history, *current])
    market.parts = [(p, sales[p].source) for p in parts]
    revenue: dict[str, Decimal] = defaultdict(lambda: ZERO)
    tokens: dict[str, int] = defaultdict(int)
    for part in parts:
        for slug, amount in sales[part].revenue.items():
            revenue[slug] += amount
        for slug, count in sales[part].paid_tokens.items():
            tokens[slug] += count
    market.revenue, market.paid_tokens = dict(revenue), dict(tokens)
    market.concentration = engine.concentration(market.revenue)
    market.quadrant = engine.quadrant(
        {slug: (amount, tokens.get(slug, 0)) for slug, amount in revenue.items()}
    )
    monthly = {p.month: sales[p].revenue for p in [*history, *current]}
    if last_whole >= service_month:
        market.mrr_month = last_whole
        market.mrr = sum(monthly[last_whole].values(), ZERO)
        whole = next(p for p in history if p.month == last_whole)
        market.mrr_source = sales[whole].source
        market.retention = _retention(last_whole, monthly, market.service_from)
    by_tenant: dict[str, dict[datetime, Decimal]] = defaultdict(dict)
    for month, amounts in monthly.items():
        for slug, amount in amounts.items():
            by_tenant[slug][month] = amount
    in_window: dict[str, dict[datetime, Decimal]] = defaultdict(dict)
    for part in parts:
        for slug, amount in sales[part].revenue.items():
            in_window[slug][part.month] = amount
    market.cohort_parts = [p for p in parts if p.month >= service_month]
    market.cohorts = engine.cohorts(
        history=by_tenant, revenue=in_window, months=[p.month for p in market.cohort_parts]
    )
    market.names = dict(
        Tenant.objects.filter(slug__in={*by_tenant, *revenue}).values_list("slug", "name")
    )
    market.rating_errors = rating_errors(months=[p.month for p in parts])
    return market


def _retention(
    month: datetime, monthly: dict[datetime, dict[str, Decimal]], service_from: datetime
) -> list[RetentionRow]:
    """NRR and GRR of `month` per lookback (12, 3, 1), each base month a whole month in
    service, else `not enough history` and why."""
    rows = []
    for lookback in engine.LOOKBACKS:
        base = months_before(month, lookback)
        if base < service_from:
            reason = (
                f"not enough history: a {lookback}-month NRR compares {month:%B %Y} with "
                f"{base:%B %Y}, and the factory has been in service since "
                f"{service_from:%-d %B %Y}"
            )
            rows.append(RetentionRow(lookback, month, base, None, None, reason))
            continue
        nrr, grr = engine.retention(base=monthly.get(base, {}), current=monthly[month])
        reason = "" if nrr is not None else f"no tenant had revenue in {base:%B %Y}"
        rows.append(RetentionRow(lookback, month, base, nrr, grr, reason))
    return rows


def _ratio(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _month_key(month: datetime | None) -> str | None:
    return None if month is None else f"{month:%Y-%m}"


def market_json(market: Market) -> dict[str, Any]:
    """GET /api/v1/market: ratios as numbers, money as decimal strings (cents), token counts
    as integers, months as YYYY-MM."""
    currency = market.currency

    def money(value: Decimal | None) -> str | None:
        return None if value is None else money_str(amount=value, currency=currency)

    def per_million(value: Decimal | None) -> str | None:  # as the price book: 10 decimals
        return None if value is None else str(round_half_up(amount=value, quantum=UNIT_PRICE))

    c = market.concentration
    q = market.quadrant
    window = market.window
    return {
        "from": rfc3339(window.start),
        "to": rfc3339(window.to),
        "data_until": rfc3339(window.data_until),
        "currency": currency,
        "revenue": money(market.total),
        "revenue_sources": [
            {"from": rfc3339(p.start), "to": rfc3339(p.end), "source": source}
            for p, source in market.parts
        ],
        "tenants": len([v for v in market.revenue.values() if v > 0]),
        "concentration": None
        if c is None
        else {
            "top1": float(c.top1),
            "top5": float(c.top5),
            "hhi": float(c.hhi),
            "grade": c.grade,
        },
        "quadrant": {
            "x_median": _ratio(q.x_median),
            "y_median": per_million(q.y_median),
            "tenants": [
                {
                    "tenant": point.tenant,
                    "name": market.names.get(point.tenant, point.tenant),
                    "revenue": money(point.revenue),
                    "paid_tokens": point.paid_tokens,
                    "x": float(point.x),
                    "y": per_million(point.y),
                    "label": point.label,
                }
                for point in q.points
            ],
        },
        "mrr_month": _month_key(market.mrr_month),
        "mrr": money(market.mrr),
        "mrr_source": market.mrr_source or None,
        "arr": money(market.arr),
        "retention": [
            {
                "lookback_months": row.lookback,
                "month": _month_key(row.month),
                "base_month": _month_key(row.base),
                "nrr": _ratio(row.nrr),
                "grr": _ratio(row.grr),
                "reason": row.reason or None,
            }
            for row in market.retention
        ],
        "cohorts": {
            "months": [_month_key(p.month) for p in market.cohort_parts],
            "partial_months": [_month_key(p.month) for p in market.cohort_parts if not p.is_whole],
            "rows": [
                {
                    "cohort": _month_key(cohort.month),
                    "tenants": cohort.tenants,
                    "revenue": [money(v) for v in cohort.revenue],
                }
                for cohort in market.cohorts
            ],
        },
        "rating_errors": market.rating_errors,
    }
