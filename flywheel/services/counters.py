"""The counters /metrics publishes (flywheel.domain.counters), kept by the measure stage.

Each month's part of every counter (CounterMonth) is worked out when the stage writes the
month's KPI snapshot, from the same published read models: the pools' GPU-seconds and money
from the snapshot's own sums, usage per tenant, deployment and service tier from metering's
rollups, up to where the month is measured, to its last whole hour: architecture.md's
counters advance as hours close, while a read of an open month runs to the published cut
(kpis.md section 0), so the open month's part is measured to the hour, not taken from its
snapshot. So the counters advance as hours close, and a late event, a refold or a re-rating
of a month reaches them when the stage measures that month again. The published values
(CounterValue) are the sums of the months, raised and never lowered: Prometheus reads any
decrease as a reset and would count a counter's whole value again in `increase()`. Growth
only ever raises them (usage, even late, adds); a correction that lowers a past figure (a
capacity sample posted again with fewer GPUs, a new version from an earlier hour of the open
month) is absorbed by the growth that follows instead. Everything is in the database: a
restart reads the same values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.db import connection

from flywheel.domain.counters import (
    POOL_FIGURES,
    MonthCounts,
    Series,
    counter_series,
    label_text,
)
from flywheel.domain.kpis import KPI_CONTEXT
from flywheel.models import CounterMonth, CounterValue, KpiSnapshot
from flywheel.selectors.measurement import FACTORY, kpi_read
from metering.selectors.factory import deployment_list, factory_in_service_from
from metering.selectors.usage import usage_by_tenant_deployment, usage_measured_until
from portal.models import Tenant
from portal.periods import Period, hour_floor, month_start, next_month

# What a counter's value keeps: 12 decimals (GPU-seconds and money, well below a cent).
QUANTUM = Decimal("1e-12")


@dataclass(frozen=True)
class CountersMeasured:
    """What a measurement of the counters found: the months whose part is new, and every
    series' value as the sum of all months."""

    months: list[CounterMonth]
    series: dict[Series, Decimal]


def counters_measure(*, snapshots: Iterable[KpiSnapshot], now: datetime) -> CountersMeasured | None:
    """Reads only. The part of each month whose factory month snapshot is in `snapshots`
    (just measured), and of each month in service that has none yet, up to the last whole
    hour of the read window; then every series as the sum of the months. None when no month changed."""
    measured = {
        row.period_start.astimezone(UTC): row
        for row in snapshots
        if row.scope == FACTORY and row.period_kind == KpiSnapshot.PeriodKind.MONTH
    }
    due = {month: hour_floor(row.period_end.astimezone(UTC)) for month, row in measured.items()}
    stored = {
        month.astimezone(UTC) for month in CounterMonth.objects.values_list("month", flat=True)
    }
    first, to = factory_in_service_from(), hour_floor(usage_measured_until(now=now))
    month = month_start(first) if first is not None else to
    while month < to:  # months in service never counted yet (measured as any read would)
        if month not in stored and month not in due:
            due[month] = min(next_month(month), to)
        month = next_month(month)
    if not due:
        return None
    parts = {
        month: _month_counts(month, until, _reaching(measured.get(month), until))
        for month, until in sorted(due.items())
        if month < until
    }
    totals = MonthCounts()
    for row in CounterMonth.objects.exclude(month__in=list(parts)):
        totals.add(MonthCounts.from_json(row.counts))
    for counts in parts.values():
        totals.add(counts)
    months = [
        CounterMonth(month=month, until=due[month], counts=counts.as_json(), measured_at=now)
        for month, counts in parts.items()
    ]
    deployments = {
        pk: (pool, model)
        for pk, pool, model in deployment_list().values_list("pk", "pool__slug", "model__slug")
    }
    tenants = dict(Tenant.objects.values_list("pk", "slug"))
    series = counter_series(
        counts=totals,
        deployments=deployments,
        tenants=tenants,
        currency=settings.FACTORY_CURRENCY,
    )
    return CountersMeasured(months=months, series=series)


def _reaching(snapshot: KpiSnapshot | None, until: datetime) -> KpiSnapshot | None:
    """The month snapshot if it ends at `until`: an open month's runs to the published cut,
    past the last whole hour the counters count, and is then measured again to the hour."""
    return snapshot if snapshot is not None and snapshot.period_end == until else None


def _month_counts(month: datetime, until: datetime, snapshot: KpiSnapshot | None) -> MonthCounts:
    """[month, until)'s sums: each pool's from its factory month snapshot (the one just
    measured, else the stored one when it reaches `until`, else measured as any read of the
    month is), usage from the rollups."""
    if snapshot is None:
        snapshot = KpiSnapshot.objects.filter(
            scope=FACTORY,
            period_kind=KpiSnapshot.PeriodKind.MONTH,
            period_start=month,
            period_end=until,
        ).first()
    if snapshot is not None and snapshot.sums:
        pools = snapshot.sums
    else:
        data = kpi_read(Period(month, until))
        pools = {
            pool.slug: data.pool_sums(pk, month, until).as_json() for pk, pool in data.pools.items()
        }
    counts = MonthCounts(
        pools={
            slug: {name: Decimal(str(sums.get(name, 0))) for name in POOL_FIGURES}
            for slug, sums in pools.items()
        }
    )
    usage = usage_by_tenant_deployment(start=month, end=until)
    for (tenant_id, deployment_id, tier), sums in usage.items():
        counts.usage_add(tenant_id=tenant_id, deployment_id=deployment_id, tier=tier, sums=sums)
    return counts


def counters_store(measured: CountersMeasured | None) -> int:
    """In the caller's transaction: upsert the months' parts and raise every published
    value to its series' sum (never lowering one, whoever wrote it meanwhile). Returns the
    series raised."""
    if measured is None:
        return 0
    CounterMonth.objects.bulk_create(
        measured.months,
        update_conflicts=True,
        unique_fields=["month"],
        update_fields=["until", "counts", "measured_at"],
    )
    current = {
        (name, labels): value
        for name, labels, value in CounterValue.objects.values_list("name", "labels", "value")
    }
    raised = []
    for (family, labels), total in measured.series.items():
        value = total.quantize(QUANTUM, context=KPI_CONTEXT)
        key = (family.name, label_text(family, labels))
        if key not in current or value > current[key]:
            raised.append((*key, value))
    raised.sort()  # rows locked in one order by every writer
    if raised:
        _raise(raised)
    return len(raised)


def _raise(rows: list[tuple[str, str, Decimal]]) -> None:
    table = connection.ops.quote_name(CounterValue._meta.db_table)
    greatest = "GREATEST" if connection.vendor == "postgresql" else "max"
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (name, labels, value) VALUES (%s, %s, %s) "  # noqa: S608 (the model's table)
            f"ON CONFLICT (name, labels) DO UPDATE SET value = {greatest}({table}.value, "
            "EXCLUDED.value)",
            rows,
        )
