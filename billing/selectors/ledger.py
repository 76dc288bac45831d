"""Ledger reads: postings and balances."""

from __future__ import annotations

from django.db.models import QuerySet

from billing.filters import PostingFilterSet
from billing.models import Account, Posting
from billing.services.ledger import account_balances
from portal.access import tenant_scoped
from portal.periods import Period


def ledger_postings(*, user, filters=None, period: Period | None = None) -> QuerySet[Posting]:
    """The postings the user may see, newest first; `filters`: PostingFilterSet's query
    (tenant, account, kind), 404 for another tenant, 400 for an unknown value."""
    postings = tenant_scoped(
        Posting.objects.select_related("transaction__tenant", "account"),
        user=user,
        field="transaction__tenant",
    )
    if filters:
        postings = PostingFilterSet.apply(filters, queryset=postings, user=user)
    if period is not None:
        postings = postings.filter(
            transaction__occurred_at__gte=period.start, transaction__occurred_at__lt=period.end
        )
    return postings.order_by("-transaction__occurred_at", "-transaction_id", "id")


def ledger_balances(*, postings: QuerySet[Posting]) -> list[dict]:
    """Per account of the postings shown: debits, credits and the balance (debit positive)."""
    balances = account_balances(postings=postings)
    accounts = {a.code: a for a in Account.objects.filter(code__in={c for c, _ in balances})}
    return [
        {"account": accounts[code], "currency": currency, "balance": total}
        for (code, currency), total in sorted(balances.items())
    ]
