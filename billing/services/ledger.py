"""The double-entry ledger: balanced, append-only transactions and derived balances."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal

from django.db import IntegrityError, transaction

from billing.domain.accounts import (
    CREDIT_BALANCE,
    DEFERRED_REVENUE,
    SLA_PAYABLE,
    liability_code,
    receivable_code,
    revenue_code,
)
from billing.models import Account, LedgerTransaction, Posting
from metering.selectors.factory import served_model_get
from portal import clock
from portal.closing import first_open_day, month_closed_check, month_is_closed
from portal.models import Tenant
from portal.periods import month_last_day

ZERO = Decimal(0)


class LedgerError(Exception):
    """A transaction that cannot be posted as given (unbalanced, empty, reversed twice)."""


@dataclass(frozen=True, slots=True)
class Leg:
    account: Account
    amount: Decimal  # debit > 0, credit < 0


# One place that names the accounts; codes are stable identifiers, names are for people.
def account_receivable(*, tenant: Tenant) -> Account:
    return _account(
        receivable_code(tenant.slug), f"Receivable — {tenant.name}", "asset", tenant=tenant
    )


def account_revenue(*, model_slug: str) -> Account:
    model = served_model_get(slug=model_slug)
    return _account(
        revenue_code(model_slug), f"Token revenue — {model_slug}", "revenue", model=model
    )


def account_named(code: str) -> Account:
    """The factory-wide accounts: cash, discounts, promotions, minimums, adjustments, SLA."""
    name, kind = FACTORY_ACCOUNTS[code]
    return _account(code, name, kind)


def _owed(tenant: Tenant, what: str, name: str) -> Account:
    """A liability the factory holds for one tenant."""
    return _account(
        liability_code(what, tenant.slug), f"{name} — {tenant.name}", "liability", tenant=tenant
    )


def account_sla_payable(*, tenant: Tenant) -> Account:
    """SLA credits posted at a month's close, owed until the next invoice bills them."""
    return _owed(tenant, SLA_PAYABLE, "SLA credits owed")


def account_credit_balance(*, tenant: Tenant) -> Account:
    """What the factory owes a tenant from credit notes settled to its balance: drawn by
    its next invoices (a `credit` line)."""
    return _owed(tenant, CREDIT_BALANCE, "Credit balance")


def account_deferred_revenue(*, tenant: Tenant) -> Account:
    """The tenant's prepaid balances not yet used: deferred revenue, recognized as drawn."""
    return _owed(tenant, DEFERRED_REVENUE, "Deferred revenue (prepaid)")


FACTORY_ACCOUNTS = {
    "cash": ("Cash", "asset"),
    "revenue:reservations": ("Reservations (dedicated capacity)", "revenue"),
    "revenue:minimum": ("Committed minimum shortfall", "revenue"),
    "revenue:adjustments": ("Late usage adjustments", "revenue"),
    "revenue:breakage": ("Breakage of expired prepaid balances", "revenue"),
    "contra:discounts": ("Discounts (contract and volume tiers)", "contra_revenue"),
    "contra:sla-credits": ("SLA credits", "contra_revenue"),
    "contra:credit-notes": ("Credit notes", "contra_revenue"),
    "expense:promotions": ("Promotional credits", "expense"),
}


def _account(code: str, name: str, kind: str, **links) -> Account:
    account = Account.objects.filter(code=code).first()
    if account is not None:
        return account
    try:
        with transaction.atomic():
            return Account.objects.create(code=code, name=name, kind=kind, **links)
    except IntegrityError:  # created by a concurrent transaction
        return Account.objects.get(code=code)


def _combined(legs: Iterable[Leg]) -> list[tuple[Account, Decimal]]:
    """Legs merged per account, zero sums dropped, in account-code order."""
    totals: dict[int, Decimal] = defaultdict(lambda: ZERO)
    accounts: dict[int, Account] = {}
    for leg in legs:
        totals[leg.account.pk] += leg.amount
        accounts[leg.account.pk] = leg.account
    return sorted(
        ((accounts[pk], amount) for pk, amount in totals.items() if amount != 0),
        key=lambda pair: pair[0].code,
    )


@transaction.atomic
def accrual_date(*, month: datetime, occurred_at: datetime, by_close: bool = False) -> date:
    """The accounting date of what a month earned (its invoice, its SLA credits): the month's
    last day while it is open or its own close posts it (`by_close`); once it is closed, a
    late correction counts when it is made (kpis.md: a closed month accepts no new posting
    dated in it)."""
    if month_is_closed(month, by_close=by_close):
        return occurred_at.astimezone(UTC).date()
    return month_last_day(month)


def ledger_post(
    *,
    kind: str,
    memo: str,
    legs: Sequence[Leg],
    currency: str,
    tenant: Tenant | None = None,
    period_start: datetime | None = None,
    occurred_at: datetime | None = None,
    idempotency_key: str | None = None,
    by=None,
    reverses: LedgerTransaction | None = None,
    accounting_date: date | None = None,
    by_close: bool = False,
) -> LedgerTransaction:
    """Post one balanced transaction (Σ legs = 0); LedgerError when it is not. It counts on
    `accounting_date`, which may not fall in a closed month (a 400 naming accounting_date)
    unless the month's own running close posts it (`by_close`). By default it is the UTC
    day it occurs, or, when that day is in a closed month (a payment recorded late), the
    first day of the next open month (kpis.md, Closed months)."""
    combined = _combined(legs)
    if not combined:
        raise LedgerError("a transaction needs at least one non-zero posting")
    left_over = sum((amount for _, amount in combined), ZERO)
    if left_over != 0:
        raise LedgerError(f"transaction does not balance: {left_over} {currency} left over")
    if idempotency_key is not None and (
        posted := LedgerTransaction.objects.filter(idempotency_key=idempotency_key).first()
    ):  # the unique key still guards a concurrent post; this names the earlier one
        raise LedgerError(f"{idempotency_key!r} is already posted as transaction #{posted.pk}")
    occurred_at = occurred_at or clock.now()
    if accounting_date is None:
        day = occurred_at.astimezone(UTC).date()
        accounting_date = max(day, first_open_day(occurred_at).date())
    month_closed_check(
        moment=datetime.combine(accounting_date, time.min, tzinfo=UTC),
        field="accounting_date",
        by_close=by_close,
    )
    entry = LedgerTransaction.objects.create(
        kind=kind,
        memo=memo,
        tenant=tenant,
        period_start=period_start,
        occurred_at=occurred_at,
        accounting_date=accounting_date,
        idempotency_key=idempotency_key,
        created_by=by,
        reverses=reverses,
    )
    Posting.objects.bulk_create(
        Posting(transaction=entry, account=account, amount=amount, currency=currency)
        for account, amount in combined
    )
    return entry


@transaction.atomic
def ledger_reverse(*, entry: LedgerTransaction, memo: str, by=None) -> LedgerTransaction:
    """Post the mirror image of `entry`, linked to it; a transaction is reversed at most once."""
    entry = LedgerTransaction.objects.select_for_update().get(pk=entry.pk)
    if LedgerTransaction.objects.filter(reverses=entry).exists():
        raise LedgerError(f"transaction #{entry.pk} is already reversed")
    if entry.kind == LedgerTransaction.Kind.REVERSAL:
        raise LedgerError("a reversal is not reversed; post a new transaction instead")
    postings = list(entry.postings.select_related("account"))
    return ledger_post(
        kind=LedgerTransaction.Kind.REVERSAL,
        memo=memo,
        legs=[Leg(p.account, -p.amount) for p in postings],
        currency=postings[0].currency,  # ledger_post writes one currency per transaction
        tenant=entry.tenant,
        period_start=entry.period_start,
        by=by,
        reverses=entry,
    )
