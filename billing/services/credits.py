"""SLA credits (kpis.md section 3b): credit_pct from the month's uptime and the contract's
credit tiers, credit_amount on the month's usage lines; posted once per tenant-month at
month close and billed as an `sla_credit` line on the next invoice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db import IntegrityError, transaction

from billing.domain.credits import credit_amount, credit_pct_for, target_of
from billing.domain.rating.types import RatingError
from billing.models import Contract, LedgerTransaction, SlaCredit
from billing.selectors.pricing import month_contracts
from billing.selectors.rated import TenantMonthTotals, rated_month_totals
from billing.services.ledger import (
    Leg,
    account_named,
    account_sla_payable,
    accrual_date,
    ledger_post,
)
from billing.services.rated import tenant_month_totals
from metering.selectors.sla.months import SlaMonth, sla_month_list
from portal import clock
from portal.formatting import decimal_plain, money_text
from portal.models import Tenant

ZERO = Decimal(0)


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


def _bases(totals: dict[int, TenantMonthTotals]) -> dict[int, tuple[Decimal, str] | RatingError]:
    return {pk: t.error or (t.usage_amount, t.currency) for pk, t in totals.items()}


def usage_amounts(
    *, tenants: list[Tenant], month_start: datetime, exact: bool = False
) -> dict[int, tuple[Decimal, str] | RatingError]:
    """Per tenant with usage, the month's usage lines after discounts and tiers, before
    promotions (the base of an SLA credit), as billing's job last rated them (a page's
    read: never rated here), or `exact` (the month's close: the tenant-months whose inputs
    changed rated again first); a tenant that cannot be rated gets its RatingError."""
    totals = tenant_month_totals if exact else rated_month_totals
    return _bases(totals(month_start=month_start, tenants=tenants))


def usage_amount(*, tenant: Tenant, month_start: datetime) -> tuple[Decimal, str]:
    """One tenant's base, exact (`usage_amounts`); RatingError names a missing price."""
    amounts = usage_amounts(tenants=[tenant], month_start=month_start, exact=True)
    amount = amounts.get(tenant.pk, (ZERO, settings.FACTORY_CURRENCY))  # no usage: nothing
    if isinstance(amount, RatingError):
        raise amount
    return amount


def sla_figures_list(
    *, month_start: datetime, tenants=None, user=None, exact: bool = False
) -> list[SlaFigures]:
    """SLA and credit per tenant for a month; closed months read the posted credit, the
    others the credit base as last rated (or `exact`, as `usage_amounts`)."""
    posted = {c.tenant_id: c for c in SlaCredit.objects.filter(month_start=month_start)}
    slas = sla_month_list(month_start=month_start, tenants=tenants, user=user)
    unposted = [s.tenant for s in slas if s.tenant.pk not in posted]
    amounts = (
        usage_amounts(tenants=unposted, month_start=month_start, exact=exact) if unposted else {}
    )
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
                    else _as_decimal(sla.deployment_slo_target)
                ),
                credit_pct=pct,
                credit_amount=amount,
                currency=currency,
                is_posted=credit is not None,
            )
        )
    return figures


def _as_decimal(value: Fraction | None) -> Decimal | None:
    if value is None:
        return None
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(Decimal("1e-10"))


def sla_month_close(
    *, month_start: datetime, by=None, now: datetime | None = None, by_close: bool = False
) -> list[SlaCredit]:
    """Record every paid tenant's SLA of a finished month and post its credit, once: a
    second run finds the rows and posts nothing. Returns the credits created now. The
    month's close posts them on the month's last day (`by_close`)."""
    created = []
    every = sla_figures_list(month_start=month_start, exact=True)
    contracts = month_contracts(
        tenant_ids=[f.sla.tenant.pk for f in every], month_start=month_start
    )
    for figures in every:
        sla = figures.sla
        if figures.is_posted or figures.credit_amount is None:
            continue
        contract = contracts.get(sla.tenant.pk)
        if contract is None or contract.kind != Contract.Kind.PAID:
            continue
        base, _ = usage_amount(tenant=sla.tenant, month_start=month_start)
        try:
            with transaction.atomic():
                credit = SlaCredit.objects.create(
                    tenant=sla.tenant,
                    month_start=month_start,
                    uptime=_as_decimal(sla.uptime),
                    credit_pct=figures.credit_pct,
                    base_amount=base,
                    amount=figures.credit_amount,
                    currency=figures.currency,
                )
                if credit.amount > 0:
                    credit.transaction = ledger_post(
                        kind=LedgerTransaction.Kind.SLA_CREDIT,
                        memo=(
                            f"SLA credit {sla.tenant.name} {sla.month}: "
                            f"{decimal_plain(figures.credit_pct)}% of "
                            f"{money_text(amount=base, currency=figures.currency)}"
                        ),
                        legs=[
                            Leg(account_named("contra:sla-credits"), credit.amount),
                            Leg(account_sla_payable(tenant=sla.tenant), -credit.amount),
                        ],
                        currency=credit.currency,
                        tenant=sla.tenant,
                        period_start=month_start,
                        occurred_at=now,
                        accounting_date=accrual_date(
                            month=month_start, occurred_at=now or clock.now(), by_close=by_close
                        ),
                        idempotency_key=f"sla-credit:{sla.tenant.slug}:{sla.month}",
                        by=by,
                        by_close=by_close,
                    )
                    credit.save(update_fields=["transaction"])
        except IntegrityError:  # a concurrent close recorded it first
            continue
        created.append(credit)
    return created
