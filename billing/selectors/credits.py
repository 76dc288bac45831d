"""SLA figures per tenant-month (kpis.md section 3b: uptime, SLO attainment, the credit they
are worth) and the SLA credits posted to the ledger, per month."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

from django.conf import settings

from billing.domain.credits import credit_amount, credit_pct_for, target_of
from billing.domain.rating.types import RatingError
from billing.models import SlaCredit
from billing.selectors.pricing import month_contracts
from billing.selectors.rating.rated_usage import TenantMonthTotals, rated_month_totals
from metering.selectors.sla.months import SlaMonth, sla_month_list

ZERO = Decimal(0)
Totals = Callable[..., dict[int, TenantMonthTotals]]  # (month_start=, tenants=) → per tenant


@dataclass(frozen=True)
class SlaFigures:
    """One tenant-month: the SLA measurement and what it is worth."""

    sla: SlaMonth
    target: Decimal | None  # the uptime target: the contract's highest credit threshold
    # The SLO attainment target: the contract's slo_target, else the request-weighted
    # target of the deployments the tenant used (SlaMonth.deployment_slo_target).
    slo_target: Decimal | None
    credit_pct: Decimal
    credit_amount: Decimal | None  # None when the month cannot be rated
    currency: str
    is_posted: bool  # closed: the credit is in the ledger

    @property
    def is_uptime_met(self) -> bool | None:
        if self.target is None or self.sla.uptime is None:
            return None
        return self.sla.uptime >= Fraction(self.target)

    @property
    def is_slo_met(self) -> bool | None:
        if self.slo_target is None or self.sla.slo_attainment is None:
            return None
        return self.sla.slo_attainment >= Fraction(self.slo_target)


def credit_bases(
    totals: dict[int, TenantMonthTotals],
) -> dict[int, tuple[Decimal, str] | RatingError]:
    """Per tenant, the base of its SLA credit and its currency, or why it cannot be rated."""
    return {pk: t.error or (t.usage_amount, t.currency) for pk, t in totals.items()}


def sla_figures_list(
    *, month_start: datetime, tenants=None, user=None, totals: Totals = rated_month_totals
) -> list[SlaFigures]:
    """SLA and credit per tenant for a month; closed months read the posted credit, the
    others the credit base: the tenant-months' `totals`, by default as billing's job last
    rated them (a page's read: never rated here); the month's close passes the rating
    itself (billing.selectors.rating.rated_usage.tenant_month_totals)."""
    posted = {c.tenant_id: c for c in SlaCredit.objects.filter(month_start=month_start)}
    slas = sla_month_list(month_start=month_start, tenants=tenants, user=user)
    unposted = [s.tenant for s in slas if s.tenant.pk not in posted]
    amounts = credit_bases(totals(month_start=month_start, tenants=unposted)) if unposted else {}
    contracts = month_contracts(tenant_ids=[s.tenant.pk for s in slas], month_start=month_start)
    figures = []
    for sla in slas:
        contract = contracts.get(sla.tenant.pk)
        tiers = contract.tiers if contract else []
        if credit := posted.get(sla.tenant.pk):
            pct, amount, currency = credit.credit_pct, credit.amount, credit.currency
        else:
            pct = credit_pct_for(uptime=sla.uptime, tiers=tiers) if tiers else ZERO
            rated = amounts.get(sla.tenant.pk, (ZERO, settings.FACTORY_CURRENCY))
            if isinstance(rated, RatingError):
                amount, currency = None, contract.currency if contract else ""
            else:
                base, currency = rated
                amount = credit_amount(credit_pct=pct, billed_usage_amount=base, currency=currency)
        figures.append(
            SlaFigures(
                sla=sla,
                target=target_of(tiers=tiers) if tiers else None,
                slo_target=(
                    contract.slo_target
                    if contract is not None and contract.slo_target is not None
                    else as_decimal(sla.deployment_slo_target)
                ),
                credit_pct=pct,
                credit_amount=amount,
                currency=currency,
                is_posted=credit is not None,
            )
        )
    return figures


def as_decimal(value: Fraction | None) -> Decimal | None:
    if value is None:
        return None
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(Decimal("1e-10"))


def sla_credit_totals(*, start: datetime, end: datetime) -> dict[datetime, Decimal]:
    """Posted SLA credits per month (first instant, UTC) for months starting in [start, end)."""
    totals: dict[datetime, Decimal] = defaultdict(Decimal)
    for month, amount in SlaCredit.objects.filter(
        month_start__gte=start, month_start__lt=end
    ).values_list("month_start", "amount"):
        totals[month.astimezone(UTC)] += amount
    return dict(totals)


def sla_credits_by_tenant(*, start: datetime, end: datetime) -> dict[tuple[str, datetime], Decimal]:
    """Posted SLA credits per tenant slug and month, for months starting in [start, end)."""
    totals: dict[tuple[str, datetime], Decimal] = defaultdict(Decimal)
    for slug, month, amount in SlaCredit.objects.filter(
        month_start__gte=start, month_start__lt=end
    ).values_list("tenant__slug", "month_start", "amount"):
        totals[(slug, month.astimezone(UTC))] += amount
    return dict(totals)
