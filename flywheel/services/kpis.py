"""KPI snapshots: measured per scope and day or month, upserted on their key.

The measure job refreshes the current day and month every 15 minutes and closes each
day and month once after it ends; `snapshots_measure` does the same for any range.
Every write is an upsert on (scope, period_kind, period_start) computed from the
database alone, so a rerun after a crash, or two workers at once, leave one identical
row per key.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from billing.selectors.rated import rated_digest
from billing.services.rated import rated_months_refresh
from flywheel.domain.kpis import Kpis
from flywheel.models import KpiSnapshot
from flywheel.selectors.measurement import DAY, FACTORY, FactoryData
from metering.selectors.usage import usage_and_capacity_digest
from metering.services.usage.changes import changed_hours_claim
from portal import clock
from portal.money import money_str
from portal.periods import day_floor, hour_ceil, month_start, next_month


def kpis_json(kpis: Kpis) -> dict[str, Any]:
    """The figures as JSON: ratios and rates as numbers, money as decimal strings, token
    counts as integers, times RFC 3339 (architecture.md, response shapes)."""
    out: dict[str, Any] = {}
    for key, value in kpis.as_dict().items():
        if isinstance(value, datetime):
            out[key] = value.astimezone(UTC).isoformat().replace("+00:00", "Z")
        elif key in ("list_value", "realized_revenue"):
            out[key] = money_str(amount=value, currency=settings.FACTORY_CURRENCY)
        elif isinstance(value, Decimal):
            out[key] = float(value)
        else:
            out[key] = value
    return out


def _periods(start: datetime, end: datetime) -> list[tuple[str, datetime, datetime]]:
    """Every day and month that [start, end) touches, clipped to nothing: whole periods."""
    periods = []
    day = day_floor(start)
    while day < end:
        periods.append((KpiSnapshot.PeriodKind.DAY, day, day + DAY))
        day += DAY
    month = month_start(start)
    while month < end:
        periods.append((KpiSnapshot.PeriodKind.MONTH, month, next_month(month)))
        month = next_month(month)
    return periods


def snapshots_measure(
    *, start: datetime, end: datetime, now: datetime | None = None
) -> list[KpiSnapshot]:
    """Measure every scope for each day and month that [start, end) touches and upsert the
    snapshots; a period not over at `now` is measured up to now and left open. Billing's
    rated usage of those months is brought up to date first (its tenant-months whose inputs
    changed are rated again), so the sales measured are those of the usage folded."""
    now = now or clock.now()
    periods = [(kind, s, e) for kind, s, e in _periods(start, end) if s < now]
    if not periods:
        return []
    first = min(s for _, s, _ in periods)
    rated_months_refresh(start=first, end=max(e for *_, e in periods))
    data = FactoryData(
        start=first,
        end=min(max(e for *_, e in periods), hour_ceil(now)),
        snapshots=False,
    )
    rows = []
    for kind, period_start, period_end in periods:
        measured_end = min(period_end, data.end)
        for scope in data.scopes():
            kpis = data.kpis(scope=scope, start=period_start, end=measured_end)
            sums = {}
            if scope == FACTORY and kind == KpiSnapshot.PeriodKind.DAY:
                sums = {
                    pool.slug: data.pool_sums(pool_id, period_start, measured_end).as_json()
                    for pool_id, pool in data.pools.items()
                }
            rows.append(
                KpiSnapshot(
                    scope=scope,
                    period_kind=kind,
                    period_start=period_start,
                    period_end=measured_end,
                    telemetry=kpis.telemetry,
                    values=kpis_json(kpis),
                    sums=sums,
                    rating_errors=data.rating_errors,
                    is_closed=period_end <= now,
                    measured_at=now,
                )
            )
    with transaction.atomic():
        KpiSnapshot.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["scope", "period_kind", "period_start"],
            update_fields=[
                "period_end",
                "telemetry",
                "values",
                "sums",
                "rating_errors",
                "is_closed",
                "measured_at",
            ],
        )
    return rows


def snapshots_reopen(*, hours: set[datetime]) -> int:
    """Mark the closed snapshots stale (open again) that late usage for `hours` changes, so
    the next refresh measures them again (kpis.md §6): the months holding them, and every
    day from the first such hour to its month's end (a month rates in time order, so usage
    on one day moves the free allowance and tiers of the days after it)."""
    if not hours:
        return 0
    first_day: dict[datetime, datetime] = {}
    for hour in hours:
        month = month_start(hour)
        first_day[month] = min(first_day.get(month, day_floor(hour)), day_floor(hour))
    days = Q()
    for month, day in first_day.items():
        days |= Q(period_start__gte=day, period_start__lt=next_month(month))
    return KpiSnapshot.objects.filter(
        Q(period_kind=KpiSnapshot.PeriodKind.DAY) & days
        | Q(period_kind=KpiSnapshot.PeriodKind.MONTH, period_start__in=first_day),
        is_closed=True,
    ).update(is_closed=False)


def snapshots_update(*, now: datetime | None = None) -> tuple[int, int]:
    """What the measure job does once usage is folded: reopen the closed snapshots of the
    hours metering queued as changed (usage folded again, capacity stored late; claimed in
    the reopening transaction, so a run that fails leaves them queued), then refresh
    (`snapshots_refresh`). Returns (snapshots reopened, snapshots written)."""
    with transaction.atomic():
        reopened = snapshots_reopen(hours=changed_hours_claim())
    return reopened, snapshots_refresh(now=now)


INPUTS = "inputs"  # the open month snapshot's sums: the digest of what it was measured from


def inputs_digest(*, start: datetime, end: datetime) -> str:
    """A digest of everything the KPIs of [start, end) read: usage and capacity, deployment
    versions and service lives, and billing's rated usage of its months (after a refresh:
    what pricing and usage rated to)."""
    rated = rated_digest(start=month_start(start), end=next_month(month_start(end)))
    parts = (usage_and_capacity_digest(start=start, end=end), rated, end)
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _month_inputs(month: datetime) -> str | None:
    row = KpiSnapshot.objects.filter(
        scope=FACTORY, period_kind=KpiSnapshot.PeriodKind.MONTH, period_start=month
    ).first()
    return row.sums.get(INPUTS) if row is not None else None


def snapshots_refresh(*, now: datetime | None = None) -> int:
    """The job: every day of the current month so far and the month, and every earlier
    day or month not closed yet: each is closed once, by the first run after it ends, and
    measured again when late usage reopened it. An earlier month is measured on its own,
    from its first to its last open period, never the months between it and now."""
    now = now or clock.now()
    current = month_start(now)
    rated_months_refresh(start=current, end=now)
    inputs = inputs_digest(start=current, end=hour_ceil(now))
    if _month_inputs(current) == inputs:
        written = 0  # nothing the current month's figures read changed: not measured again
    else:
        written = len(snapshots_measure(start=current, end=now, now=now))
        KpiSnapshot.objects.filter(
            scope=FACTORY, period_kind=KpiSnapshot.PeriodKind.MONTH, period_start=current
        ).update(sums={INPUTS: inputs})
    stale = (
        KpiSnapshot.objects.filter(is_closed=False, period_start__lt=current)
        .values_list("period_start", flat=True)
        .distinct()
    )
    by_month: dict[datetime, list[datetime]] = {}
    for start in stale:
        by_month.setdefault(month_start(start), []).append(start)
    for starts in by_month.values():
        written += len(snapshots_measure(start=min(starts), end=max(starts) + DAY, now=now))
    return written
