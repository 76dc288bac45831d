"""Rollups: hourly and daily sums per tenant and deployment, recomputed from raw events for
every queued (tenant, deployment, hour). Claim and recompute happen in one transaction, so a
run killed midway leaves the queue as it was, and running twice gives the same rows.

On PostgreSQL the cells are staged with COPY and each level is one `INSERT … SELECT …
ON CONFLICT DO UPDATE` (the sums never leave the database); other databases use the ORM.
Both compute the same figures."""

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from django.db import connection, transaction
from django.db.models import BigIntegerField, F, FloatField, Q, Sum, Value
from django.db.models.functions import Coalesce, TruncHour

from metering.models import (
    LATENCY_BUCKETS_MS,
    DailyUsage,
    DeploymentVersion,
    FoldMark,
    HourlyUsage,
    RollupPending,
    UsageEvent,
)
from metering.services.factory import pools_in_service_store
from metering.services.usage.changes import changed_hours_store
from portal import clock

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
# Every column of a rollup row besides its key: an upsert (ORM or SQL) overwrites them all.
ROLLUP_COLUMNS = [*SUM_FIELDS, "latency_histogram", "is_demo"]

HOUR = timedelta(hours=1)

# Folds run one at a time on PostgreSQL: two folds of the same cell at once (each ingest
# request folds its batch after commit) would each recompute from a snapshot that misses
# the other's events and the later write would lose them; overlapping cells also deadlock.
ROLLUP_LOCK = 0x526F6C6C  # pg_advisory_xact_lock key, "Roll"


def rollup_pending(*, batch: int = 20_000) -> int:
    """Fold every queued cell into the rollups; returns the number of cells recomputed."""
    total = 0
    while True:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ROLLUP_LOCK])
            cells = _claim(batch)
            if not cells:
                if total:
                    pools_in_service_store()
                fold_mark_store()
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
    """Recompute the hourly rows of `cells` from raw events, then the days they fall in; their
    hours are queued as changed (metering.models.ChangedHour)."""
    cells = set(cells)
    changed_hours_store(hours={hour for _, _, hour in cells})
    if connection.vendor == "postgresql":
        _rollup_hours_postgresql(cells)
        rollup_days({(t, d, h.astimezone(UTC).date()) for t, d, h in cells})
        return
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
            update_fields=ROLLUP_COLUMNS,
        )
    rollup_days({(t, d, h.date()) for t, d, h in (c for cs in by_deployment.values() for c in cs)})


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
    # SLO compliance as metering.domain.usage.compliance.is_slo_compliant defines it (here
    # as a filter, below in SQL; tests/metering/test_usage_compliance.py holds all three equal).
    ok = Q(is_error=False)
    compliant = ok
    if version is not None and version.slo_ttft_ms is not None:
        compliant &= Q(ttft_ms__isnull=True) | Q(ttft_ms__lte=version.slo_ttft_ms)
    if version is not None and version.slo_tpot_ms is not None:
        compliant &= Q(tpot_ms__isnull=True) | Q(tpot_ms__lte=version.slo_tpot_ms)
    aggregates = {
        "all_requests": _big_sum("requests"),  # renamed below, as the tokens
        "errors": _big_sum("requests", Q(is_error=True)),
        "compliant_requests": _big_sum("requests", compliant),
    }
    for name in ("ttft_ms", "tpot_ms", "latency_ms"):
        # An event standing for n requests carries their mean: it weighs n.
        aggregates[f"{name}_sum"] = Coalesce(
            Sum(F(name) * F("requests"), output_field=FloatField()),
            Value(0.0),
            output_field=FloatField(),
        )
        aggregates[name.replace("_ms", "_count")] = _big_sum(
            "requests", Q(**{f"{name}__isnull": False})
        )
    for name in ("input_tokens", "cached_tokens", "output_tokens"):
        aggregates[f"all_{name}"] = _big_sum(name)  # renamed below: names must not shadow fields
        aggregates[f"ok_{name}"] = _big_sum(name, ok)
        aggregates[f"compliant_{name}"] = _big_sum(name, compliant)
    for index, edge in enumerate(LATENCY_BUCKETS_MS):
        aggregates[f"latency_le_{index}"] = _big_sum("requests", Q(latency_ms__lte=edge))
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
        for name in ("requests", "input_tokens", "cached_tokens", "output_tokens"):
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


def rollup_days(day_cells: set[tuple[int, int, object]]) -> None:
    """Daily rows = the sum of their hourly rows."""
    if not day_cells:
        return
    if connection.vendor == "postgresql":
        _rollup_days_postgresql(day_cells)
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
        update_fields=ROLLUP_COLUMNS,
    )


def _slo_thresholds(cells: set[Cell]) -> dict[Cell, tuple[int | None, int | None]]:
    """(SLO TTFT ms, SLO TPOT ms) of the deployment version in force at each cell's hour
    (None, None without a version), as _split_by_version decides it."""
    versions: dict[int, list[DeploymentVersion]] = defaultdict(list)
    for version in DeploymentVersion.objects.filter(
        deployment_id__in={d for _, d, _ in cells}
    ).order_by("deployment_id", "effective_from"):
        versions[version.deployment_id].append(version)
    starts = {d: [v.effective_from for v in vs] for d, vs in versions.items()}
    thresholds = {}
    for cell in cells:
        index = bisect_right(starts.get(cell[1], []), cell[2])
        version = versions[cell[1]][index - 1] if index else None
        thresholds[cell] = (
            (version.slo_ttft_ms, version.slo_tpot_ms) if version is not None else (None, None)
        )
    return thresholds


def _stage(cursor, table: str, columns: str, types: list[str], rows: Iterable[tuple]) -> None:
    """Fill a transaction-local temporary table with COPY, and give the planner its size."""
    cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} ({columns}) ON COMMIT DELETE ROWS")
    # Table names and SQL below are constants of this module, never input.
    cursor.execute(f"DELETE FROM {table}")  # noqa: S608 (left by an earlier call in this transaction)
    with cursor.cursor.copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)
    cursor.execute(f"ANALYZE {table}")


# The SQL upserts' column list and their ON CONFLICT assignments.
_COLUMNS = ", ".join(ROLLUP_COLUMNS)
_OVERWRITE = ", ".join(f"{name} = EXCLUDED.{name}" for name in ROLLUP_COLUMNS)


def _hourly_sql() -> str:
    ok = "NOT e.is_error"
    compliant = (
        "NOT e.is_error"
        " AND (c.slo_ttft_ms IS NULL OR e.ttft_ms IS NULL OR e.ttft_ms <= c.slo_ttft_ms)"
        " AND (c.slo_tpot_ms IS NULL OR e.tpot_ms IS NULL OR e.tpot_ms <= c.slo_tpot_ms)"
    )
    # An event stands for e.requests requests (its latencies are their means): counts weigh it.
    n = "COALESCE(sum(e.requests){}, 0)"
    sums = [n.format(""), n.format(" FILTER (WHERE e.is_error)")]
    sums += [f"sum(e.{name})" for name in ("input_tokens", "cached_tokens", "output_tokens")]
    for condition in (ok, compliant):
        if condition == compliant:
            sums.append(n.format(f" FILTER (WHERE {condition})"))
        sums += [
            f"COALESCE(sum(e.{name}) FILTER (WHERE {condition}), 0)"
            for name in ("input_tokens", "cached_tokens", "output_tokens")
        ]
    for name in ("ttft_ms", "tpot_ms", "latency_ms"):
        sums += [
            f"COALESCE(sum(e.{name} * e.requests), 0)",
            n.format(f" FILTER (WHERE e.{name} IS NOT NULL)"),
        ]
    # Non-cumulative bucket counts, +Inf last (as _aggregate derives them from cumulative ones).
    edges = [None, *LATENCY_BUCKETS_MS, None]
    buckets = []
    for lower, upper in pairwise(edges):
        terms = [f"e.latency_ms > {lower}" if lower is not None else "e.latency_ms IS NOT NULL"]
        if upper is not None:
            terms.append(f"e.latency_ms <= {upper}")
        buckets.append(n.format(f" FILTER (WHERE {' AND '.join(terms)})"))
    return (
        f"INSERT INTO metering_hourlyusage (tenant_id, deployment_id, hour, {_COLUMNS}) "  # noqa: S608
        f"SELECT c.tenant_id, c.deployment_id, c.hour, {', '.join(sums)}, "
        f"jsonb_build_array({', '.join(buckets)}), false "
        "FROM rollup_cells_stage c JOIN metering_usageevent e "
        "ON e.tenant_id = c.tenant_id AND e.deployment_id = c.deployment_id "
        "AND e.time >= c.hour AND e.time < c.hour + interval '1 hour' "
        "AND date_trunc('hour', e.time AT TIME ZONE 'UTC') = c.hour AT TIME ZONE 'UTC' "
        "WHERE e.time >= %(start)s AND e.time < %(end)s "
        "GROUP BY c.tenant_id, c.deployment_id, c.hour "
        f"ON CONFLICT (tenant_id, deployment_id, hour) DO UPDATE SET {_OVERWRITE}"
    )


def _rollup_hours_postgresql(cells: set[Cell]) -> None:
    """One INSERT … SELECT over the staged cells: each cell's events, summed in the database
    with the SLO of the version in force at its hour (cells without events are left as is)."""
    if not cells:
        return
    thresholds = _slo_thresholds(cells)
    with transaction.atomic(), connection.cursor() as cursor:
        _stage(
            cursor,
            "rollup_cells_stage",
            "tenant_id bigint, deployment_id bigint, hour timestamptz, "
            "slo_ttft_ms integer, slo_tpot_ms integer",
            ["int8", "int8", "timestamptz", "int4", "int4"],
            ((t, d, h, *thresholds[(t, d, h)]) for t, d, h in cells),
        )
        cursor.execute(
            _hourly_sql(),
            {"start": min(h for _, _, h in cells), "end": max(h for _, _, h in cells) + HOUR},
        )


def _daily_sql() -> str:
    sums = ", ".join(f"sum(h.{name})" for name in SUM_FIELDS)
    # Element i of the day's histogram is the sum of the hours' element i (missing: 0).
    histogram = ", ".join(
        f"COALESCE(sum((h.latency_histogram ->> {i})::bigint), 0)"
        for i in range(len(LATENCY_BUCKETS_MS) + 1)
    )
    return (
        f"INSERT INTO metering_dailyusage (tenant_id, deployment_id, day, {_COLUMNS}) "  # noqa: S608
        f"SELECT c.tenant_id, c.deployment_id, c.day, {sums}, jsonb_build_array({histogram}), "
        "bool_and(h.is_demo) "
        "FROM rollup_days_stage c JOIN metering_hourlyusage h "
        "ON h.tenant_id = c.tenant_id AND h.deployment_id = c.deployment_id "
        "AND h.hour >= c.day::timestamp AT TIME ZONE 'UTC' "
        "AND h.hour < (c.day + 1)::timestamp AT TIME ZONE 'UTC' "
        "GROUP BY c.tenant_id, c.deployment_id, c.day "
        f"ON CONFLICT (tenant_id, deployment_id, day) DO UPDATE SET {_OVERWRITE}"
    )


def _rollup_days_postgresql(day_cells: set[tuple[int, int, object]]) -> None:
    """Daily rows = the sum of their hourly rows, in one INSERT … SELECT."""
    with transaction.atomic(), connection.cursor() as cursor:
        _stage(
            cursor,
            "rollup_days_stage",
            "tenant_id bigint, deployment_id bigint, day date",
            ["int8", "int8", "date"],
            day_cells,
        )
        cursor.execute(_daily_sql())


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
    pools_in_service_store()
    if not RollupPending.objects.exists():
        fold_mark_store()
    return len(cells)


def fold_mark_store() -> None:
    """Record that the fold completed with nothing pending, now (data_until)."""
    FoldMark.objects.bulk_create(
        [FoldMark(pk=1, completed_at=clock.now())],
        update_conflicts=True,
        unique_fields=["id"],
        update_fields=["completed_at"],
    )
