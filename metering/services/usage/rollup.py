"""The fold (architecture.md "The pipeline"): metering's stage. Accepted usage events are
added to the hourly rollups of their hours, once each: the fold claims them from its work
queue (FoldPending) and adds their sums in the same transaction, so a run killed midway
leaves the queue as it was. It never recomputes an hour from the raw events it can see,
which may be archived or may never have been loaded (the demo loads rollups), except for
hours queued for a refold (a new SLO over hours already folded), which are only ever queued
for months whose raw events are complete. Days are the sums of their hours. Every changed
(tenant, pool, hour) is appended to metering's change log in the same transaction.

On PostgreSQL each step is one statement (the sums never leave the database); other
databases fold through the ORM with the domain rule (metering.domain.usage.rollup). Tests
hold both equal.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from django.db import connection, transaction
from django.db.models.functions import TruncHour

from metering.domain.usage.rollup import (
    HISTOGRAM_SIZE,
    LATENCY_BUCKETS_MS,
    SUM_FIELDS,
    TOKEN_FIELDS,
    Slo,
    empty_sums,
    event_add,
    rows_sum,
)
from metering.models import (
    DailyUsage,
    Deployment,
    FoldMark,
    FoldPending,
    HourlyUsage,
    RefoldPending,
    UsageChange,
    UsageEvent,
)
from metering.selectors.factory import DeploymentVersions
from metering.services.factory import pools_in_service_store
from portal import clock
from portal.periods import hour_floor
from portal.pipeline import log_append, log_prune

Cell = tuple[int, int, datetime]  # tenant_id, deployment_id, hour

# Every column of a rollup row besides its key.
ROLLUP_COLUMNS = [*SUM_FIELDS, "latency_histogram", "is_demo"]

HOUR = timedelta(hours=1)

# Folds run one at a time on PostgreSQL: two at once would add to the same rows in two
# transactions (safe) but refolds must not overlap an add, and overlapping cells deadlock.
ROLLUP_LOCK = 0x526F6C6C  # pg_advisory_xact_lock key, "Roll"

_EVENT_FIELDS = (
    "tenant_id", "deployment_id", "time", *TOKEN_FIELDS,
    "ttft_ms", "tpot_ms", "latency_ms", "is_error", "requests",
)  # fmt: skip


def usage_fold(*, batch: int = 20_000) -> int:
    """The fold: hours queued for a refold folded again, then every accepted event not yet
    folded added to its hour, `batch` events a transaction; the changed hours appended to
    metering's change log. Returns the events folded."""
    refold_apply()
    add = _add_postgresql if connection.vendor == "postgresql" else _add_orm
    folded = 0
    while claimed := add(batch):
        folded += claimed
    if folded:
        pools_in_service_store()
    fold_mark_store()
    log_prune(UsageChange, log="metering.usage")
    return folded


def _folded(cells: set[Cell]) -> None:
    """After adding to the cells' hours, in the same transaction: their days, and the log."""
    rollup_days({(t, d, h.astimezone(UTC).date()) for t, d, h in cells})
    _changes_append(cells)


def _lock() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ROLLUP_LOCK])


def _changes_append(cells: Iterable[Cell]) -> None:
    """Append (tenant, pool, hour) of the changed cells to metering's change log."""
    pools = dict(Deployment.objects.values_list("pk", "pool_id"))
    changed = {(t, pools[d], hour_floor(h)) for t, d, h in cells}
    log_append(
        UsageChange,
        (
            UsageChange(kind=UsageChange.Kind.USAGE, tenant_id=t, pool_id=p, start=h, end=h + HOUR)
            for t, p, h in sorted(changed)
        ),
        log="metering.usage",
    )


def _slo(versions: DeploymentVersions, deployment_id: int, moment: datetime) -> Slo:
    """The SLO of the deployment version in force at an event's time."""
    version = versions.at(deployment_id, moment)
    return Slo() if version is None else Slo(version.slo_ttft_ms, version.slo_tpot_ms)


# --- adding accepted events (SQLite and others: the ORM with the domain rule) ---


def _add_orm(batch: int) -> int:
    """Up to `batch` pending events summed first (reads only), then claimed and added in
    one short transaction (on SQLite a write transaction holds ingestion back). Returns
    the events folded."""
    while True:
        pending = list(
            FoldPending.objects.order_by("event_id").values_list("event_id", flat=True)[:batch]
        )
        if not pending:
            return 0
        sums = _cell_sums(_events_of(pending))
        with transaction.atomic():
            claimed, _ = FoldPending.objects.filter(event_id__in=pending).delete()
            if claimed != len(pending):
                transaction.set_rollback(True)  # another fold took some meanwhile: again
                continue
            _hourly_add(sums)
            _folded(set(sums))
        return claimed


def _events_of(ids: list[int]) -> list[dict]:
    events = []
    for start in range(0, len(ids), 900):  # SQLite takes at most 999 parameters
        chunk = ids[start : start + 900]
        events += UsageEvent.objects.filter(id__in=chunk).values(*_EVENT_FIELDS)
    return events


def _cell_sums(events: Iterable[dict]) -> dict[Cell, dict]:
    """Events summed per (tenant, deployment, hour), each under the SLO in force at its time."""
    versions = DeploymentVersions()
    cells: dict[Cell, dict] = {}
    for event in events:
        time = event["time"].astimezone(UTC)
        key = (event["tenant_id"], event["deployment_id"], hour_floor(time))
        sums = cells.get(key)
        if sums is None:
            sums = cells[key] = empty_sums()
        event_add(sums, event, slo=_slo(versions, event["deployment_id"], time))
    return cells


def _hourly_add(cells: dict[Cell, dict]) -> None:
    """Add the sums to the cells' hourly rows (created when missing)."""
    existing = _hourly_rows(cells)
    rows = []
    for (tenant_id, deployment_id, hour), sums in cells.items():
        row = existing.get((tenant_id, deployment_id, hour))
        if row is not None:
            total = rows_sum([_row_sums(row), sums])
            is_demo = row.is_demo
        else:
            total, is_demo = sums, False
        rows.append(
            HourlyUsage(
                tenant_id=tenant_id,
                deployment_id=deployment_id,
                hour=hour,
                is_demo=is_demo,
                **total,
            )
        )
    HourlyUsage.objects.bulk_create(
        rows,
        batch_size=500,
        update_conflicts=True,
        unique_fields=["tenant", "deployment", "hour"],
        update_fields=ROLLUP_COLUMNS,
    )


def _hourly_rows(cells: Iterable[Cell]) -> dict[Cell, HourlyUsage]:
    by_deployment: dict[int, set[datetime]] = defaultdict(set)
    for _, deployment_id, hour in cells:
        by_deployment[deployment_id].add(hour)
    rows = {}
    for deployment_id, hours in by_deployment.items():
        for row in HourlyUsage.objects.filter(
            deployment_id=deployment_id, hour__gte=min(hours), hour__lte=max(hours)
        ):
            rows[(row.tenant_id, row.deployment_id, row.hour.astimezone(UTC))] = row
    return rows


def _row_sums(row) -> dict:
    return {
        **{name: getattr(row, name) for name in SUM_FIELDS},
        "latency_histogram": row.latency_histogram,
    }


# --- adding accepted events (PostgreSQL: two statements) ---


def _add_postgresql(batch: int) -> int:
    """Claim up to `batch` pending events into a transaction-local table, then add their sums
    to their hours in one INSERT … ON CONFLICT DO UPDATE that adds, in one transaction.
    Returns the events folded."""
    with transaction.atomic(), connection.cursor() as cursor:
        _lock()
        _slo_stage(cursor)
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS fold_claimed (event_id bigint, time timestamptz) "
            "ON COMMIT DELETE ROWS; "
            "DELETE FROM fold_claimed"  # left by an earlier batch of an enclosing transaction
        )
        cursor.execute(
            "WITH claimed AS (DELETE FROM metering_foldpending WHERE event_id IN ("
            "SELECT event_id FROM metering_foldpending ORDER BY event_id LIMIT %s "
            "FOR UPDATE SKIP LOCKED) RETURNING event_id, time), "
            "staged AS (INSERT INTO fold_claimed SELECT event_id, time FROM claimed RETURNING 1) "
            "SELECT count(*) FROM staged",
            [batch],
        )
        claimed = cursor.fetchone()[0]
        if not claimed:
            return 0
        cursor.execute("ANALYZE fold_claimed")
        cursor.execute(_add_sql())
        _folded({(t, d, h.astimezone(UTC)) for t, d, h in cursor.fetchall()})
    return claimed


def _slo_stage(cursor) -> None:
    """Each deployment version's span and SLO thresholds, in a transaction-local table."""
    cursor.execute(
        "CREATE TEMP TABLE IF NOT EXISTS fold_slo (deployment_id bigint, start timestamptz, "
        "finish timestamptz, slo_ttft_ms integer, slo_tpot_ms integer) ON COMMIT DELETE ROWS"
    )
    cursor.execute("DELETE FROM fold_slo")
    versions = DeploymentVersions()
    rows = [
        (deployment_id, start, end, version.slo_ttft_ms, version.slo_tpot_ms)
        for deployment_id in Deployment.objects.values_list("pk", flat=True)
        for start, end, version in versions.series(deployment_id).spans()
    ]
    if rows:
        with cursor.cursor.copy("COPY fold_slo FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "timestamptz", "timestamptz", "int4", "int4"])
            for row in rows:
                copy.write_row(row)


def _sums_sql() -> list[str]:
    """The SUM_FIELDS of events `e` under their version's thresholds `v`, in SQL: the twin of
    metering.domain.usage.rollup.event_add, then the histogram as a JSON array."""
    ok = "NOT e.is_error"
    compliant = (
        "NOT e.is_error"
        " AND (v.slo_ttft_ms IS NULL OR e.ttft_ms IS NULL OR e.ttft_ms <= v.slo_ttft_ms)"
        " AND (v.slo_tpot_ms IS NULL OR e.tpot_ms IS NULL OR e.tpot_ms <= v.slo_tpot_ms)"
    )
    n = "COALESCE(sum(e.requests){}, 0)"
    sums = {
        "requests": n.format(""),
        "errors": n.format(" FILTER (WHERE e.is_error)"),
        "compliant_requests": n.format(f" FILTER (WHERE {compliant})"),
    }
    for name in TOKEN_FIELDS:
        sums[name] = f"COALESCE(sum(e.{name}), 0)"
        sums[f"ok_{name}"] = f"COALESCE(sum(e.{name}) FILTER (WHERE {ok}), 0)"
        sums[f"compliant_{name}"] = f"COALESCE(sum(e.{name}) FILTER (WHERE {compliant}), 0)"
    for name in ("ttft_ms", "tpot_ms", "latency_ms"):
        sums[f"{name}_sum"] = f"COALESCE(sum(e.{name} * e.requests), 0)"
        sums[name.replace("_ms", "_count")] = n.format(f" FILTER (WHERE e.{name} IS NOT NULL)")
    edges = [None, *LATENCY_BUCKETS_MS, None]
    buckets = []
    for lower, upper in pairwise(edges):
        terms = [f"e.latency_ms > {lower}" if lower is not None else "e.latency_ms IS NOT NULL"]
        if upper is not None:
            terms.append(f"e.latency_ms <= {upper}")
        buckets.append(n.format(f" FILTER (WHERE {' AND '.join(terms)})"))
    return [sums[name] for name in SUM_FIELDS] + [f"jsonb_build_array({', '.join(buckets)})"]


_COLUMNS = ", ".join(ROLLUP_COLUMNS)
_SLO_JOIN = (
    "LEFT JOIN fold_slo v ON v.deployment_id = e.deployment_id AND e.time >= v.start "
    "AND (v.finish IS NULL OR e.time < v.finish) "
)


def _histogram_add(table: str) -> str:
    return "jsonb_build_array({})".format(
        ", ".join(
            f"COALESCE(({table}.latency_histogram ->> {i})::bigint, 0) "
            f"+ COALESCE((EXCLUDED.latency_histogram ->> {i})::bigint, 0)"
            for i in range(HISTOGRAM_SIZE)
        )
    )


def _add_sql() -> str:
    table = "metering_hourlyusage"
    adds = [f"{name} = {table}.{name} + EXCLUDED.{name}" for name in SUM_FIELDS]
    adds.append(f"latency_histogram = {_histogram_add(table)}")
    return (
        f"INSERT INTO {table} (tenant_id, deployment_id, hour, {_COLUMNS}) "  # noqa: S608
        f"SELECT e.tenant_id, e.deployment_id, date_trunc('hour', e.time, 'UTC'), "
        f"{', '.join(_sums_sql())}, false "
        "FROM fold_claimed p JOIN metering_usageevent e ON e.id = p.event_id AND e.time = p.time "
        f"{_SLO_JOIN}"
        "GROUP BY 1, 2, 3 "
        f"ON CONFLICT (tenant_id, deployment_id, hour) DO UPDATE SET {', '.join(adds)} "
        "RETURNING tenant_id, deployment_id, hour"
    )


# --- days: the sums of their hours ---


def rollup_days(day_cells: set[tuple[int, int, object]]) -> None:
    """Daily rows = the sum of their hourly rows (tenant id, deployment id, UTC date)."""
    if not day_cells:
        return
    if connection.vendor == "postgresql":
        _rollup_days_postgresql(day_cells)
        return
    by_day: dict[tuple[int, int, object], list] = defaultdict(list)
    days = {day for _, _, day in day_cells}
    hours = HourlyUsage.objects.filter(
        tenant_id__in={t for t, _, _ in day_cells},
        deployment_id__in={d for _, d, _ in day_cells},
        hour__gte=datetime.combine(min(days), datetime.min.time(), tzinfo=UTC),
        hour__lt=datetime.combine(max(days), datetime.min.time(), tzinfo=UTC) + timedelta(days=1),
    )
    for h in hours.iterator(chunk_size=2000):
        key = (h.tenant_id, h.deployment_id, h.hour.astimezone(UTC).date())
        if key in day_cells:
            by_day[key].append(h)
    DailyUsage.objects.bulk_create(
        [
            DailyUsage(
                tenant_id=t,
                deployment_id=d,
                day=day,
                is_demo=all(h.is_demo for h in rows),
                **rows_sum(_row_sums(h) for h in rows),
            )
            for (t, d, day), rows in by_day.items()
        ],
        batch_size=500,
        update_conflicts=True,
        unique_fields=["tenant", "deployment", "day"],
        update_fields=ROLLUP_COLUMNS,
    )


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


_OVERWRITE = ", ".join(f"{name} = EXCLUDED.{name}" for name in ROLLUP_COLUMNS)


def _daily_sql() -> str:
    sums = ", ".join(f"sum(h.{name})" for name in SUM_FIELDS)
    # Element i of the day's histogram is the sum of the hours' element i (missing: 0).
    histogram = ", ".join(
        f"COALESCE(sum((h.latency_histogram ->> {i})::bigint), 0)" for i in range(HISTOGRAM_SIZE)
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


# --- refolds: hours of complete months folded again from raw events ---


def refold_apply() -> int:
    """Fold again, from raw events, the hours queued for a refold (their SLO changed): each
    hour's row replaced by the sums of its events that were already folded. Events still
    waiting for the fold are left out (the fold adds them next), so nothing counts twice.
    Returns the hours folded again."""
    with transaction.atomic():
        _lock()
        queued = list(RefoldPending.objects.order_by("pk"))
        if not queued:
            return 0
        RefoldPending.objects.filter(pk__in=[q.pk for q in queued]).delete()
        cells: set[Cell] = set()
        for refold in queued:
            cells |= _refold_cells(refold)
        if not cells:
            return 0
        _hourly_delete(cells)
        if connection.vendor == "postgresql":
            _refold_postgresql(cells)
        else:
            _hourly_add(_cell_sums(_folded_events(cells)))
        _folded(cells)
        return len(cells)


def _refold_cells(refold: RefoldPending) -> set[Cell]:
    """The (tenant, hour) cells of a refold's deployment and span: every hour with a rollup
    row or with raw events (complete months only are ever queued: both agree there)."""
    rows = HourlyUsage.objects.filter(deployment_id=refold.deployment_id, hour__gte=refold.start)
    events = UsageEvent.objects.filter(deployment_id=refold.deployment_id, time__gte=refold.start)
    if refold.end is not None:
        rows = rows.filter(hour__lt=refold.end)
        events = events.filter(time__lt=refold.end)
    hours = events.annotate(cell_hour=TruncHour("time", tzinfo=UTC)).values_list(
        "tenant_id", "cell_hour"
    )
    return {
        (t, refold.deployment_id, h.astimezone(UTC))
        for t, h in {*rows.values_list("tenant_id", "hour"), *hours.distinct()}
    }


def _hourly_delete(cells: set[Cell]) -> None:
    hours: dict[tuple[int, int], list[datetime]] = defaultdict(list)
    for tenant_id, deployment_id, hour in cells:
        hours[(tenant_id, deployment_id)].append(hour)
    for (tenant_id, deployment_id), group in hours.items():
        for start in range(0, len(group), 500):
            HourlyUsage.objects.filter(
                tenant_id=tenant_id,
                deployment_id=deployment_id,
                hour__in=group[start : start + 500],
            ).delete()


def _folded_events(cells: set[Cell]) -> list[dict]:
    """The events of the cells that are not waiting for the fold."""
    events = []
    for tenant_id, deployment_id, hour in sorted(cells):
        events += UsageEvent.objects.filter(
            tenant_id=tenant_id, deployment_id=deployment_id, time__gte=hour, time__lt=hour + HOUR
        ).values(*_EVENT_FIELDS, "id")
    pending = set(
        FoldPending.objects.filter(event_id__in=[e["id"] for e in events]).values_list(
            "event_id", flat=True
        )
    )
    return [e for e in events if e["id"] not in pending]


def _refold_postgresql(cells: set[Cell]) -> None:
    """The cells' rows from their already folded events, in one INSERT … SELECT (one
    statement: the events it sees and the queue it excludes are of one snapshot)."""
    with connection.cursor() as cursor:
        _slo_stage(cursor)
        _stage(
            cursor,
            "refold_cells",
            "tenant_id bigint, deployment_id bigint, hour timestamptz",
            ["int8", "int8", "timestamptz"],
            cells,
        )
        cursor.execute(
            f"INSERT INTO metering_hourlyusage (tenant_id, deployment_id, hour, {_COLUMNS}) "  # noqa: S608
            f"SELECT c.tenant_id, c.deployment_id, c.hour, {', '.join(_sums_sql())}, false "
            "FROM refold_cells c JOIN metering_usageevent e "
            "ON e.tenant_id = c.tenant_id AND e.deployment_id = c.deployment_id "
            "AND e.time >= c.hour AND e.time < c.hour + interval '1 hour' "
            f"{_SLO_JOIN}"
            "WHERE e.time >= %(start)s AND e.time < %(end)s AND NOT EXISTS "
            "(SELECT 1 FROM metering_foldpending p WHERE p.event_id = e.id) "
            "GROUP BY c.tenant_id, c.deployment_id, c.hour",
            {"start": min(h for *_, h in cells), "end": max(h for *_, h in cells) + HOUR},
        )


def fold_mark_store() -> None:
    """Record that the fold completed, now: with nothing waiting for it, usage is metered
    until then (kpis.md section 0, data_until)."""
    FoldMark.objects.bulk_create(
        [FoldMark(pk=1, completed_at=clock.now())],
        update_conflicts=True,
        unique_fields=["id"],
        update_fields=["completed_at"],
    )
