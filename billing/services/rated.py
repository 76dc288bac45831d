"""Rated usage: billing's read model of what each tenant's month rated to, kept current by
the rate stage (portal.pipeline). The stage reads what changed past its own cursors:
metering's change log (a tenant's usage of an hour) and billing's own queue (a price,
contract or promotion from an hour on, an invoice that spent promotions); it rates those
tenant-months again, hour by hour in one `month_rate` per month; then, in one short
transaction, it replaces their rated usage (RatedUsage: per tenant, deployment, hour and
sale) and totals (RatedTenantMonth), appends the hours whose rated usage changed per
tenant to billing's change log, and consumes what it read. The measurement, TFOM revenue,
price realization and SLA credits read the stored rows and never run the rating.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal, localcontext

from django.db import connection, transaction
from django.db.models.functions import TruncMonth

from billing.domain.invoices import LineKind
from billing.domain.rating.types import RatedItem
from billing.models import RatedChange, RatedTenantMonth, RatedUsage, RatingPending
from billing.selectors.rated import TenantMonthTotals, rated_month_totals
from billing.selectors.rating import MonthRating, month_rate
from metering.domain.usage.compliance import is_slo_compliant
from metering.selectors.changes import usage_changes_read
from metering.selectors.factory import DeploymentVersions, deployment_list
from metering.selectors.usage import daily_usage_list
from portal import clock
from portal.bulk import rows_insert
from portal.models import Tenant
from portal.money import EXACT
from portal.periods import hour_floor
from portal.periods import month_start as month_floor
from portal.pipeline import RATE, log_append, log_consume, log_prune, stage_schedule

ZERO = Decimal(0)
HOUR = timedelta(hours=1)
HUNDRED = Decimal(100)

_TOKENS = ("input_tokens", "cached_tokens", "output_tokens")
_COMPLIANT = tuple(f"compliant_{name}" for name in _TOKENS)
_MONEY = ("list_value", "contract_discount", "tier_discount", "realized", "promotions")


def rating_queue(*, start: datetime, tenant: Tenant | None = None) -> None:
    """Ask the rate stage to rate again the usage of `tenant` (None: every tenant) from
    `start` on: a price, contract or promotion from then, or an invoice that spent
    promotions. In the caller's transaction."""
    RatingPending.objects.create(tenant=tenant, start=start)
    stage_schedule(RATE)


def rated_usage_update() -> int:
    """The rate stage: every tenant-month that metering's change log (past this stage's
    cursor) or billing's queue names is rated again, then its rated usage and totals are
    replaced and the changes appended to billing's change log in one short transaction
    that consumes what was read (the rating itself runs before it: on SQLite a write
    transaction holds back ingestion). Returns the tenant-months rated."""
    while True:
        changes = usage_changes_read(consumer=RATE)
        queued = list(RatingPending.objects.values_list("pk", "tenant_id", "start"))
        stale = _usage_months(changes.entries)
        for month, tenant_ids in _queued_months(queued).items():
            stale[month] |= tenant_ids
        ratings = [_rate(month, sorted(ids)) for month, ids in sorted(stale.items())]
        with transaction.atomic():
            claimed, _ = RatingPending.objects.filter(pk__in=[q[0] for q in queued]).delete()
            if not log_consume(changes) or claimed != len(queued):
                transaction.set_rollback(True)  # another run took them meanwhile: again
                continue
            for rating in ratings:
                _store(rating)
        log_prune(RatedChange, log="billing.rated")
        return sum(len(rating.months) for rating in ratings)


def _usage_months(changes) -> dict[datetime, set[int]]:
    """The tenant-months whose usage metering changed."""
    months: dict[datetime, set[int]] = defaultdict(set)
    for change in changes:
        if change.tenant_id is not None:
            months[month_floor(change.start)].add(change.tenant_id)
    return months


def _queued_months(queued: list[tuple]) -> dict[datetime, set[int]]:
    """The tenant-months with usage that billing's queue (pk, tenant id, start) names."""
    if not queued:
        return {}
    months: dict[datetime, set[int]] = defaultdict(set)
    first = min(month_floor(start) for _, _, start in queued)
    usage = (
        daily_usage_list(start=first, end=datetime(2101, 1, 1, tzinfo=UTC))
        .annotate(month=TruncMonth("day"))
        .values_list("month", "tenant_id")
        .distinct()
    )
    for month, tenant_id in usage:
        month = _month_of(month)
        if any(
            (pk is None or pk == tenant_id) and month >= month_floor(start)
            for _, pk, start in queued
        ):
            months[month].add(tenant_id)
    return months


def _month_of(value) -> datetime:
    """A TruncMonth of a date (a date on SQLite and PostgreSQL alike) as its first instant."""
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.combine(value, time.min, tzinfo=UTC)


def tenant_month_totals(
    *, month_start: datetime, tenants: Iterable[Tenant] | None = None
) -> dict[int, TenantMonthTotals]:
    """The rated totals of the month for each tenant with usage in it (of `tenants`, default
    every tenant), exact for what is folded: the rate stage runs first. For closing a
    month (which runs the fold before it); pages read `rated_month_totals` as stored."""
    rated_usage_update()
    return rated_month_totals(month_start=month_start, tenants=tenants)


@dataclass(frozen=True)
class _Rated:
    """One month's rating of some tenants, ready to store."""

    month_start: datetime
    tenant_ids: list[int]
    months: list[RatedTenantMonth]  # the tenant-months' totals
    usage: list[tuple]  # rated usage rows of _FIELDS
    before: dict  # the stored rated usage it replaces (`_cells`)


def _rate(month_start: datetime, tenant_ids: list[int]) -> _Rated:
    """Rate the tenants' month, and read the rated usage it replaces (reads only: if another
    run stores these tenant-months first, it consumed what this run read, and this run's
    `log_consume` or queue claim fails: it reads again)."""
    stored = RatedUsage.objects.filter(month_start=month_start, tenant_id__in=tenant_ids)
    before = _cells(stored)
    rating = month_rate(
        month_start=month_start, tenants=list(Tenant.objects.filter(pk__in=tenant_ids))
    )
    now = clock.now()
    rows = []
    for pk in tenant_ids:
        row = RatedTenantMonth(tenant_id=pk, month_start=month_start, rated_at=now)
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
    return _Rated(month_start, tenant_ids, rows, _rated_usage(rating), before)


def _store(rated: _Rated) -> None:
    """Replace the tenant-months' rated usage and totals, and append to billing's change log
    the hours each tenant's rated usage changed in."""
    ids = rated.tenant_ids
    RatedUsage.objects.filter(month_start=rated.month_start, tenant_id__in=ids).delete()
    rows_insert(RatedUsage._meta.db_table, _FIELDS, rated.usage)
    RatedTenantMonth.objects.bulk_create(
        rated.months,
        update_conflicts=True,
        unique_fields=["tenant", "month_start"],
        update_fields=["currency", "usage_amount", "minimum_shortfall", "error", "rated_at"],
    )
    after = _cells(RatedUsage.objects.filter(month_start=rated.month_start, tenant_id__in=ids))
    log_append(RatedChange, _changed_spans(rated.before, after), log="billing.rated")


def _cells(rows) -> dict[tuple[int, int, datetime, str], tuple]:
    """Stored rated usage keyed by (tenant, deployment, hour, sale)."""
    sums = (*_TOKENS, *_COMPLIANT, *_MONEY)
    return {
        (tenant_id, deployment_id, hour.astimezone(UTC), sale): values
        for tenant_id, deployment_id, hour, sale, *values in rows.values_list(
            "tenant_id", "deployment_id", "hour", "sale", *sums
        )
    }


def _changed_spans(before: dict, after: dict) -> list[RatedChange]:
    """Per tenant, the hours from the first to the last whose rated usage differs."""
    spans: dict[int, tuple[datetime, datetime]] = {}
    for key in before.keys() | after.keys():
        if before.get(key) != after.get(key):
            tenant_id, _, hour, _ = key
            first, last = spans.get(tenant_id, (hour, hour))
            spans[tenant_id] = (min(first, hour), max(last, hour))
    return [
        RatedChange(tenant_id=pk, start=first, end=last + HOUR)
        for pk, (first, last) in sorted(spans.items())
    ]


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
