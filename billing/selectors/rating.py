"""Reads for the billing pages and API: tenant-scoped in one place (portal.access)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Q

from billing.domain.rating.books import ContractBook
from billing.domain.rating.engine import rate_month
from billing.domain.rating.types import (
    ContractVersion,
    PriceVersion,
    RatedMonth,
    RatingError,
    UsageItem,
    VolumeTier,
    month_bounds,
)
from billing.domain.rating.types import PromotionalCredit as CreditIn
from billing.models import (
    Contract,
    Invoice,
    Price,
    PromotionalCredit,
    PromotionUse,
)
from billing.selectors.usage_rows import (
    hour_items,
    hourly_rows,
    row_item,
    split_events,
    split_hours,
)
from portal.models import Tenant

ZERO = Decimal(0)


def _contract_version(c: Contract) -> ContractVersion:
    return ContractVersion(
        effective_from=c.effective_from,
        kind=c.kind,
        discount_pct=c.discount_pct,
        free_tokens_per_month=c.free_tokens_per_month,
        volume_tiers=tuple(
            VolumeTier(
                from_tokens=int(t["from_tokens"]), discount_pct=Decimal(str(t["discount_pct"]))
            )
            for t in c.volume_tiers
        ),
        committed_minimum=c.committed_minimum,
        currency=c.currency,
    )


def contract_versions(*, tenant: Tenant) -> list[ContractVersion]:
    return [_contract_version(c) for c in Contract.objects.filter(tenant=tenant)]


def price_versions(*, model_slugs=None) -> list[PriceVersion]:
    prices = Price.objects.select_related("model")
    if model_slugs is not None:
        prices = prices.filter(model__slug__in=model_slugs)
    return [
        PriceVersion(
            model=p.model.slug,
            token_class=p.token_class,
            per_million=p.per_million,
            effective_from=p.effective_from,
            currency=p.currency,
        )
        for p in prices
    ]


def _promotions(*, month_start: datetime, tenant_ids=None) -> dict[int, list[CreditIn]]:
    """Per tenant id, the credits the month's rating may apply. A tenant whose month is
    invoiced (void invoices excepted) gets exactly what its invoice applied: re-rated
    with late usage, the month bills that usage without credits, so a credit is never
    spent twice nor past its amount. Otherwise: credits in effect before the month ends,
    not expired at its start, less what live invoices of other months consumed (months
    can be invoiced out of order, and a voided month invoiced again)."""
    start, end = month_bounds(month_start=month_start)
    invoices = Invoice.objects.filter(period_start=start).exclude(status=Invoice.Status.VOID)
    credits = PromotionalCredit.objects.filter(effective_from__lt=end).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=start)
    )
    if tenant_ids is not None:
        invoices = invoices.filter(tenant_id__in=tenant_ids)
        credits = credits.filter(tenant_id__in=tenant_ids)
    invoiced = set(invoices.values_list("tenant_id", flat=True))
    available: dict[int, list[CreditIn]] = defaultdict(list)
    for use in PromotionUse.objects.filter(invoice__in=invoices).select_related("credit"):
        available[use.credit.tenant_id].append(_credit_in(use.credit, use.amount))
    credits = [credit for credit in credits if credit.tenant_id not in invoiced]
    used: dict[int, Decimal] = defaultdict(Decimal)  # summed here: SQLite sums floats
    for credit_id, amount in (
        PromotionUse.objects.filter(credit__in=credits)
        .exclude(invoice__status=Invoice.Status.VOID)
        .values_list("credit_id", "amount")
    ):
        used[credit_id] += amount
    for credit in credits:
        left = credit.amount - used[credit.pk]
        if left > 0:
            available[credit.tenant_id].append(_credit_in(credit, left))
    return available


def _credit_in(credit: PromotionalCredit, amount: Decimal) -> CreditIn:
    return CreditIn(
        id=str(credit.pk),
        amount=amount,
        expires_at=credit.expires_at,
        description=credit.description,
        currency=credit.currency,
    )


def promotions_available(*, tenant: Tenant, month_start: datetime) -> list[CreditIn]:
    return _promotions(month_start=month_start, tenant_ids=[tenant.pk]).get(tenant.pk, [])


@dataclass
class MonthRating:
    """Every tenant's rating of one UTC month, and the rows it was built from."""

    month_start: datetime
    tenants: dict[int, Tenant]
    rated: dict[int, RatedMonth] = field(default_factory=dict)  # tenant id -> rating
    errors: dict[int, RatingError] = field(default_factory=dict)  # tenant id -> why not
    rows: dict[int, dict[datetime, list[dict]]] = field(default_factory=dict)  # rollup rows
    events: dict[tuple[str, str], dict] = field(default_factory=dict)  # (source, id) -> event


def month_rate(
    *,
    month_start: datetime,
    tenants: Iterable[Tenant] | None = None,
) -> MonthRating:
    """Rate the month of every tenant with usage in it (or of `tenants`) hour by hour, in a
    fixed number of queries; a tenant that cannot be rated gets its RatingError instead."""
    start, end = month_bounds(month_start=month_start)
    ids = None if tenants is None else [t.pk for t in tenants]
    by_tenant = hourly_rows(start, end, ids)
    if ids is None:
        ids = list(by_tenant)
    tenant_map = {t.pk: t for t in Tenant.objects.filter(pk__in=ids)}
    contracts: dict[int, list[ContractVersion]] = defaultdict(list)
    for contract in Contract.objects.filter(tenant_id__in=ids):
        contracts[contract.tenant_id].append(_contract_version(contract))
    promotions = _promotions(month_start=start, tenant_ids=ids)
    prices = price_versions()
    split: dict[int, set[datetime]] = {}
    for tenant_id in ids:
        book = ContractBook(contracts[tenant_id])
        opening = book.at(when=start)
        split[tenant_id] = split_hours(
            by_tenant.get(tenant_id, {}),
            contracts=book,
            allowance=opening.free_tokens_per_month if opening is not None else 0,
            promotions=promotions.get(tenant_id, []),
        )
    events = split_events({(t, h) for t, hours in split.items() for h in hours})
    result = MonthRating(month_start=start, tenants=tenant_map, rows=dict(by_tenant))
    for tenant_id in ids:
        items: list[UsageItem] = []
        for hour, rows in by_tenant.get(tenant_id, {}).items():
            if hour in split[tenant_id]:
                hour_events = events.get((tenant_id, hour), [])
                items.extend(hour_items(hour, rows, hour_events))
                result.events.update(((e["source"], e["event_id"]), e) for e in hour_events)
            else:
                items.extend(row_item(hour, row) for row in rows)
        try:
            result.rated[tenant_id] = rate_month(
                month_start=start,
                items=items,
                contracts=contracts[tenant_id],
                prices=prices,
                promotions=promotions.get(tenant_id, []),
                currency=settings.FACTORY_CURRENCY,
            )
        except RatingError as error:
            result.errors[tenant_id] = error
    return result


def tenant_month_rate(*, tenant: Tenant, month_start: datetime) -> RatedMonth:
    """Rate one tenant's UTC month as it stands in the rollups (RatingError names a
    missing price)."""
    rating = month_rate(month_start=month_start, tenants=[tenant])
    if tenant.pk in rating.errors:
        raise rating.errors[tenant.pk]
    return rating.rated[tenant.pk]
