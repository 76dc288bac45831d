"""A tenant's month to date (ui.md, tenant home): what its usage so far rated to, the amount
due so far and how much of its free allowance is used, from billing's read models (the
tenant-month's rated totals and lines, rated usage), never rated here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import F, Sum

from billing.domain.rating.types import LineKind
from billing.models import RatedTenantMonth, RatedUsage
from billing.selectors.pricing import contract_in_force
from billing.selectors.rating.inputs import line_of
from portal.models import Tenant
from portal.money import round_money

ZERO = Decimal(0)


def month_spent(row: RatedTenantMonth | None, *, currency: str) -> Decimal:
    """A tenant-month's spend so far, to the cent: its usage lines (after discounts and
    tiers) less the promotional credits they drew. The budget's `spent` and the home's
    amount due so far are this one figure."""
    exact = row.usage_amount - row.promotions if row else ZERO
    return round_money(amount=exact, currency=currency)


def allowance_used(*, tenant: Tenant, month: datetime) -> int:
    """The tokens (input + output) of the tenant's `month` its free allowance paid for."""
    rows = RatedUsage.objects.filter(
        tenant=tenant, month_start=month, sale=RatedUsage.Sale.ALLOWANCE
    )
    return rows.aggregate(tokens=Sum(F("input_tokens") + F("output_tokens")))["tokens"] or 0


@dataclass(frozen=True)
class MonthToDate:
    """One tenant's month so far as rated: list value, discounts, credits and the amount
    due before the month's close (committed minimum, SLA credits, balances drawn)."""

    month: datetime
    currency: str
    list_value: Decimal
    discounts: Decimal
    promotions: Decimal
    amount_due: Decimal
    allowance_tokens: int  # the month's free allowance (contract in force at its start)
    allowance_used: int
    committed_minimum: Decimal
    has_paid_usage: bool
    error: str = ""  # why the month cannot be rated (a missing price), else ""
    reservation_fees: Decimal = ZERO  # the month's reservation lines (the whole month's fees)

    @property
    def allowance_left(self) -> int:
        """What the allowance can still pay for: nothing once the month has paid usage (the
        request that crossed it was split there, and every later one is paid; kpis.md 3)."""
        if self.has_paid_usage:
            return 0
        return max(self.allowance_tokens - self.allowance_used, 0)


def month_to_date(*, tenant: Tenant, month: datetime) -> MonthToDate:
    """The tenant's `month` (its first instant) as billing's rate stage last stored it."""
    row = RatedTenantMonth.objects.filter(tenant=tenant, month_start=month).first()
    contract = contract_in_force(tenant=tenant, when=month)
    currency = (row and row.currency) or (contract and contract.currency)
    currency = currency or settings.FACTORY_CURRENCY
    lines = list(map(line_of, row.lines if row else []))
    usage = [line for line in lines if line.kind == LineKind.USAGE]
    fees = sum((line.amount for line in lines if line.kind == LineKind.RESERVATION), ZERO)
    amount_due = month_spent(row, currency=currency)
    return MonthToDate(
        month=month,
        currency=currency,
        list_value=sum((line.list_amount for line in usage), ZERO),
        discounts=sum((line.discount for line in usage), ZERO),
        # What the credits took off the usage lines: the figures add up to the cent.
        promotions=sum((line.amount for line in usage), fees) - amount_due,
        reservation_fees=fees,
        amount_due=amount_due,
        allowance_tokens=contract.free_tokens_per_month if contract else 0,
        allowance_used=allowance_used(tenant=tenant, month=month),
        committed_minimum=contract.committed_minimum if contract else ZERO,
        has_paid_usage=bool(usage),
        error=row.error if row else "",
    )
