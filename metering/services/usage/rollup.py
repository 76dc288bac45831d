"""The fold (architecture.md "The pipeline"): metering's stage. Accepted usage events are
added to the hourly rollups of their hours, once each: the fold claims them from its work
queue (FoldPending) and adds their sums in the same transaction, so a run killed midway
leaves the queue as it was. It never recomputes an hour from the raw events it can see,
which may be archived or may never have been loaded (the demo loads rollups), except for
hours queued for a refold (a new SLO over hours already folded), which are only ever queued
for months whose raw events are complete. Days are the sums of their hours: the fold adds
the same sums to them, a refold sums its days again from their hours. Every changed
(tenant, pool, hour) is appended to metering's change log in the same transaction. The
same events are added to their 5-minute buckets (requests, compliant, errors: the SLO burn
rate's data, kpis.md 3c), kept FIVE_MINUTE_DAYS. What a fold adds to an hour from the
published cut's on (portal.pipeline.cut_read) is also kept as a delta (RollupDelta) until
the cut passes it, so a read of the hour holding the window's `to` answers as of the cut.

Each step is one SQL statement on both databases (the sums never leave the database: on
SQLite, the embedded default, a batch of 20,000 events holds the write lock 0.6 s, not the
2.9 s summing in Python took); the few spellings that differ are chosen in one place
(`dialect`). Tests hold the rollups equal to a direct aggregation of the raw events.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from django.db import connection, transaction
from django.db.models import Q
from django.db.models.functions import TruncHour

from metering.domain.usage.compliance import LATENCY_FREE_TIERS, PRIORITY, tier_thresholds
from metering.domain.usage.rollup import (
    HISTOGRAM_SIZE,
    LATENCY_BUCKETS_MS,
    PRODUCTION_FIELDS,
    SUM_FIELDS,
    TOKEN_FIELDS,
)
from metering.models import (
    Deployment,
    FiveMinuteUsage,
    FoldMark,
    FoldPending,
    HourlyUsage,
    RefoldPending,
    RollupDelta,
    UsageChange,
    UsageEvent,
)
from metering.selectors.factory import DeploymentVersions
from metering.services.factory import pools_in_service_store
from metering.services.usage.dialect import (
    array_sql,
    dialect,
    five_minute_sql,
    hour_sql,
    instant_read,
    rows_stage,
    stored_value,
    temp_stage,
)
from portal import clock
from portal.periods import hour_floor
from portal.pipeline import cut_read, log_append, log_prune

# tenant_id, deployment_id, hour: every project's rows of it (a tenant's projects share a
# cell: the change log, days and refolds name cells, the rows are per project)
Cell = tuple[int, int, datetime]

# Every column of a rollup row besides its key.
ROLLUP_COLUMNS = [*SUM_FIELDS, "latency_histogram", "is_demo"]

HOUR = timedelta(hours=1)

# 5-minute buckets are kept this long: the longest burn window (3 days) and a week to read.
FIVE_MINUTE_DAYS = 8

# Folds run one at a time on PostgreSQL: two at once would add to the same rows in two
# transactions (safe) but refolds must not overlap an add, and overlapping cells deadlock.
ROLLUP_LOCK = 0x526F6C6C  # pg_advisory_xact_lock key, "Roll"


def usage_fold(*, batch: int = 20_000) -> int:
    """The fold: hours queued for a refold folded again, then every accepted event not yet
    folded added to its hour, `batch` events a transaction; the changed hours appended to
    metering's change log. Returns the events folded."""
    refold_apply()
    folded = 0
    while claimed := _add(batch):
        folded += claimed
    if folded:
        pools_in_service_store()
    FiveMinuteUsage.objects.filter(bucket__lt=_five_minute_horizon()).delete()
    fold_mark_store()
    log_prune(UsageChange, log="metering.usage")
    _deltas_prune()
    return folded


def _logged(cells: set[Cell]) -> int:
    """Append the changed cells to metering's change log (in the transaction that changed
    them); the id of the last entry appended (what tags this fold's deltas)."""
    _changes_append(cells)
    return UsageChange.objects.order_by("-id").values_list("id", flat=True).first() or 0


def _deltas_since() -> datetime:
    """The first hour whose changes are kept as deltas: the published cut's (a read's `to`
    is never before it); before the rate first ran, the hour before now's."""
    cut = cut_read()
    return hour_floor(cut.until) if cut else hour_floor(clock.now()) - HOUR


def _deltas_prune() -> None:
    """Drop the deltas no read subtracts any more: those the cut has passed, or of hours
    before its own."""
    cut = cut_read()
    if cut is None:
        RollupDelta.objects.filter(hour__lt=_deltas_since()).delete()
        return
    passed = Q(change__lte=cut.position) | Q(hour__lt=hour_floor(cut.until))
    RollupDelta.objects.filter(passed).delete()


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


def _five_minute_horizon() -> datetime:
    return hour_floor(clock.now()) - timedelta(days=FIVE_MINUTE_DAYS)


# --- adding accepted events ---


def _add(batch: int) -> int:
    """Claim the oldest queued runs, up to `batch` events, into a temporary table, sum them
    per hour into another (`fold_sums`), then add those to their hours in one INSERT … ON
    CONFLICT DO UPDATE that adds, and to their days in another, and keep the sums of the
    hours from the cut's on as deltas, in one transaction; the batch that empties the queue
    stores the fold mark in the same transaction (otherwise data_until would read the
    previous, older mark until the run's end). Returns the events folded."""
    with transaction.atomic(), connection.cursor() as cursor:
        _lock()
        _slo_stage(cursor)
        claimed = _claim(cursor, batch)
        if not claimed:
            return 0
        _sums_stage(cursor)
        cursor.execute(_add_sql())
        cells = {(t, d, instant_read(h)) for t, d, h in cursor.fetchall()}
        cursor.execute(_daily_add_sql())
        change = _logged(cells)
        cursor.execute(_delta_sql(), [change, stored_value(_deltas_since())])
        cursor.execute(_five_minute_add_sql(), [stored_value(_five_minute_horizon())])
        if not FoldPending.objects.exists():
            fold_mark_store()
    return claimed


# The queue's runs, oldest first, up to `batch` events (at least one run), by the events
# queued before each; no more than `batch` runs are read (each holds one event or more).
_RUNS_UP_TO = (
    "SELECT first_id FROM (SELECT first_id, sum(events) OVER (ORDER BY first_id) - events "
    "AS before FROM (SELECT first_id, events FROM metering_foldpending ORDER BY first_id "
    "LIMIT %(batch)s) oldest) runs WHERE before < %(batch)s"
)
_CLAIMED_COLUMNS = "first_id, last_id, time_min, time_max"


def _claim(cursor, batch: int) -> int:
    """Move the oldest runs of the fold's queue, up to `batch` events, into `fold_claimed`;
    the number of events."""
    if connection.vendor == "postgresql":
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS fold_claimed (first_id bigint, last_id bigint, "
            "time_min timestamptz, time_max timestamptz) ON COMMIT DELETE ROWS; "
            "DELETE FROM fold_claimed"
        )
        cursor.execute(
            "WITH claimed AS (DELETE FROM metering_foldpending WHERE first_id IN ("  # noqa: S608
            f"SELECT first_id FROM metering_foldpending WHERE first_id IN ({_RUNS_UP_TO}) "
            f"FOR UPDATE SKIP LOCKED) RETURNING {_CLAIMED_COLUMNS}, events), "
            f"staged AS (INSERT INTO fold_claimed SELECT {_CLAIMED_COLUMNS} FROM claimed) "
            "SELECT coalesce(sum(events), 0) FROM claimed",
            {"batch": batch},
        )
        claimed = cursor.fetchone()[0]
        if claimed:
            cursor.execute("ANALYZE fold_claimed")
        return claimed
    # SQLite: the transaction holds the database's write lock from its start (IMMEDIATE,
    # portal.settings), so no other fold can claim the same events.
    cursor.execute(
        "CREATE TEMP TABLE IF NOT EXISTS fold_claimed (first_id integer PRIMARY KEY, "
        "last_id integer, time_min text, time_max text, events integer)"
    )
    cursor.execute("DELETE FROM fold_claimed")
    cursor.execute(
        f"INSERT INTO fold_claimed SELECT {_CLAIMED_COLUMNS}, events "  # noqa: S608
        f"FROM metering_foldpending WHERE first_id IN ({_RUNS_UP_TO})",
        {"batch": batch},
    )
    cursor.execute(
        "DELETE FROM metering_foldpending WHERE first_id IN (SELECT first_id FROM fold_claimed)"
    )
    cursor.execute("SELECT coalesce(sum(events), 0) FROM fold_claimed")
    return cursor.fetchone()[0]


def _slo_stage(cursor) -> None:
    """Each deployment version's span and SLO thresholds (the priority tier's beside the
    standard ones), in a temporary table (`fold_slo`)."""
    versions = DeploymentVersions()
    rows_stage(
        cursor,
        "fold_slo",
        "deployment_id bigint, start timestamptz, finish timestamptz, slo_ttft_ms integer, "
        "slo_tpot_ms integer, priority_ttft_ms integer, priority_tpot_ms integer",
        ["int8", "timestamptz", "timestamptz", "int4", "int4", "int4", "int4"],
        [
            (
                deployment_id,
                start,
                end,
                *tier_thresholds(version, "standard"),
                *tier_thresholds(version, PRIORITY),
            )
            for deployment_id in Deployment.objects.values_list("pk", flat=True)
            for start, end, version in versions.series(deployment_id).spans()
        ],
    )


def _within(figure: str, threshold: str) -> str:
    return f"({threshold} IS NULL OR e.{figure} IS NULL OR e.{figure} <= {threshold})"


# A request is compliant when it did not fail and meets each threshold its version `v` sets
# for its tier: a priority request the priority ones, flex and batch none
# (metering.domain.usage.compliance).
_LATENCY_FREE = ", ".join(f"'{tier}'" for tier in LATENCY_FREE_TIERS)
_COMPLIANT = (
    f"NOT e.is_error AND (e.service_tier IN ({_LATENCY_FREE}) OR "
    f"(e.service_tier = '{PRIORITY}' AND {_within('ttft_ms', 'v.priority_ttft_ms')} "
    f"AND {_within('tpot_ms', 'v.priority_tpot_ms')}) OR "
    f"(e.service_tier <> '{PRIORITY}' AND {_within('ttft_ms', 'v.slo_ttft_ms')} "
    f"AND {_within('tpot_ms', 'v.slo_tpot_ms')}))"
)


def _sums_sql() -> list[str]:
    """What a rollup row holds (metering.domain.usage.rollup) of events `e` under their
    version's thresholds `v`: the SUM_FIELDS, then the latency histogram. An event stands
    for `requests` requests: its tokens are their totals, its latencies their means, so the
    counts and latency sums weigh it `requests` times; a request is compliant when it did
    not fail and meets each threshold set (metering.domain.usage.compliance)."""
    ok = "NOT e.is_error"
    compliant = _COMPLIANT
    n = "COALESCE(sum(e.requests){}, 0)"
    sums = {
        "requests": n.format(""),
        "errors": n.format(" FILTER (WHERE e.is_error)"),
        "compliant_requests": n.format(f" FILTER (WHERE {compliant})"),
    }
    for name in TOKEN_FIELDS:
        sums[name] = f"COALESCE(sum(e.{name}), 0)"
        sums[f"ok_{name}"] = f"COALESCE(sum(e.{name}) FILTER (WHERE {ok}), 0)"
    for name in PRODUCTION_FIELDS:
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
    return [sums[name] for name in SUM_FIELDS] + [array_sql(buckets)]


_COLUMNS = ", ".join(ROLLUP_COLUMNS)
# The claimed runs `p` and their events `e`: a CROSS JOIN, so SQLite reads the runs first
# and each run's events by their ids (with an inner join it chose to scan every event);
# PostgreSQL plans it as any join. The condition, in the WHERE clause:
_CLAIMED_EVENTS = "FROM fold_claimed p CROSS JOIN metering_usageevent e "
# an event `e` of the claimed run `p` (its times bound the partitions read).
_IN_RUN = (
    "e.id >= p.first_id AND e.id <= p.last_id AND e.time >= p.time_min AND e.time <= p.time_max"
)
# An event `e` still in the fold's queue: in the run that starts last at or before its id
# (runs never overlap).
_QUEUED = (
    "EXISTS (SELECT 1 FROM (SELECT last_id FROM metering_foldpending p WHERE p.first_id <= e.id "
    "ORDER BY p.first_id DESC LIMIT 1) run WHERE run.last_id >= e.id)"
)
_SLO_JOIN = (
    "LEFT JOIN fold_slo v ON v.deployment_id = e.deployment_id AND e.time >= v.start "
    "AND (v.finish IS NULL OR e.time < v.finish) "
)


def _bucket(table: str, index: int) -> str:
    return f"CAST({table}.latency_histogram ->> {index} AS bigint)"


def _sums_stage(cursor) -> None:
    """The claimed events summed per tenant, deployment, tier, hour and project into
    `fold_sums` (summed once: the hours and the deltas both take them from there)."""
    columns = ", ".join(
        f"{name} {'double precision' if name.endswith('_sum') else 'bigint'}" for name in SUM_FIELDS
    )
    temp_stage(
        cursor,
        "fold_sums",
        "tenant_id bigint, deployment_id bigint, service_tier varchar(8), hour timestamptz, "
        "project_id bigint, "
        f"{columns}, latency_histogram {dialect('jsonb', 'text')}, is_demo boolean",
    )
    cursor.execute(_sums_sql_insert())


def _sums_sql_insert() -> str:
    """The claimed runs' events, read by id range, summed into `fold_sums`."""
    return (
        "INSERT INTO fold_sums "
        f"SELECT e.tenant_id, e.deployment_id, e.service_tier, {hour_sql('e.time')}, "
        "e.project_id, "
        f"{', '.join(_sums_sql())}, false "
        f"{_CLAIMED_EVENTS}{_SLO_JOIN}"
        f"WHERE {_IN_RUN} "
        "GROUP BY 1, 2, 3, 4, 5"
    )


def _adds(table: str) -> str:
    """ON CONFLICT DO UPDATE of a rollup row of `table` that adds the new sums to it (the
    histogram element by element)."""
    adds = [f"{name} = {table}.{name} + EXCLUDED.{name}" for name in SUM_FIELDS]
    histogram = (
        f"COALESCE({_bucket(table, i)}, 0) + COALESCE({_bucket('EXCLUDED', i)}, 0)"
        for i in range(HISTOGRAM_SIZE)
    )
    adds.append(f"latency_histogram = {array_sql(histogram)}")
    return ", ".join(adds)


def _add_sql() -> str:
    table = "metering_hourlyusage"
    return (
        f"INSERT INTO {table} (tenant_id, deployment_id, service_tier, hour, project_id, "  # noqa: S608
        f"{_COLUMNS}) SELECT tenant_id, deployment_id, service_tier, hour, project_id, "
        f"{_COLUMNS} FROM fold_sums WHERE true "
        "ON CONFLICT (tenant_id, deployment_id, service_tier, hour, project_id) "
        f"DO UPDATE SET {_adds(table)} "
        "RETURNING tenant_id, deployment_id, hour"
    )


def _daily_add_sql() -> str:
    """The staged sums added to their days (after `_add_sql`: a day is the sum of its hours
    before and after). A day is the demo's while every hour of it is: its hours just added
    to say whether those are."""
    table = "metering_dailyusage"
    sums = ", ".join(f"sum(s.{name})" for name in SUM_FIELDS)
    histogram = (f"COALESCE(sum({_bucket('s', i)}), 0)" for i in range(HISTOGRAM_SIZE))
    day = dialect("(s.hour AT TIME ZONE 'UTC')::date", "date(s.hour)")
    return (
        f"INSERT INTO {table} (tenant_id, deployment_id, service_tier, day, project_id, "  # noqa: S608
        f"{_COLUMNS}) SELECT s.tenant_id, s.deployment_id, s.service_tier, "
        f"{day}, s.project_id, "
        f"{sums}, {array_sql(histogram)}, {_all_demo('h.is_demo')} "
        "FROM fold_sums s JOIN metering_hourlyusage h ON h.tenant_id = s.tenant_id "
        "AND h.deployment_id = s.deployment_id AND h.service_tier = s.service_tier "
        "AND h.hour = s.hour AND h.project_id = s.project_id "
        "WHERE true GROUP BY 1, 2, 3, 4, 5 "
        "ON CONFLICT (tenant_id, deployment_id, service_tier, day, project_id) "
        f"DO UPDATE SET {_adds(table)}, is_demo = {table}.is_demo AND EXCLUDED.is_demo"
    )


def _all_demo(column: str) -> str:
    return dialect(f"bool_and({column})", f"min({column})")


def _delta_sql() -> str:
    """The staged sums of the hours from the first parameter's on, kept as deltas tagged
    with the fold's last log entry (the second)."""
    return (
        "INSERT INTO metering_rollupdelta (tenant_id, deployment_id, service_tier, hour, "  # noqa: S608
        f"project_id, change, {_COLUMNS}) SELECT tenant_id, deployment_id, service_tier, "
        f"hour, project_id, %s, {_COLUMNS} FROM fold_sums WHERE hour >= %s"
    )


_FIVE_MINUTE_COLUMNS = (
    "requests", "compliant_requests", "errors", "ok_input_tokens", "ok_cached_tokens",
    "ok_output_tokens",
)  # fmt: skip
_FIVE_MINUTE_SUMS = (
    "COALESCE(sum(e.requests), 0), "
    f"COALESCE(sum(e.requests) FILTER (WHERE {_COMPLIANT}), 0), "
    "COALESCE(sum(e.requests) FILTER (WHERE e.is_error), 0), "
    + ", ".join(
        f"COALESCE(sum(e.{name}) FILTER (WHERE NOT e.is_error), 0)"
        for name in ("input_tokens", "cached_tokens", "output_tokens")
    )
)


def _five_minute_add_sql() -> str:
    """The claimed events (newer than the horizon, the parameter) added to their 5-minute
    buckets: requests, compliant requests and errors as the hourly rows count them, and
    the ok requests' tokens."""
    table = "metering_fiveminuteusage"
    adds = ", ".join(f"{name} = {table}.{name} + EXCLUDED.{name}" for name in _FIVE_MINUTE_COLUMNS)
    return (
        f"INSERT INTO {table} (tenant_id, deployment_id, bucket, "
        f"{', '.join(_FIVE_MINUTE_COLUMNS)}) "
        f"SELECT e.tenant_id, e.deployment_id, {five_minute_sql('e.time')}, {_FIVE_MINUTE_SUMS} "
        f"{_CLAIMED_EVENTS}{_SLO_JOIN}"
        f"WHERE {_IN_RUN} AND e.time >= %s "
        "GROUP BY 1, 2, 3 "
        f"ON CONFLICT (tenant_id, deployment_id, bucket) DO UPDATE SET {adds}"
    )


# --- days: the sums of their hours ---


def rollup_days(day_cells: set[tuple[int, int, object]]) -> None:
    """Daily rows = the sum of their hourly rows (tenant id, deployment id, UTC date), each
    project's, in one INSERT … SELECT."""
    if not day_cells:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        rows_stage(
            cursor,
            "rollup_days_stage",
            "tenant_id bigint, deployment_id bigint, day date",
            ["int8", "int8", "date"],
            day_cells,
        )
        cursor.execute(_daily_sql())


_OVERWRITE = ", ".join(f"{name} = EXCLUDED.{name}" for name in ROLLUP_COLUMNS)


def _daily_sql() -> str:
    sums = ", ".join(f"sum(h.{name})" for name in SUM_FIELDS)
    # Element i of the day's histogram is the sum of the hours' element i (missing: 0).
    histogram = (f"COALESCE(sum({_bucket('h', i)}), 0)" for i in range(HISTOGRAM_SIZE))
    day_end = dialect(
        "h.hour >= c.day::timestamp AT TIME ZONE 'UTC' "
        "AND h.hour < (c.day + 1)::timestamp AT TIME ZONE 'UTC' ",
        "h.hour >= c.day AND h.hour < date(c.day, '+1 day') ",  # text: naive UTC
    )
    return (
        "INSERT INTO metering_dailyusage (tenant_id, deployment_id, service_tier, day, "  # noqa: S608
        f"project_id, {_COLUMNS}) "
        f"SELECT c.tenant_id, c.deployment_id, h.service_tier, c.day, h.project_id, {sums}, "
        f"{array_sql(histogram)}, {_all_demo('h.is_demo')} "
        "FROM rollup_days_stage c JOIN metering_hourlyusage h "
        f"ON h.tenant_id = c.tenant_id AND h.deployment_id = c.deployment_id AND {day_end}"
        "WHERE true "
        "GROUP BY c.tenant_id, c.deployment_id, h.service_tier, c.day, h.project_id "
        "ON CONFLICT (tenant_id, deployment_id, service_tier, day, project_id) "
        f"DO UPDATE SET {_OVERWRITE}"
    )


# --- refolds: hours of complete months folded again from raw events ---


def refold_apply() -> int:
    """Fold again, from raw events, the hours queued for a refold (their SLO changed): each
    hour's row replaced by the sums of its events that were already folded. Events still
    waiting for the fold are left out (the fold adds them next), so nothing counts twice.
    A pool never seen before gets its `in_service_from`, as the fold gives it. Returns the
    hours folded again."""
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
        before = _rows_of(cells)
        _hourly_delete(cells)
        _refold(cells)
        rollup_days({(t, d, h.date()) for t, d, h in cells})
        _refold_deltas(before, _rows_of(cells), change=_logged(cells))
        pools_in_service_store()  # rollups rebuilt from raw events alone are a sign of life too
        return len(cells)


def _rows_of(cells: set[Cell]) -> dict[tuple, dict]:
    """The hourly rows of the cells from the deltas' first hour on, by cell, tier and project
    (a refold's before and after)."""
    since = _deltas_since()
    hours = {(t, d): [] for t, d, _ in cells}
    for t, d, hour in cells:
        if hour >= since:
            hours[(t, d)].append(hour)
    rows = {}
    for (t, d), group in hours.items():
        if not group:
            continue
        found = HourlyUsage.objects.filter(tenant_id=t, deployment_id=d, hour__in=group)
        for row in found.values("service_tier", "project_id", "hour", *SUM_FIELDS,
                                "latency_histogram"):  # fmt: skip
            hour = row["hour"].astimezone(UTC)
            rows[(t, d, row["service_tier"], hour, row["project_id"])] = row
    return rows


def _refold_deltas(before: dict[tuple, dict], after: dict[tuple, dict], *, change: int) -> None:
    """A refold replaced the rows `before` by `after` (by cell, tier and project): what that
    changed, as deltas, each tier's and project's (a read as of an earlier cut subtracts it,
    and sees the rows as they were, a read of one project that project's)."""
    deltas = []
    for key in before.keys() | after.keys():
        old, new = before.get(key, {}), after.get(key, {})
        sums = {name: new.get(name, 0) - old.get(name, 0) for name in SUM_FIELDS}
        old_h, new_h = old.get("latency_histogram") or [], new.get("latency_histogram") or []
        histogram = [
            (new_h[i] if i < len(new_h) else 0) - (old_h[i] if i < len(old_h) else 0)
            for i in range(HISTOGRAM_SIZE)
        ]
        t, d, tier, hour, project_id = key
        deltas.append(
            RollupDelta(
                tenant_id=t, deployment_id=d, service_tier=tier, hour=hour,
                project_id=project_id, change=change,
                **sums, latency_histogram=histogram,
            )
        )  # fmt: skip
    RollupDelta.objects.bulk_create(deltas)


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


def _refold(cells: set[Cell]) -> None:
    """The cells' rows from their already folded events, in one INSERT … SELECT (one
    statement: the events it sees and the queue it excludes are of one snapshot)."""
    hour_end = dialect("c.hour + interval '1 hour'", "datetime(c.hour, '+1 hour')")
    # A cell's events: on PostgreSQL by their hour, an equality it can hash (the events carry
    # no B-tree index there: one pass over the cells' time span); SQLite seeks each cell's
    # hour in usage_cell_idx.
    in_cell = dialect(
        f"{hour_sql('e.time')} = c.hour ", f"e.time >= c.hour AND e.time < {hour_end} "
    )
    with connection.cursor() as cursor:
        _slo_stage(cursor)
        rows_stage(
            cursor,
            "refold_cells",
            "tenant_id bigint, deployment_id bigint, hour timestamptz",
            ["int8", "int8", "timestamptz"],
            cells,
        )
        cursor.execute(
            "INSERT INTO metering_hourlyusage (tenant_id, deployment_id, service_tier, hour, "  # noqa: S608
            f"project_id, {_COLUMNS}) "
            "SELECT c.tenant_id, c.deployment_id, e.service_tier, c.hour, e.project_id, "
            f"{', '.join(_sums_sql())}, false "
            "FROM refold_cells c JOIN metering_usageevent e "
            f"ON e.tenant_id = c.tenant_id AND e.deployment_id = c.deployment_id AND {in_cell}"
            f"{_SLO_JOIN}"
            f"WHERE e.time >= %s AND e.time < %s AND NOT {_QUEUED} "
            "GROUP BY c.tenant_id, c.deployment_id, e.service_tier, c.hour, e.project_id",
            [
                stored_value(min(h for *_, h in cells)),
                stored_value(max(h for *_, h in cells) + HOUR),
            ],
        )
        if max(hour for *_, hour in cells) + HOUR > _five_minute_horizon():
            _five_minute_refold(cursor, hour_end, in_cell)


def _five_minute_refold(cursor, hour_end: str, in_cell: str) -> None:
    """The 5-minute buckets of the refold's cells (within the horizon) counted again from
    the same events as their hours."""
    horizon = stored_value(_five_minute_horizon())
    cursor.execute(
        "DELETE FROM metering_fiveminuteusage WHERE bucket >= %s AND EXISTS (SELECT 1 FROM "  # noqa: S608
        "refold_cells c WHERE c.tenant_id = metering_fiveminuteusage.tenant_id "
        "AND c.deployment_id = metering_fiveminuteusage.deployment_id "
        "AND metering_fiveminuteusage.bucket >= c.hour "
        f"AND metering_fiveminuteusage.bucket < {hour_end})",
        [horizon],
    )
    cursor.execute(
        "INSERT INTO metering_fiveminuteusage (tenant_id, deployment_id, bucket, "  # noqa: S608
        f"{', '.join(_FIVE_MINUTE_COLUMNS)}) "
        f"SELECT e.tenant_id, e.deployment_id, {five_minute_sql('e.time')}, {_FIVE_MINUTE_SUMS} "
        "FROM refold_cells c JOIN metering_usageevent e "
        f"ON e.tenant_id = c.tenant_id AND e.deployment_id = c.deployment_id AND {in_cell}"
        f"{_SLO_JOIN}"
        f"WHERE e.time >= %s AND NOT {_QUEUED} "
        "GROUP BY 1, 2, 3",
        [horizon],
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
