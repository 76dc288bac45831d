"""Rated tenant-months: billing's read model of what each tenant's month rated to.

A tenant-month is rated once for its inputs: its usage (the month's daily rollups), the
price list, its contract versions and its promotional credits. Their fingerprint is stored
with the totals; a read computes the fingerprints in a fixed number of queries and rates
again, in one `month_rate` for all of them, only the tenant-months whose inputs changed.
The measure and invoice jobs keep the current and last month fresh (`rated_months_refresh`),
so the SLA figures and TFOM revenue read stored totals instead of running the rating.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Max, Sum

from billing.domain.invoices import LineKind
from billing.domain.rating.types import RatingError
from billing.models import Contract, Price, PromotionalCredit, RatedTenantMonth
from billing.selectors.rating import month_rate
from metering.selectors.usage import daily_usage_list
from portal import clock
from portal.models import Tenant
from portal.periods import month_start as month_floor
from portal.periods import months_before, next_month

ZERO = Decimal(0)

_USAGE_SUMS = (
    "requests", "errors", "ok_input_tokens", "ok_cached_tokens", "ok_output_tokens",
    "compliant_requests",
)  # fmt: skip


@dataclass(frozen=True)
class TenantMonthTotals:
    """What one tenant's month rated to (or why it cannot be rated)."""

    usage_amount: Decimal  # the base of an SLA credit
    minimum_shortfall: Decimal
    currency: str
    error: RatingError | None


def _fingerprints(*, tenant_ids: list[int], month_start: datetime) -> dict[int, str]:
    """Per tenant with usage in the month: a digest of every input of its rating."""
    usage = (
        daily_usage_list(start=month_start, end=next_month(month_start))
        .filter(tenant_id__in=tenant_ids)
        .values("tenant_id")
        .annotate(rows=Count("id"), **{name: Sum(name) for name in _USAGE_SUMS})
    )
    prices = Price.objects.aggregate(n=Count("id"), last=Max("id"))
    versions: dict[int, list] = defaultdict(list)
    for model in (Contract, PromotionalCredit):
        for row in (
            model.objects.filter(tenant_id__in=tenant_ids)
            .values("tenant_id")
            .annotate(n=Count("id"), last=Max("id"))
            .order_by("tenant_id")
        ):
            versions[row["tenant_id"]].append((model.__name__, row["n"], row["last"]))
    digests = {}
    for row in usage:
        tenant_id = row.pop("tenant_id")
        parts = (sorted(row.items()), prices, versions.get(tenant_id, []))
        digests[tenant_id] = hashlib.sha256(repr(parts).encode()).hexdigest()
    return digests


def tenant_month_totals(
    *, month_start: datetime, tenants: Iterable[Tenant] | None = None
) -> dict[int, TenantMonthTotals]:
    """The rated totals of the month for each tenant with usage in it (of `tenants`, default
    every tenant), from the read model; the tenant-months whose inputs changed since they
    were stored are rated now (all in one `month_rate`) and stored."""
    usage = daily_usage_list(start=month_start, end=next_month(month_start))
    ids = (
        list(usage.values_list("tenant_id", flat=True).distinct())
        if tenants is None
        else [t.pk for t in tenants]
    )
    digests = _fingerprints(tenant_ids=ids, month_start=month_start)
    stored = {
        row.tenant_id: row
        for row in RatedTenantMonth.objects.filter(month_start=month_start, tenant_id__in=digests)
    }
    stale = [
        pk for pk, digest in digests.items() if pk not in stored or stored[pk].fingerprint != digest
    ]
    if stale:
        stored |= _rate_and_store(month_start=month_start, tenant_ids=stale, digests=digests)
    return {pk: _totals(row) for pk, row in stored.items() if pk in digests}


def _rate_and_store(
    *, month_start: datetime, tenant_ids: list[int], digests: dict[int, str]
) -> dict[int, RatedTenantMonth]:
    rating = month_rate(
        month_start=month_start,
        tenants=list(Tenant.objects.filter(pk__in=tenant_ids)),
        by_day=(month_start, next_month(month_start)),
    )
    now = clock.now()
    rows = []
    for pk in tenant_ids:
        row = RatedTenantMonth(
            tenant_id=pk, month_start=month_start, fingerprint=digests[pk], rated_at=now
        )
        if pk in rating.errors:
            row.error = str(rating.errors[pk])
        elif pk in rating.rated:
            rated = rating.rated[pk]
            row.currency = rated.currency
            row.usage_amount = sum(
                (line.amount for line in rated.lines if line.kind == LineKind.USAGE), ZERO
            )
            row.minimum_shortfall = rated.minimum_shortfall
        rows.append(row)
    RatedTenantMonth.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["tenant", "month_start"],
        update_fields=[
            "fingerprint", "currency", "usage_amount", "minimum_shortfall", "error", "rated_at",
        ],
    )  # fmt: skip
    return {row.tenant_id: row for row in rows}


def _totals(row: RatedTenantMonth) -> TenantMonthTotals:
    return TenantMonthTotals(
        usage_amount=row.usage_amount,
        minimum_shortfall=row.minimum_shortfall,
        currency=row.currency or settings.FACTORY_CURRENCY,
        error=RatingError(row.error) if row.error else None,
    )


def rated_months_refresh(*, now: datetime | None = None) -> int:
    """The job: the current and the last month of every tenant brought up to date (after
    the fold, so reads find them fresh). Returns the tenant-months read."""
    now = now or clock.now()
    return sum(
        len(tenant_month_totals(month_start=month))
        for month in (months_before(now, 1), month_floor(now))
    )
