"""Rollups: hourly and daily sums per tenant and deployment, recomputed from raw events for
every queued (tenant, deployment, hour). Claim and recompute happen in one transaction, so a
run killed midway leaves the queue as it was, and running twice gives the same rows."""

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from django.db import connection, transaction
from django.db.models import BigIntegerField, Count, FloatField, Q, Sum, Value
from django.db.models.functions import Coalesce, TruncHour

from metering.models import (
    LATENCY_BUCKETS_MS,
    DailyUsage,
    DeploymentVersion,
    HourlyUsage,
    RollupPending,
    UsageEvent,
)

Cell = tuple[int, int, datetime]  # tenant_id, deployment_id, hour

SUM_FIELDS = [
    "requests",
    "errors",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "ok_input_tokens",
    "ok_cached_tokens",
    "ok_output_tokens",
    "compliant_requests",
    "compliant_input_tokens",
    "compliant_cached_tokens",
    "compliant_output_tokens",
    "ttft_ms_sum",
    "ttft_count",
    "tpot_ms_sum",
    "tpot_count",
    "latency_ms_sum",
    "latency_count",
]
HOUR = timedelta(hours=1)


def rollup_pending(*, batch: int = 20_000) -> int:
    """Fold every queued cell into the rollups; returns the number of cells recomputed."""
    total = 0
    while True:
        with transaction.atomic():
            cells = _claim(batch)
            if not cells:
                return total
            rollup_cells(cells=cells)
            total += len(cells)


def _claim(limit: int) -> set[Cell]:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM metering_rolluppending WHERE id IN (SELECT id FROM "
                "metering_rolluppending ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) "
                "RETURNING tenant_id, deployment_id, hour",
                [limit],
            )
            return {(t, d, h) for t, d, h in cursor.fetchall()}
    rows = list(
        RollupPending.objects.order_by("id").values_list(
            "id", "tenant_id", "deployment_id", "hour"
        )[:limit]
    )
    RollupPending.objects.filter(id__in=[r[0] for r in rows]).delete()
    return {(t, d, h) for _, t, d, h in rows}


def rollup_cells(*, cells: Iterable[Cell]) -> None:
    """Recompute the hourly rows of `cells` from raw events, then the days they fall in."""
    by_deployment: dict[int, set[Cell]] = defaultdict(set)
    for cell in cells:
        by_deployment[cell[1]].add(cell)
    hourly: list[HourlyUsage] = []
    for deployment_id, dep_cells in by_deployment.items():
        for version, version_cells in _split_by_version(deployment_id, dep_cells):
            hourly += _aggregate(deployment_id, version, version_cells)
    if hourly:
        HourlyUsage.objects.bulk_create(
            hourly,
            batch_size=1000,
            update_conflicts=True,
            unique_fields=["tenant", "deployment", "hour"],
            update_fields=[*SUM_FIELDS, "latency_histogram", "is_demo"],
        )
    _rollup_days({(t, d, h.date()) for t, d, h in (c for cs in by_deployment.values() for c in cs)})


def _split_by_version(deployment_id: int, cells: set[Cell]):
    """Cells grouped by the deployment version in force at their hour (None: no version)."""
    versions = list(
        DeploymentVersion.objects.filter(deployment_id=deployment_id).order_by("effective_from")
    )
    groups: dict[int | None, set[Cell]] = defaultdict(set)
    for cell in cells:
        in_force = None
        for version in versions:
            if version.effective_from <= cell[2]:
                in_force = version
        groups[in_force.pk if in_force else None].add(cell)
    by_pk = {v.pk: v for v in versions}
    for pk, group in groups.items():
        yield by_pk.get(pk), group


def _big_sum(field: str, condition: Q | None = None):
    return Coalesce(Sum(field, filter=condition), Value(0), output_field=BigIntegerField())


def _float_sum(field: str):
    return Coalesce(Sum(field), Value(0.0), output_field=FloatField())


def _aggregates(version: DeploymentVersion | None) -> dict:
    ok = Q(is_error=False)
    compliant = ok
    if version is not None and version.slo_ttft_ms is not None:
        compliant &= Q(ttft_ms__isnull=True) | Q(ttft_ms__lte=version.slo_ttft_ms)
    if version is not None and version.slo_tpot_ms is not None:
        compliant &= Q(tpot_ms__isnull=True) | Q(tpot_ms__lte=version.slo_tpot_ms)
    aggregates = {
        "requests": Count("id"),
        "errors": Count("id", filter=Q(is_error=True)),
        "compliant_requests": Count("id", filter=compliant),
        "ttft_ms_sum": _float_sum("ttft_ms"),
        "ttft_count": Count("ttft_ms"),
        "tpot_ms_sum": _float_sum("tpot_ms"),
        "tpot_count": Count("tpot_ms"),
        "latency_ms_sum": _float_sum("latency_ms"),
        "latency_count": Count("latency_ms"),
    }
    for name in ("input_tokens", "cached_tokens", "output_tokens"):
        aggregates[f"all_{name}"] = _big_sum(name)  # renamed below: names must not shadow fields
        aggregates[f"ok_{name}"] = _big_sum(name, ok)
        aggregates[f"compliant_{name}"] = _big_sum(name, compliant)
    for index, edge in enumerate(LATENCY_BUCKETS_MS):
        aggregates[f"latency_le_{index}"] = Count("id", filter=Q(latency_ms__lte=edge))
    return aggregates


def _aggregate(deployment_id: int, version, cells: set[Cell]) -> list[HourlyUsage]:
    tenants = {c[0] for c in cells}
    start = min(c[2] for c in cells)
    end = max(c[2] for c in cells) + HOUR
    rows = (
        UsageEvent.objects.filter(
            deployment_id=deployment_id, tenant_id__in=tenants, time__gte=start, time__lt=end
        )
        .annotate(hour=TruncHour("time"))
        .values("tenant_id", "hour")
        .annotate(**_aggregates(version))
    )
    result = []
    for row in rows:
        if (row["tenant_id"], deployment_id, row["hour"]) not in cells:
            continue
        for name in ("input_tokens", "cached_tokens", "output_tokens"):
            row[name] = row.pop(f"all_{name}")
        cumulative = [row.pop(f"latency_le_{i}") for i in range(len(LATENCY_BUCKETS_MS))]
        cumulative.append(row["latency_count"])
        histogram = [cumulative[0]] + [b - a for a, b in pairwise(cumulative)]
        result.append(
            HourlyUsage(
                deployment_id=deployment_id, latency_histogram=histogram, is_demo=False, **row
            )
        )
    return result


def _rollup_days(day_cells: set[tuple[int, int, object]]) -> None:
    """Daily rows = the sum of their hourly rows."""
    if not day_cells:
        return
    tenants = {t for t, _, _ in day_cells}
    deployments = {d for _, d, _ in day_cells}
    days = {day for _, _, day in day_cells}
    hours = HourlyUsage.objects.filter(
        tenant_id__in=tenants,
        deployment_id__in=deployments,
        hour__gte=datetime.combine(min(days), datetime.min.time(), tzinfo=UTC),
        hour__lt=datetime.combine(max(days), datetime.min.time(), tzinfo=UTC) + timedelta(days=1),
    )
    totals: dict[tuple[int, int, object], DailyUsage] = {}
    for h in hours.iterator(chunk_size=2000):
        key = (h.tenant_id, h.deployment_id, h.hour.date())
        if key not in day_cells:
            continue
        day = totals.get(key)
        if day is None:
            day = totals[key] = DailyUsage(
                tenant_id=key[0],
                deployment_id=key[1],
                day=key[2],
                latency_histogram=[0] * (len(LATENCY_BUCKETS_MS) + 1),
                is_demo=h.is_demo,
            )
        for name in SUM_FIELDS:
            setattr(day, name, getattr(day, name) + getattr(h, name))
        for i, count in enumerate(h.latency_histogram or []):
            day.latency_histogram[i] += count
        day.is_demo = day.is_demo and h.is_demo
    DailyUsage.objects.bulk_create(
        list(totals.values()),
        batch_size=1000,
        update_conflicts=True,
        unique_fields=["tenant", "deployment", "day"],
        update_fields=[*SUM_FIELDS, "latency_histogram", "is_demo"],
    )


def rollup_rebuild() -> int:
    """Recompute every rollup from raw events (a repair tool; the queue is the normal path)."""
    cells = {
        (t, d, h)
        for t, d, h in UsageEvent.objects.annotate(hour=TruncHour("time"))
        .values_list("tenant_id", "deployment_id", "hour")
        .distinct()
    }
    with transaction.atomic():
        HourlyUsage.objects.filter(is_demo=False).delete()
        DailyUsage.objects.filter(is_demo=False).delete()
        if cells:
            rollup_cells(cells=cells)
    return len(cells)
