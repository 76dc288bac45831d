"""The ledger page and its CSV export."""

from django.shortcuts import render

from billing.models import Account
from billing.selectors.ledger import ledger_balances, ledger_postings
from portal.decorators import role_required
from portal.exports import csv_response, export_query
from portal.models import Role, Tenant
from portal.pager import pager_page
from portal.periods import period_resolve


@role_required(Role.OPERATOR, Role.FINANCE)
def ledger(request):
    """Postings filtered by account, tenant and period, with the balances they add up to."""
    window = period_resolve(request.GET, default="last_90_days")
    period = window.requested  # records of the period, not a measurement: up to its end
    account = request.GET.get("account", "")
    tenant = request.GET.get("tenant", "")
    postings = ledger_postings(user=request.user, filters=request.GET, period=period)
    if request.GET.get("format") == "csv":
        return csv_response(
            filename=f"ledger-{period.start:%Y%m%d}-{period.end:%Y%m%d}.csv",
            header=[
                "transaction",
                "accounting_date",
                "time",
                "kind",
                "memo",
                "tenant",
                "account",
                "amount",
                "currency",
            ],
            rows=(
                (
                    p.transaction_id,
                    p.transaction.accounting_date.isoformat(),
                    p.transaction.occurred_at.isoformat(),
                    p.transaction.kind,
                    p.transaction.memo,
                    p.transaction.tenant.slug if p.transaction.tenant else "",
                    p.account.code,
                    p.amount,
                    p.currency,
                )
                for p in postings.iterator()
            ),
        )
    page = pager_page(request, postings)
    accounts = list(Account.objects.order_by("code"))
    return render(
        request,
        "billing/ledger/ledger.html",
        {
            "title": "Ledger",
            "page": page,
            "balances": ledger_balances(
                postings=ledger_postings(user=request.user, filters=request.GET), period=period
            ),
            "accounts": accounts,
            # An account is made by its first posting: one named before it has none is no
            # option yet, but it is what the list shows (none of its postings).
            "account_without_postings": account not in {"", *(a.code for a in accounts)},
            "tenants": Tenant.objects.order_by("name"),
            "account": account,
            "tenant": tenant,
            "period": period,
            "window": window,
            "csv_query": export_query(request),
        },
    )
