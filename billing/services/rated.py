"""Rated usage: billing's read model of what each tenant's month rated to, kept current here.

A tenant-month is rated once for its inputs: its usage (the month's daily rollups), the
price list, its contract versions, its promotional credits and what invoices consumed of
them, and the deployment versions (their SLOs). Their fingerprint is stored with the
month's totals (RatedTenantMonth); a refresh computes the fingerprints in a fixed number of
queries and rates again, hour by hour and in one `month_rate` for all of them, only the
tenant-months whose inputs changed, replacing their rated usage (RatedUsage: per tenant,
deployment, hour and sale) in the same transaction. The rate, measure and invoice jobs
refresh before they read, so the KPIs, TFOM revenue, price realization and SLA credits read
stored rows and never run the rating.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, time
from decimal import Decimal, localcontext

from django.db import connection, transaction
from django.db.models import Count, Max, Sum
from django.db.models.functions import TruncMonth

from billing.domain.invoices import LineKind
from billing.domain.rating.types import RatedItem
from billing.models import (
    Contract,
    Invoice,
    Price,
    PromotionalCredit,
    PromotionUse,
    RatedTenantMonth,
    RatedUsage,
)
from billing.selectors.rated import TenantMonthTotals, month_totals
from billing.selectors.rating import MonthRating, month_rate
from metering.domain.usage.compliance import is_slo_compliant
from metering.selectors.factory import DeploymentVersions, deployment_list, deployment_version_list
from metering.selectors.usage import daily_usage_list
from portal import clock
from portal.bulk import rows_insert
from portal.models import Tenant
from portal.money import EXACT
from portal.periods import Period, hour_floor, next_month
from portal.periods import month_start as month_floor

ZERO = Decimal(0)
HUNDRED = Decimal(100)

_USAGE_SUMS = (
    "requests", "errors", "ok_input_tokens", "ok_cached_tokens", "ok_output_tokens",
    "compliant_requests",
)  # fmt: skip

_TOKENS = ("input_tokens", "cached_tokens", "output_tokens")
_COMPLIANT = tuple(f"compliant_{name}" for name in _TOKENS)
_MONEY = ("list_value", "contract_discount", "tier_discount", "realized", "promotions")


def _counts(queryset, key: str) -> dict[int, tuple]:
    return {
        row[key]: (row["n"], row["last"])
        for row in queryset.values(key).annotate(n=Count("id"), last=Max("id")).order_by(key)
    }


Starts = list[tuple[datetime, int]]  # (effective_from, pk) of effective-dated versions


def _starts(queryset) -> Starts:
    return list(queryset.values_list("effective_from", "pk"))


def _starts_by_tenant(queryset) -> dict[int, Starts]:
    by_tenant: dict[int, Starts] = defaultdict(list)
    for start, pk, tenant_id in queryset.values_list("effective_from", "pk", "tenant_id"):
        by_tenant[tenant_id].append((start, pk))
    return by_tenant


def _before(starts: Starts, end: datetime) -> tuple[int, int | None]:
    """How many of `starts` take effect before `end`, and the newest of them: a month ending
    at `end` is rated with those alone, so a version dated later leaves it as it was."""
    pks = [pk for start, pk in starts if start < end]
    return len(pks), max(pks, default=None)


def _fingerprints(
    *, within: Period, tenant_ids: list[int] | None = None
) -> dict[tuple[datetime, int], str]:
    """Per (month, tenant) with usage in the months starting in `within`: a digest of every
    input of its rating, in a fixed number of queries however many months and tenants. The
    versions (prices, deployment versions, contracts, promotions) are those taking effect
    before the month ends: one dated later makes no month before it stale."""
    usage = daily_usage_list(start=within.start, end=within.end)
    if tenant_ids is not None:
        usage = usage.filter(tenant_id__in=tenant_ids)
    usage = (
        usage.annotate(month=TruncMonth("day"))
        .values("month", "tenant_id")
        .annotate(rows=Count("id"), **{name: Sum(name) for name in _USAGE_SUMS})
        .order_by()
    )
    shared = [_starts(Price.objects.all()), _starts(deployment_version_list())]
    per_tenant = [
        _starts_by_tenant(Contract.objects.all()),
        _starts_by_tenant(PromotionalCredit.objects.all()),
    ]
    # What invoices consumed of a promotion counts for every month: months can be invoiced
    # out of order, and each month's balance is what the others left.
    uses = _counts(PromotionUse.objects.all(), "credit__tenant_id")
    invoices: dict[tuple[datetime, int], list] = defaultdict(list)
    for month, tenant_id, pk, status in (
        Invoice.objects.filter(period_start__gte=within.start, period_start__lt=within.end)
        .order_by("pk")
        .values_list("period_start", "tenant_id", "pk", "status")
    ):
        invoices[(month.astimezone(UTC), tenant_id)].append((pk, status))
    digests = {}
    for row in usage:
        month = _month_of(row.pop("month"))
        tenant_id = row.pop("tenant_id")
        end = next_month(month)
        parts = (
            sorted(row.items()),
            [_before(starts, end) for starts in shared],
            [_before(versions.get(tenant_id, []), end) for versions in per_tenant],
            uses.get(tenant_id),
            invoices.get((month, tenant_id), []),
        )
        digests[(month, tenant_id)] = hashlib.sha256(repr(parts).encode()).hexdigest()
    return digests


def _month_of(value) -> datetime:
    """A TruncMonth of a date (a date on SQLite and PostgreSQL alike) as its first instant."""
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.combine(value, time.min, tzinfo=UTC)


def tenant_month_totals(
    *, month_start: datetime, tenants: Iterable[Tenant] | None = None
) -> dict[int, TenantMonthTotals]:
    """The rated totals of the month for each tenant with usage in it (of `tenants`, default
    every tenant), exact: the tenant-months whose inputs changed since they were stored are
    rated again first. For closing a month; pages read `rated_month_totals` as stored."""
    ids = None if tenants is None else [t.pk for t in tenants]
    stored = _refresh(within=Period(month_start, next_month(month_start)), tenant_ids=ids)
    return {pk: month_totals(row) for (_, pk), row in stored.items()}


# Refreshes run one at a time (jobs, and every embedded ingest after its fold): two at once
# would both find a tenant-month stale and the second's rows would collide with the first's.
RATED_LOCK = 0x52617465  # pg_advisory_xact_lock key, "Rate"


@transaction.atomic
def _refresh(
    *, within: Period, tenant_ids: list[int] | None = None, wait: bool = True
) -> dict[tuple[datetime, int], RatedTenantMonth] | None:
    """The stored tenant-months of the months starting in `within`, brought up to date:
    those whose inputs changed rated again with their rated usage (one rating per month);
    those whose usage is gone (of every tenant) dropped. One transaction, behind a lock, so
    the fingerprints are read after any refresh running alongside has committed; with
    `wait=False`, None at once when one is running."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            if wait:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [RATED_LOCK])
            else:
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [RATED_LOCK])
                if not cursor.fetchone()[0]:
                    return None
    digests = _fingerprints(within=within, tenant_ids=tenant_ids)
    in_months = RatedTenantMonth.objects.filter(
        month_start__gte=within.start, month_start__lt=within.end
    )
    if tenant_ids is not None:
        in_months = in_months.filter(tenant_id__in=tenant_ids)
    stored, gone = {}, []
    for row in in_months:
        key = (row.month_start.astimezone(UTC), row.tenant_id)
        if key in digests:
            stored[key] = row
        else:
            gone.append(row)
    stale: dict[datetime, list[int]] = defaultdict(list)
    for (month, pk), digest in sorted(digests.items()):
        if (month, pk) not in stored or stored[(month, pk)].fingerprint != digest:
            stale[month].append(pk)
    if gone:
        with transaction.atomic():
            for row in gone:
                RatedUsage.objects.filter(
                    month_start=row.month_start, tenant_id=row.tenant_id
                ).delete()
                row.delete()
    for month, ids in stale.items():
        for pk, row in _rate_and_store(month_start=month, tenant_ids=ids, digests=digests).items():
            stored[(month, pk)] = row
    return stored


def _rate_and_store(
    *, month_start: datetime, tenant_ids: list[int], digests: dict[tuple[datetime, int], str]
) -> dict[int, RatedTenantMonth]:
    rating = month_rate(
        month_start=month_start, tenants=list(Tenant.objects.filter(pk__in=tenant_ids))
    )
    now = clock.now()
    rows = []
    for pk in tenant_ids:
        row = RatedTenantMonth(
            tenant_id=pk,
            month_start=month_start,
            fingerprint=digests[(month_start, pk)],
            rated_at=now,
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
    with transaction.atomic():
        RatedUsage.objects.filter(month_start=month_start, tenant_id__in=tenant_ids).delete()
        rows_insert(RatedUsage._meta.db_table, _FIELDS, _rated_usage(rating))
        RatedTenantMonth.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["tenant", "month_start"],
            update_fields=[
                "fingerprint", "currency", "usage_amount", "minimum_shortfall", "error", "rated_at",
            ],
        )  # fmt: skip
    return {row.tenant_id: row for row in rows}


_FIELDS = (
    "tenant_id",
    "deployment_id",
    "hour",
    "month_start",
    "sale",
    *_TOKENS,
    *_COMPLIANT,
    *_MONEY,
)


def _rated_usage(rating: MonthRating) -> list[tuple]:
    """The rating's items summed per tenant, deployment, hour and sale: rows of _FIELDS."""
    versions = DeploymentVersions()
    deployments = dict(deployment_list().values_list("slug", "pk"))
    cells: dict[tuple, list] = {}
    with localcontext(EXACT):
        for tenant_id, rated in rating.rated.items():
            rows = {
                (hour, row["deployment"]): row
                for hour, hour_rows in rating.rows.get(tenant_id, {}).items()
                for row in hour_rows
            }
            for item in rated.items:
                usage = item.item
                hour = hour_floor(usage.time)
                sale = RatedUsage.Sale.PAID if item.is_paid else item.unsold_reason.value
                deployment_id = deployments[usage.deployment]
                key = (tenant_id, deployment_id, hour, rating.month_start, str(sale))
                sums = cells.get(key)
                if sums is None:
                    sums = cells[key] = [0] * 6 + [ZERO] * 5
                sums[0] += usage.input_tokens
                sums[1] += usage.cached_tokens
                sums[2] += usage.output_tokens
                if item.is_paid:
                    compliant = _compliant_tokens(
                        item,
                        event=rating.events.get((usage.source, usage.id)),
                        row=rows.get((hour, usage.deployment)),
                        version=versions.at(deployment_id, usage.time),
                    )
                    for index, value in enumerate((*compliant, *_amounts(item)), start=3):
                        sums[index] += value
    when = connection.ops.adapt_datetimefield_value  # as the ORM stores it (SQLite: text)
    return [
        (tenant_id, deployment_id, when(hour), when(month), sale, *sums)
        for (tenant_id, deployment_id, hour, month, sale), sums in cells.items()
    ]


def _amounts(item: RatedItem) -> tuple[Decimal, ...]:
    """(list value, contract discount, tier discount, realized, promotions) of a paid item:
    the contract discount comes off the list value first, the tier discount off the rest."""
    contract = item.list_value * item.contract_discount_pct / HUNDRED
    tier = (item.list_value - contract) * item.tier_discount_pct / HUNDRED
    return item.list_value, contract, tier, item.realized_amount, item.promotion_amount


def _compliant_tokens(item: RatedItem, *, event, row, version) -> tuple[int, int, int]:
    """The tokens of a paid item (input, cached, output) whose requests met their SLO: an
    event's when it is within its version's SLO; a rollup row's compliant tokens, or their
    share when the item is what a split hour's events leave of the row."""
    usage = item.item
    tokens = (usage.input_tokens, usage.cached_tokens, usage.output_tokens)
    if usage.id:
        within = version is None or is_slo_compliant(
            is_error=False,
            ttft_ms=event.get("ttft_ms"),
            tpot_ms=event.get("tpot_ms"),
            slo_ttft_ms=version.slo_ttft_ms,
            slo_tpot_ms=version.slo_tpot_ms,
        )
        return tokens if within else (0, 0, 0)
    compliant = tuple(row[name] for name in _COMPLIANT)
    total = row["input_tokens"] + row["output_tokens"]
    part = usage.input_tokens + usage.output_tokens
    if part == total:
        return compliant
    share = tuple(tokens * part // total if total else 0 for tokens in compliant)
    return share[0], min(share[1], share[0]), share[2]


def rated_months_refresh(
    *, start: datetime | None = None, end: datetime | None = None, wait: bool = True
) -> int | None:
    """The job: the rated usage of every month with usage (or of the months [start, end)
    touches) brought up to date after the fold; the fingerprints of all of them take a
    fixed number of queries. Returns the tenant-months read; only those whose inputs
    changed were rated. `wait=False` (the beat job): None at once while another refresh
    runs, rather than queue behind it; the next run rates what changed meanwhile."""
    start = month_floor(start) if start is not None else datetime(2000, 1, 1, tzinfo=UTC)
    if end is None:
        end = datetime(2101, 1, 1, tzinfo=UTC)
    elif end != month_floor(end):
        end = next_month(end)  # the whole month holding it
    stored = _refresh(within=Period(start, end), wait=wait)
    return None if stored is None else len(stored)
