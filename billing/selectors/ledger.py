"""Ledger reads: postings and balances."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.db.models import Q, QuerySet, Sum

from billing.filters import PostingFilterSet
from billing.models import Account, Posting
from billing.services.ledger import account_balances
from portal.access import tenant_scoped
from portal.periods import Period, day_ceil


def ledger_postings(*, user, filters=None, period: Period | None = None) -> QuerySet[Posting]:
    """The postings the user may see, newest first; `filters`: PostingFilterSet's query
    (tenant, account, kind), 404 for another tenant, 400 for an unknown value; `period`:
    the transactions whose accounting date falls in it (the UTC days it covers)."""
    postings = tenant_scoped(
        Posting.objects.select_related("transaction__tenant", "account"),
        user=user,
        field="transaction__tenant",
    )
    if filters:
        postings = PostingFilterSet.apply(filters, queryset=postings, user=user)
    if period is not None:
        postings = postings.filter(
            transaction__accounting_date__gte=period.start.date(),
            transaction__accounting_date__lt=day_ceil(period.end).date(),
        )
    return postings.order_by(
        "-transaction__accounting_date", "-transaction__occurred_at", "-transaction_id", "id"
    )


def ledger_balances(*, postings: QuerySet[Posting]) -> list[dict]:
    """Per account of the postings shown: debits, credits and the balance (debit positive)."""
    balances = account_balances(postings=postings)
    accounts = {a.code: a for a in Account.objects.filter(code__in={c for c, _ in balances})}
    return [
        {"account": accounts[code], "currency": currency, "balance": total}
        for (code, currency), total in sorted(balances.items())
    ]


# The accounts whose balance is revenue net of its contra accounts and of promotions
# (kpis.md, Tie-out): TFOM revenue = realized revenue after promotions + minimums − credits.
REVENUE_KINDS = (Account.Kind.REVENUE, Account.Kind.CONTRA_REVENUE)
PROMOTIONS_ACCOUNT = "expense:promotions"


def ledger_revenue(*, start: date, end: date) -> Decimal:
    """The ledger's revenue for the accounting dates [start, end): revenue accounts net of
    discounts, SLA credits and promotions (credits are negative postings)."""
    total = Posting.objects.filter(
        Q(account__kind__in=REVENUE_KINDS) | Q(account__code=PROMOTIONS_ACCOUNT),
        transaction__accounting_date__gte=start,
        transaction__accounting_date__lt=end,
    ).aggregate(total=Sum("amount"))["total"]
    return -(total or Decimal(0))
