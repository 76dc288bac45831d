"""SLA credits (kpis.md section 3b): credit_pct from the month's uptime and the contract's
credit tiers, credit_amount on the month's usage lines; posted once per tenant-month at
month close and billed as an `sla_credit` line on the next invoice."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction

from billing.domain.rating.types import RatingError
from billing.models import Contract, LedgerTransaction, SlaCredit
from billing.selectors.credits import as_decimal, credit_bases, sla_figures_list
from billing.selectors.pricing import month_contracts
from billing.selectors.rating.rated_usage import tenant_month_totals
from billing.services.ledger import (
    Leg,
    account_named,
    account_sla_payable,
    accrual_date,
    ledger_post,
)
from portal import clock
from portal.formatting import decimal_plain, money_text
from portal.models import Tenant

ZERO = Decimal(0)


def usage_amount(*, tenant: Tenant, month_start: datetime) -> tuple[Decimal, str]:
    """One tenant's credit base, exact: its month rated again first if its inputs changed
    (the month's close); RatingError names a missing price."""
    bases = credit_bases(tenant_month_totals(month_start=month_start, tenants=[tenant]))
    amount = bases.get(tenant.pk, (ZERO, settings.FACTORY_CURRENCY))  # no usage: nothing
    if isinstance(amount, RatingError):
        raise amount
    return amount


def sla_month_close(
    *, month_start: datetime, by=None, now: datetime | None = None, by_close: bool = False
) -> list[SlaCredit]:
    """Record every paid tenant's SLA of a finished month and post its credit, once: a
    second run finds the rows and posts nothing. Returns the credits created now. The
    month's close posts them on the month's last day (`by_close`)."""
    created = []
    every = sla_figures_list(month_start=month_start, totals=tenant_month_totals)
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
                    uptime=as_decimal(sla.uptime),
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
