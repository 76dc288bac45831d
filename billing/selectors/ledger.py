"""Ledger reads: postings and balances."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import date
from decimal import Decimal

from django.db import connection
from django.db.models import Q, QuerySet, Sum

from billing.filters import PostingFilterSet
from billing.models import Account, LedgerTransaction, Posting
from portal.access import tenant_scoped
from portal.periods import Period, day_ceil

ZERO = Decimal(0)


def account_balances(*, postings=None) -> dict[tuple[str, str], Decimal]:
    """Balance per (account code, currency) derived from postings (debit positive).

    PostgreSQL sums NUMERIC exactly; SQLite would sum in floating point, so there the
    amounts are added as Decimal in Python."""
    postings = Posting.objects.all() if postings is None else postings
    if connection.vendor == "postgresql":
        # Without the caller's ordering: its fields would join the GROUP BY and split an
        # account's total into rows that overwrite each other.
        rows = postings.order_by().values("account__code", "currency").annotate(total=Sum("amount"))
        return {(row["account__code"], row["currency"]): row["total"] for row in rows}
    totals: dict[tuple[str, str], Decimal] = defaultdict(lambda: ZERO)
    for code, currency, amount in postings.values_list("account__code", "currency", "amount"):
        totals[(code, currency)] += amount
    return dict(totals)


def ledger_postings(*, user, filters=None, period: Period | None = None) -> QuerySet[Posting]:
    """The postings the user may see, newest first; `filters`: PostingFilterSet's query
    (tenant, account, kind, ordering), 404 for another tenant, 400 for an unknown value; `period`:
    the transactions whose accounting date falls in it (the UTC days it covers)."""
    postings = tenant_scoped(
        Posting.objects.select_related("transaction__tenant", "account"),
        user=user,
        field="transaction__tenant",
    ).order_by(
        "-transaction__accounting_date", "-transaction__occurred_at", "-transaction_id", "id"
    )
    if filters:  # its `ordering` sorts by a column first, this order after
        postings = PostingFilterSet.apply(filters, queryset=postings, user=user)
    if period is not None:
        postings = postings.filter(
            transaction__accounting_date__gte=period.start.date(),
            transaction__accounting_date__lt=day_ceil(period.end).date(),
        )
    return postings


def ledger_balances(*, postings: QuerySet[Posting], period: Period) -> list[dict]:
    """Per account of `postings` (the filters' postings, every date): the balance before the
    period's first day (opening), the period's movement and the balance after its last
    (closing = opening + movement); debit positive. Accounts with neither are left out."""
    first, after = period.start.date(), day_ceil(period.end).date()
    opening = account_balances(postings=postings.filter(transaction__accounting_date__lt=first))
    movement = account_balances(
        postings=postings.filter(
            transaction__accounting_date__gte=first, transaction__accounting_date__lt=after
        )
    )
    keys = sorted(key for key in {*opening, *movement} if opening.get(key) or key in movement)
    accounts = {a.code: a for a in Account.objects.filter(code__in={code for code, _ in keys})}
    return [
        {
            "account": accounts[code],
            "currency": currency,
            "opening": opening.get((code, currency), ZERO),
            "movement": movement.get((code, currency), ZERO),
            "closing": opening.get((code, currency), ZERO) + movement.get((code, currency), ZERO),
        }
        for code, currency in keys
    ]


# The accounts whose balance is revenue net of its contra accounts and of promotions
# (kpis.md, Tie-out): TFOM revenue = realized revenue after promotions + minimums − credits.
REVENUE_KINDS = (Account.Kind.REVENUE, Account.Kind.CONTRA_REVENUE)
PROMOTIONS_ACCOUNT = "expense:promotions"


def _revenue_postings(*, start: date, end: date) -> QuerySet[Posting]:
    """The postings that make the ledger's revenue, accounting dates [start, end)."""
    return Posting.objects.filter(
        Q(account__kind__in=REVENUE_KINDS) | Q(account__code=PROMOTIONS_ACCOUNT),
        transaction__accounting_date__gte=start,
        transaction__accounting_date__lt=end,
    )


def ledger_revenue(*, start: date, end: date) -> Decimal:
    """The ledger's revenue for the accounting dates [start, end): revenue accounts net of
    discounts, SLA credits and promotions (credits are negative postings)."""
    total = _revenue_postings(start=start, end=end).aggregate(total=Sum("amount"))["total"]
    return -(total or Decimal(0))


def ledger_revenue_by_tenant_month(*, start: date, end: date) -> dict[tuple[str, date], Decimal]:
    """The ledger's revenue (as `ledger_revenue`) per tenant slug and accounting month (its
    first day), accounting dates [start, end)."""
    postings = _revenue_postings(start=start, end=end).exclude(transaction__tenant=None)
    return _by_tenant_day(postings, month=True)


# The revenue dated by a document of its own day, not by the month it bills (kpis.md
# section 5): what a part of a period outside the ledger's closed months takes from it.
DATED_KINDS = (LedgerTransaction.Kind.CREDIT_NOTE, LedgerTransaction.Kind.BREAKAGE)


def ledger_dated_revenue(*, spans: Sequence[tuple[date, date]]) -> dict[tuple[str, date], Decimal]:
    """The credit notes (negative) and breakage the ledger dates inside any of `spans`
    (accounting dates [start, end) each), per tenant slug and accounting day: one query."""
    inside = Q(pk__in=[])
    for start, end in spans:
        inside |= Q(transaction__accounting_date__gte=start, transaction__accounting_date__lt=end)
    first = min((start for start, _ in spans), default=date.min)
    after = max((end for _, end in spans), default=date.min)
    postings = _revenue_postings(start=first, end=after).filter(
        inside, transaction__kind__in=DATED_KINDS
    )
    return _by_tenant_day(postings.exclude(transaction__tenant=None), month=False)


def _by_tenant_day(postings: QuerySet[Posting], *, month: bool) -> dict[tuple[str, date], Decimal]:
    """Revenue (credits negative) per tenant slug and accounting day, or month (its first
    day). Summed here: SQLite would sum the amounts as floats."""
    totals: dict[tuple[str, date], Decimal] = defaultdict(lambda: ZERO)
    for slug, day, amount in postings.values_list(
        "transaction__tenant__slug", "transaction__accounting_date", "amount"
    ):
        totals[(slug, day.replace(day=1) if month else day)] -= amount
    return dict(totals)
