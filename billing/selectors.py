"""Reads for the billing pages and API: tenant-scoped in one place (portal.access)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from django.db.models import QuerySet
from django.http import Http404

from billing.models import Account, Contract, Invoice, Posting, Price, PromotionalCredit, SlaCredit
from billing.rating import RatedItem, UnsoldReason
from billing.services.ledger import account_balances
from billing.services.rate import month_rate
from portal.access import tenant_scoped
from portal.models import Tenant
from portal.periods import Period, month_start, next_month

ZERO = Decimal(0)


def invoice_list(*, user, status: str = "", tenant: str = "") -> QuerySet[Invoice]:
    invoices = tenant_scoped(Invoice.objects.select_related("tenant"), user=user)
    if status:
        invoices = invoices.filter(status=status)
    if tenant:
        invoices = invoices.filter(tenant__slug=tenant)
    return invoices.order_by("-period_start", "number", "tenant__slug")


def invoice_get(*, user, pk: int) -> Invoice:
    invoice = invoice_list(user=user).prefetch_related("lines").filter(pk=pk).first()
    if invoice is None:
        raise Http404("No such invoice.")
    return invoice


def ledger_postings(
    *, user, account: str = "", tenant: str = "", period: Period | None = None
) -> QuerySet[Posting]:
    postings = tenant_scoped(
        Posting.objects.select_related("transaction__tenant", "account"),
        user=user,
        field="transaction__tenant",
    )
    if account:
        postings = postings.filter(account__code=account)
    if tenant:
        postings = postings.filter(transaction__tenant__slug=tenant)
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


@dataclass
class PriceBook:
    """What is in force at an instant, and what is scheduled or superseded."""

    at: datetime
    prices: list[dict]  # each: price, state in_force | scheduled | superseded
    contracts: list[dict]
    promotions: list[PromotionalCredit]


def _states(versions, key, at):
    """Mark each effective-dated version in force, scheduled or superseded at `at`."""
    in_force = {}
    for version in versions:
        if version.effective_from <= at:
            in_force[key(version)] = version  # ordered by effective_from: the last wins
    return [
        {
            "version": version,
            "state": "in_force"
            if in_force.get(key(version)) is version
            else ("scheduled" if version.effective_from > at else "superseded"),
        }
        for version in versions
    ]


def price_book_get(*, at: datetime, user) -> PriceBook:
    prices = list(
        Price.objects.select_related("model").order_by(
            "model__slug", "token_class", "effective_from"
        )
    )
    contracts = list(
        tenant_scoped(Contract.objects.select_related("tenant"), user=user).order_by(
            "tenant__slug", "effective_from"
        )
    )
    return PriceBook(
        at=at,
        prices=_states(prices, lambda p: (p.model_id, p.token_class), at),
        contracts=_states(contracts, lambda c: c.tenant_id, at),
        promotions=list(
            tenant_scoped(PromotionalCredit.objects.select_related("tenant"), user=user)
        ),
    )


@dataclass
class Realization:
    """Rated usage of a period: per tenant and model, list value against realized revenue."""

    rows: list[dict] = field(default_factory=list)  # tenant, model, list, realized, tokens
    unsold: dict[str, dict[str, int]] = field(
        default_factory=dict
    )  # tenant name -> reason -> tokens
    errors: dict[str, str] = field(default_factory=dict)  # tenant -> rating error

    @property
    def list_value(self) -> Decimal:
        return sum((r["list_value"] for r in self.rows), ZERO)

    @property
    def realized(self) -> Decimal:
        return sum((r["realized"] for r in self.rows), ZERO)

    @property
    def price_realization(self) -> Decimal | None:
        """ρ = Σ realized / Σ list value over the paid usage (kpis.md section 3)."""
        return self.realized / self.list_value if self.list_value else None

    def unsold_by_reason(self) -> dict[str, int]:
        totals = dict.fromkeys((r.value for r in UnsoldReason), 0)
        for reasons in self.unsold.values():
            for reason, tokens in reasons.items():
                totals[reason] += tokens
        return totals


def period_months(period: Period) -> list[datetime]:
    """The first instants of the UTC months that [start, end) touches."""
    months, cursor = [], month_start(period.start)
    while cursor < period.end:
        months.append(cursor)
        cursor = next_month(cursor)
    return months


def rated_items(*, period: Period, tenants=None):
    """(tenant, RatedItem) for every ok usage item in the period, rated within its month
    (so allowances and tiers count from the month's start), plus rating errors by tenant."""
    errors: dict[str, str] = {}
    items: list[tuple[Tenant, RatedItem]] = []
    for month in period_months(period):
        rating = month_rate(month_start=month, tenants=tenants)
        errors |= {rating.tenants[pk].slug: str(error) for pk, error in rating.errors.items()}
        for pk, rated in sorted(rating.rated.items(), key=lambda kv: rating.tenants[kv[0]].slug):
            tenant = rating.tenants[pk]
            items.extend(
                (tenant, item)
                for item in rated.items
                if period.start <= item.item.time < period.end
            )
    return items, errors


def realization_get(*, period: Period, user) -> Realization:
    tenants = tenant_scoped(Tenant.objects.all(), user=user, field=None)
    items, errors = rated_items(period=period, tenants=list(tenants))
    rows: dict[tuple[str, str], dict] = {}
    unsold: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for tenant, rated in items:
        if not rated.is_paid:
            unsold[tenant.name][rated.unsold_reason.value] += rated.item.total_tokens
            continue
        row = rows.setdefault(
            (tenant.slug, rated.item.model),
            {
                "tenant": tenant,
                "model": rated.item.model,
                "paid_tokens": 0,
                "list_value": ZERO,
                "realized": ZERO,
            },
        )
        row["paid_tokens"] += rated.item.total_tokens
        row["list_value"] += rated.list_value
        row["realized"] += rated.realized_after_promotions
    for row in rows.values():
        row["ratio"] = row["realized"] / row["list_value"] if row["list_value"] else None
    return Realization(
        rows=sorted(rows.values(), key=lambda r: (-r["list_value"], r["tenant"].slug)),
        unsold={slug: dict(reasons) for slug, reasons in sorted(unsold.items())},
        errors=errors,
    )


def sla_credit_totals(*, start: datetime, end: datetime) -> dict[datetime, Decimal]:
    """Posted SLA credits per month (first instant, UTC) for months starting in [start, end)."""
    totals: dict[datetime, Decimal] = defaultdict(lambda: ZERO)
    for month, amount in SlaCredit.objects.filter(
        month_start__gte=start, month_start__lt=end
    ).values_list("month_start", "amount"):
        totals[month.astimezone(UTC)] += amount
    return dict(totals)
