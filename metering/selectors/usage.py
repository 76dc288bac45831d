"""Reads of metering data. Tenant scoping goes through portal.access.tenant_scoped only.

Every read of a window `[start, to)` answers as of the published cut (portal.pipeline): `to`
is the cut's time (`window_resolve`), and when it falls inside an hour, the rollup of that
hour holds what the fold added since the cut too (events of a later minute, which billing has
not rated yet). Reads of that hour subtract the fold's deltas past the cut
(`rollups_after_cut`): the rollups as they stood at the cut. Whole hours are read as stored.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import reduce
from operator import or_

from django.core.exceptions import EmptyResultSet
from django.db.models import (
    BigIntegerField,
    Count,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, TruncDate, TruncDay, TruncMonth

from metering.domain.usage.production import production_tokens
from metering.domain.usage.rollup import LATENCY_BUCKETS_MS, TOKEN_FIELDS
from metering.filters import UsageFilterSet
from metering.models import (
    CapacitySample,
    DailyUsage,
    Deployment,
    EventKey,
    FiveMinuteUsage,
    FoldMark,
    FoldPending,
    HourlyUsage,
    IncompleteRawMonth,
    Pool,
    RollupDelta,
    UsageChange,
    UsageEvent,
)
from metering.selectors.factory import DeploymentVersions, factory_in_service_from
from portal import clock
from portal.access import tenant_scoped
from portal.kept import kept
from portal.models import Project
from portal.periods import (
    Period,
    Window,
    day_ceil,
    day_floor,
    filter_within,
    hour_ceil,
    hour_floor,
    period_resolve,
)
from portal.pipeline import Cut, columns_read, cut_columns, cut_of, cut_read, log_read_by_all
from portal.projects import NONE
from portal.snapshot import snapshot_read

# What usage reads show per row: requests, failures and the token counts (their classes too).
USAGE_SUMS = ["requests", "errors", *TOKEN_FIELDS]


def _is_midnight(moment) -> bool:
    return (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0)


class _UsageRows(QuerySet):
    """Rollup rows that are each their own group (see usage_list): `count()` counts the rows
    that pass the filters, without the joins that only fetch slugs to show (PostgreSQL would
    join every row of the period just to count it)."""

    _count_source: QuerySet | None = None

    def _clone(self):
        clone = super()._clone()
        clone._count_source = self._count_source
        return clone

    def count(self) -> int:
        if self._count_source is None or self._result_cache is not None:
            return super().count()
        return self._count_source.count()


class _Rows:
    """Rows a paginator reads: a QuerySet's, then a list's (the end of a window inside an
    hour, as of the cut); `count()` and slices without reading the QuerySet whole."""

    def __init__(self, head: QuerySet | None, tail: list[dict]) -> None:
        self.head, self.tail = head, tail

    def _head_count(self) -> int:
        return 0 if self.head is None else self.head.count()

    def count(self) -> int:
        return self._head_count() + len(self.tail)

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index):
        if not isinstance(index, slice):
            return self[index : index + 1][0]
        start, stop = index.start or 0, index.stop
        count = self._head_count()
        if stop is None:
            stop = count + len(self.tail)
        rows = list(self.head[start : min(stop, count)]) if start < count else []
        return rows + self.tail[max(start - count, 0) : max(stop - count, 0)]


def usage_list(
    *,
    user,
    period: Period,
    granularity: str = "day",
    filters=None,
):
    """Usage per period (hour or day), tenant, project (its id, 0 for the (none)), model,
    pool and service tier, from the rollups only; `filters`: UsageFilterSet's query (tenant,
    model, pool, project), 404 for another tenant. A period that ends inside an hour (a
    window's `to`) ends with the rows of that hour (of its day, by day) as of the cut, after
    the others (each project's row less that project's deltas). Their count and each slice
    read are kept in the shared cache (_KeptRows) under usage_stamp and the SQL of the
    period's rows and of the deltas (which name the hours, the cut, the user's scope and the
    filters)."""
    deltas = rollups_after_cut(end=period.end)
    whole = _usage_rows(user=user, period=period, granularity=granularity, filters=filters)
    try:
        key = (
            "metering.usage_list", usage_stamp(), whole.query.sql_with_params(),
            None if deltas is None else deltas.query.sql_with_params(),
        )  # fmt: skip
    except EmptyResultSet:  # a scope or filter that matches nothing: nothing to keep
        return whole
    return _KeptRows(
        key,
        lambda: _usage_list(
            whole, user=user, period=period, granularity=granularity, filters=filters,
            deltas=deltas,
        ),
    )  # fmt: skip


class _KeptRows:
    """usage_list's rows as a paginator reads them (`count()` and slices), each kept
    (portal.kept) under `key`, which names the rows exactly; `build` makes the rows on a
    miss, once a request."""

    def __init__(self, key: tuple, build) -> None:
        self.key, self._build, self._rows = key, build, None

    def _made(self):
        if self._rows is None:
            self._rows = self._build()
        return self._rows

    def count(self) -> int:
        return kept((*self.key, "count"), lambda: self._made().count())

    def __len__(self) -> int:
        return self.count()

    def __iter__(self):
        return iter(self[:])

    def __getitem__(self, index):
        if not isinstance(index, slice):
            return self[index : index + 1][0]
        return kept((*self.key, index.start, index.stop), lambda: list(self._made()[index]))


def _usage_list(whole: QuerySet, *, user, period: Period, granularity: str, filters, deltas):
    """usage_list's rows as read from the database: `whole` (the period's rows as stored)
    when `deltas` (rollups_after_cut's) is None."""
    if deltas is None:
        return whole
    split = hour_floor(period.end) if granularity == "hour" else day_floor(period.end)
    split = max(split, period.start)
    head = (
        _usage_rows(
            user=user, period=Period(period.start, split), granularity=granularity,
            filters=filters,
        )
        if split > period.start
        else None
    )  # fmt: skip
    tail = _usage_rows(
        user=user, period=Period(split, period.end), granularity=granularity, filters=filters
    )
    rows = {_row_key(row): dict(row) for row in tail}
    after = _usage_filtered(deltas, user=user, filters=filters)
    for row in _grouped(after, granularity=granularity):
        kept_row = rows.get(_row_key(row))
        if kept_row is not None:
            for name in USAGE_SUMS:
                kept_row[name] -= row[name]
    return _Rows(head, [row for _, row in sorted(rows.items()) if row["requests"]])


_ROW_KEYS = (
    "period_start", "tenant__slug", "project_id", "deployment__model__slug",
    "deployment__pool__slug", "service_tier",
)  # fmt: skip


def _row_key(row: dict) -> tuple:
    return tuple(row[key] for key in _ROW_KEYS)


def _grouped(rows: QuerySet, *, granularity: str) -> QuerySet:
    """Rollup (or delta) rows of hours summed per period (hour or day) and the row keys."""
    period_start = TruncDay("hour") if granularity == "day" else F("hour")
    shown = rows.annotate(period_start=period_start)
    sums = {name: Sum(name) for name in USAGE_SUMS}
    return shown.values(*_ROW_KEYS).annotate(**sums).order_by(*_ROW_KEYS)


def _usage_rows(*, user, period: Period, granularity: str, filters) -> QuerySet:
    """usage_list's rows as stored."""
    # A rollup row is unique per (tenant, deployment, tier, period, project) and a deployment
    # is one (model, pool): when the rows are already of the asked granularity, each group is
    # one row and the rows are read as they are (no GROUP BY, and the page count is a plain
    # COUNT).
    if granularity == "day" and _is_midnight(period.start) and _is_midnight(period.end):
        rows = _UsageRows(model=DailyUsage).filter(
            day__gte=period.start.date(), day__lt=period.end.date()
        )
        period_start = F("day")  # a date; callers present it as midnight UTC
        is_one_row_per_group = True
    else:
        rows = _UsageRows(model=HourlyUsage).filter(hour__gte=period.start, hour__lt=period.end)
        period_start = TruncDay("hour") if granularity == "day" else F("hour")
        is_one_row_per_group = granularity != "day"
    rows = _usage_filtered(rows, user=user, filters=filters)
    if not is_one_row_per_group:
        return _grouped(rows, granularity=granularity)
    result = rows.annotate(period_start=period_start).values(*_ROW_KEYS, *USAGE_SUMS)
    result = result.order_by(*_ROW_KEYS)
    result._count_source = rows
    return result


def _quantile(histogram: list[int], q: float) -> float | None:
    """Latency at quantile q from bucket counts, interpolating inside the bucket (ms, to
    0.1 ms: an estimate from buckets has no finer digits)."""
    total = sum(histogram)
    if not total:
        return None
    rank, seen, lower = q * total, 0, 0.0
    for count, upper in zip(histogram, [*LATENCY_BUCKETS_MS, None], strict=True):
        if seen + count >= rank and count:
            if upper is None:
                return float(lower)
            return round(lower + (upper - lower) * (rank - seen) / count, 1)
        seen += count
        lower = float(upper) if upper is not None else lower
    return lower


def _by_day(period: Period) -> tuple[Period | None, list[Period]]:
    """A period as its whole UTC days (read from daily rollups) and the parts of days at its
    ends (read from hourly rollups), so a window ending at the last whole hour keeps today."""
    first, last = day_ceil(period.start), day_floor(period.end)
    if first >= last:
        return None, [period]
    parts = [Period(period.start, first), Period(last, period.end)]
    return Period(first, last), [part for part in parts if part.start < part.end]


def rollups_within(start: datetime, end: datetime) -> list[QuerySet]:
    """The rollup rows of the hours in [start, end): the whole UTC days' from the daily
    rollups (a day's row is the sum of its hours), the parts of days at the ends from the
    hourly ones. Reads that sum or list usage over weeks read these, not every hour."""
    whole, parts = _by_day(Period(start, end))
    sources = [HourlyUsage.objects.filter(hour__gte=p.start, hour__lt=p.end) for p in parts]
    if whole is not None:
        days = DailyUsage.objects.filter(day__gte=whole.start.date(), day__lt=whole.end.date())
        sources.append(days)
    return sources


def _usage_filtered(rows: QuerySet, *, user, filters) -> QuerySet:
    """The rollup rows the user may see, narrowed by UsageFilterSet's query."""
    rows = tenant_scoped(rows, user=user)
    return UsageFilterSet.apply(filters, queryset=rows, user=user) if filters else rows


def usage_daily_by_model(
    *, user, period: Period, filters=None, by_project: bool = False, by_tier: bool = False
) -> list[dict]:
    """Per day and model (and project, its slug, with `by_project`: kpis.md 3e; and service
    tier, `service_tier`, with `by_tier`): requests, errors, tokens and latency p50/p95, from
    the daily rollups of the period's whole days and the hourly rollups of the rest (the rows
    of `usage_list` by day, summed over tenants and pools, and over projects and tiers
    without them); `filters` as usage_list's. The rows are kept in the shared cache under
    usage_stamp, the queries of their sums (which name the hours, the user's scope and the
    filters) and the models' names, which are read each time."""
    hours = (hour_ceil(period.start), hour_ceil(period.end))  # the rollup hours in the period
    after = rollups_after_cut(end=period.end)  # subtracted: the end's hour as of the cut
    queries = {}  # each (query, sign) by its SQL and parameters; none that can match no row
    for rows, sign in [*((rows, 1) for rows in rollups_within(*hours)), (after, -1)]:
        if rows is None:
            continue
        query = _daily_by_deployment(
            rows, user=user, filters=filters, by_project=by_project, by_tier=by_tier
        )
        try:
            queries[query.query.sql_with_params()] = (query, sign)
        except EmptyResultSet:  # a scope or filter that matches nothing
            continue
    models = dict(Deployment.objects.values_list("pk", "model__slug"))
    return kept(  # the rows as shown, not the sums they are merged from: each read of the
        # page merged and took the quantiles of every row again (10,080 at 200 tenants of
        # 20 projects)
        (
            "metering.usage_daily_by_model", usage_stamp(), by_project, by_tier,
            sorted(models.items()), *queries,
        ),
        lambda: _daily_merged(
            [(r, sign) for query, sign in queries.values() for r in query],
            models=models, by_project=by_project, by_tier=by_tier,
        ),
    )  # fmt: skip


def _daily_merged(
    grouped: list[tuple[dict, int]], *, models: dict[int, str], by_project: bool, by_tier: bool
) -> list[dict]:
    """usage_daily_by_model's rows from _daily_by_deployment's sums (each with the sign of
    its query: the end's hour after the cut is subtracted), merged per day and model (and
    project and tier), with the latency p50 and p95 of the merged histogram."""
    merged: dict[tuple, dict] = {}
    for r, sign in grouped:
        cell = (r["period_day"], models[r["deployment_id"]])
        if by_project:  # (none) sorts before the slugs, which are letters, digits, - and _
            cell = (*cell, r["project"])
        if by_tier:
            cell = (*cell, r["service_tier"])
        row = merged.setdefault(
            cell,
            {
                "day": cell[0],
                "model": cell[1],
                **({"project": cell[2]} if by_project else {}),
                **({"service_tier": cell[-1]} if by_tier else {}),
                **dict.fromkeys(USAGE_SUMS, 0),
                "histogram": [0] * (len(LATENCY_BUCKETS_MS) + 1),
            },
        )
        for name in USAGE_SUMS:
            row[name] += sign * r[name]
        for i in range(len(LATENCY_BUCKETS_MS) + 1):
            row["histogram"][i] += sign * (r[f"b{i}"] or 0)
    result = []
    for key in sorted(merged):
        row = merged[key]
        if not row["requests"]:
            continue  # only what the fold added after the cut
        histogram = row.pop("histogram")
        row["p50_ms"] = _quantile(histogram, 0.5)
        row["p95_ms"] = _quantile(histogram, 0.95)
        result.append(row)
    return result


def _daily_by_deployment(
    rows: QuerySet, *, user, filters, by_project: bool, by_tier: bool = False
) -> QuerySet:
    """The rollup rows the user may see (usage_list's filters) summed per UTC day and
    deployment (and project, with `by_project`, and tier, with `by_tier`) in the database (a
    month is hundreds of groups, not the tens of thousands of rollup rows), the latency
    histograms bucket by bucket."""
    buckets = {
        f"b{i}": Sum(Cast(KeyTextTransform(str(i), "latency_histogram"), BigIntegerField()))
        for i in range(len(LATENCY_BUCKETS_MS) + 1)
    }
    day = F("day") if rows.model is DailyUsage else TruncDate("hour", tzinfo=UTC)
    rows = _usage_filtered(rows.annotate(period_day=day), user=user, filters=filters)
    sums = {name: Sum(name) for name in USAGE_SUMS}
    if by_project:  # by slug (a slug never changes), so the tenants' projects of one slug
        # are one group in the database, not a group each
        slug = Project.objects.filter(pk=OuterRef("project_id")).values("slug")[:1]
        rows = rows.annotate(project=Coalesce(Subquery(slug), Value(NONE)))
    keys = (
        "period_day", "deployment_id", *(("project",) if by_project else ()),
        *(("service_tier",) if by_tier else ()),
    )  # fmt: skip
    return rows.values(*keys).annotate(**sums, **buckets).order_by()


def capacity_series(*, pool: Pool, period: Period) -> list[dict]:
    """Capacity samples of a pool in the period (the sample before it carries in)."""
    samples = CapacitySample.objects.filter(pool=pool, time__gte=period.start, time__lt=period.end)
    return [
        {"time": time, "installed": installed, "healthy": healthy, "busy": busy}
        for time, installed, healthy, busy in samples.order_by("time").values_list(
            "time", "gpus_installed", "gpus_healthy", "gpus_busy"
        )
    ]


def capacity_stamp(*, pool: Pool, period: Period) -> tuple:
    """What names the samples capacity_series reads, exactly (capacity_stamps, of one pool)."""
    return capacity_stamps(pools=[pool], period=period)[pool.pk]


def capacity_stamps(*, pools: Iterable[Pool], period: Period) -> dict[int, tuple]:
    """Per pool (by id), what names the samples capacity_series reads, exactly: their count,
    first and last time (the same samples whatever the period's ends, if nothing was stored
    among them since), and the pool's last capacity change in metering's change log (a
    sample stored again with other figures). Once the log is pruned past that change, where
    every consumer has read it up to stands in: a later change is past it. Two queries
    however many pools (three once a pool's changes are pruned)."""
    pks = [pool.pk for pool in pools]
    samples = CapacitySample.objects.filter(
        pool_id__in=pks, time__gte=period.start, time__lt=period.end
    )
    found = {
        row["pool_id"]: (row["count"], row["first"], row["last"])
        # COUNT(*), not of a column: the pool's and time's index answers it alone.
        for row in samples.values("pool_id")
        .annotate(count=Count("*"), first=Min("time"), last=Max("time"))
        .order_by()
    }
    changes = UsageChange.objects.filter(kind=UsageChange.Kind.CAPACITY, pool=OuterRef("pk"))
    last_change = dict(
        Pool.objects.filter(pk__in=pks).values_list(
            "pk", Subquery(changes.order_by("-id").values("id")[:1])
        )
    )
    read_by_all = None
    stamps = {}
    for pk in pks:
        changed = last_change.get(pk)
        if changed is None:
            if read_by_all is None:
                read_by_all = log_read_by_all(log="metering.usage")
            changed = read_by_all
        stamps[pk] = (*found.get(pk, (0, None, None)), changed)
    return stamps


def usage_stamp() -> int:
    """What names the hourly and daily rollups, exactly: the fold's last entry in metering's
    change log (a fold appends the hours it changed in its own transaction, one fold at a
    time, so a later change has a greater id). Once the log is pruned past it, where every
    consumer has read the log up to stands in: a later change is past it. (Rollups the demo
    loads before the portal serves are not in the log.)"""
    changes = UsageChange.objects.filter(kind=UsageChange.Kind.USAGE)
    changed = changes.aggregate(last=Max("id"))["last"]
    return changed if changed is not None else log_read_by_all(log="metering.usage")


def usage_by_pool(*, period: Period) -> list[dict]:
    """Factory-wide totals per pool and model over the period (operators): whole days from
    the daily rollups, the rest from the hourly ones. The sums per deployment are kept in
    the shared cache under usage_stamp and the hours summed (a month of daily rollups is
    summed once a fold, not once a view); the names are read each time."""
    hours = (hour_ceil(period.start), hour_ceil(period.end))  # the rollup hours in the period
    after = rollups_after_cut(end=period.end)
    pin = after.query.sql_with_params() if after is not None else None
    by_deployment = kept(
        ("metering.usage_by_deployment", *hours, pin, usage_stamp()),
        lambda: _usage_by_deployment(*hours, after=after),
    )
    keys = ("deployment__pool__slug", "deployment__model__slug")
    names = {
        pk: (pool, model)
        for pk, pool, model in Deployment.objects.filter(pk__in=by_deployment).values_list(
            "pk", "pool__slug", "model__slug"
        )
    }
    totals: dict[tuple[str, str], dict] = {}
    for deployment_id, sums in by_deployment.items():
        if not sums["requests"]:
            continue  # only what the fold added after the cut
        key = names[deployment_id]
        total = totals.setdefault(
            key, {**dict(zip(keys, key, strict=True)), **dict.fromkeys(USAGE_SUMS, 0)}
        )
        for name in USAGE_SUMS:
            total[name] += sums[name]
    return [totals[key] for key in sorted(totals)]


def _usage_by_deployment(
    start: datetime, end: datetime, *, after: QuerySet | None
) -> dict[int, dict]:
    """USAGE_SUMS per deployment over the hours in [start, end), less `after` (what the fold
    added to the last hour after the cut), summed in the database (no join over a month of
    rollup rows)."""
    sums = {name: Sum(name) for name in USAGE_SUMS}
    by_deployment: dict[int, dict] = {}
    sources = [*((rows, 1) for rows in rollups_within(start, end)), (after, -1)]
    for rows, sign in sources:
        if rows is None:
            continue
        for row in rows.values("deployment_id").annotate(**sums).order_by():
            total = by_deployment.setdefault(row["deployment_id"], dict.fromkeys(USAGE_SUMS, 0))
            for name in USAGE_SUMS:
                total[name] += sign * row[name]
    return by_deployment


# What the counters of /metrics count per tenant and deployment.
COUNTED_SUMS = ["requests", "errors", "compliant_requests", *TOKEN_FIELDS]


def usage_by_tenant_deployment(
    *, start: datetime, end: datetime
) -> dict[tuple[int, int, str], dict]:
    """COUNTED_SUMS per (tenant id, deployment id, service tier) over the hours in
    [start, end), summed in the database (whole days from the daily rollups): one query per
    part."""
    sums = {name: Sum(name) for name in COUNTED_SUMS}
    keys = ("tenant_id", "deployment_id", "service_tier")
    totals: dict[tuple[int, int, str], dict] = {}
    for rows in rollups_within(start, end):
        for row in rows.values(*keys).annotate(**sums).order_by():
            key = (row["tenant_id"], row["deployment_id"], row["service_tier"])
            total = totals.setdefault(key, dict.fromkeys(COUNTED_SUMS, 0))
            for name in COUNTED_SUMS:
                total[name] += row[name]
    return totals


def usage_metered_until(*, now: datetime | None = None) -> datetime:
    """How far usage is metered (kpis.md section 0, data_until): the receipt time of the
    oldest event still waiting for the fold, else when the fold last completed (a fold that
    stopped reads as a lag, never as idle GPUs); never after now; now when the fold never
    ran and nothing waits for it. Under continuous ingestion it keeps moving."""
    now = now or clock.now()
    marks = columns_read(_fold_columns)
    return _metered_until(now, marks["fold_oldest"], marks["fold_completed"])


def _fold_columns() -> dict[str, Subquery]:
    """The receipt time of the oldest event waiting for the fold and when it last completed,
    as columns of a one-row read (portal.pipeline.columns_read)."""
    return {
        "fold_oldest": Subquery(FoldPending.objects.order_by("queued_at").values("queued_at")[:1]),
        "fold_completed": Subquery(FoldMark.objects.order_by("pk").values("completed_at")[:1]),
    }


def _window_columns() -> dict[str, Subquery]:
    """How far usage is folded, the cut and the pools' first day in service, as the columns
    of window_resolve's one read."""
    return {
        **_fold_columns(),
        **cut_columns(),
        "first_in_service": Subquery(
            Pool.objects.filter(in_service_from__isnull=False)
            .order_by("in_service_from")
            .values("in_service_from")[:1]
        ),
        # A pool without a stored start is in service from its first sign of life.
        "unset": Subquery(Pool.objects.filter(in_service_from__isnull=True).values("pk")[:1]),
    }


def _metered_until(now: datetime, oldest: datetime | None, folded: datetime | None) -> datetime:
    """usage_metered_until from `_fold_columns`' values."""
    if oldest is not None:
        return min(now, oldest.astimezone(UTC))
    return now if folded is None else min(now, folded.astimezone(UTC))


@dataclass(frozen=True)
class FoldBacklog:
    """What the fold has not caught up with: the receipt time of the oldest event still
    waiting for it, and the later of the newest accepted event's receipt and the last
    fold's completion (None: nothing accepted nor folded yet)."""

    oldest_waiting: datetime | None
    newest: datetime | None


def fold_backlog_columns() -> dict[str, Subquery]:
    """The fold's backlog as columns of another one-row query (the reader's own mark), so a
    read that needs both asks once: the receipt times of the oldest and the newest event
    waiting for the fold, and when it last completed. `fold_backlog_of` reads them."""
    queued = FoldPending.objects.values("queued_at")
    return {
        "fold_oldest": Subquery(queued.order_by("queued_at")[:1]),
        "fold_newest": Subquery(queued.order_by("-queued_at")[:1]),
        "fold_completed": Subquery(FoldMark.objects.values("completed_at")[:1]),
    }


def fold_backlog_of(
    oldest: datetime | None, newest_queued: datetime | None, folded: datetime | None
) -> FoldBacklog:
    """The fold's backlog from `fold_backlog_columns`' values, in their order."""
    newest = max((t for t in (newest_queued, folded) if t is not None), default=None)
    return FoldBacklog(oldest_waiting=oldest, newest=newest)


def window_resolve(params, *, default: str = "this_month", now: datetime | None = None) -> Window:
    """The one period resolver (portal.periods) told how far usage is folded, where the
    latest measurement ends (the published cut, portal.pipeline; before the rate first ran,
    where usage is folded) and since when the factory is in service: every page, API
    operation and export that measures a period asks this. A GET reads the rest of its
    figures in one snapshot from here (portal.snapshot)."""
    snapshot_read()
    now = now or clock.now()
    marks = columns_read(_window_columns)
    metered = _metered_until(now, marks["fold_oldest"], marks["fold_completed"])
    cut = cut_of(marks["cut_position"], marks["cut_until"])
    data_from = marks["first_in_service"] if marks["unset"] is None else factory_in_service_from()
    return period_resolve(
        params,
        now=now,
        default=default,
        data_until=metered,
        measured_until=_measured_until(now, metered if cut is None else cut.until),
        data_from=None if data_from is None else data_from.astimezone(UTC),
    )


def window_until(
    params, *, default: str = "this_month", now: datetime | None = None, cut: Cut | None = None
) -> tuple[datetime, datetime]:
    """The `start` and `to` of window_resolve's window (the period's first instant and where
    its figures end, the published cut), asking only the cut (one query, none given the
    `cut` the caller read with its figures; the fold's mark too before the rate first ran):
    for a read that needs nothing else of the window, as the budget a gateway asks before
    each request (billing.selectors.budget). It opens the GET's snapshot when it reads the
    cut; a caller giving the cut read it in one instant with its figures already."""
    if cut is None:
        snapshot_read()
    now = now or clock.now()
    measured_until = usage_measured_until(now=now, cut=cut)
    window = period_resolve(params, now=now, default=default, measured_until=measured_until)
    return window.start, window.to


def usage_measured_until(
    *, now: datetime | None = None, metered: datetime | None = None, cut: Cut | None = None
) -> datetime:
    """Where the latest measurement ends (kpis.md section 0, measured_until): the published
    cut's time (portal.pipeline; `cut`, when the caller read it already), to the whole
    second; before the rate first ran, how far usage is folded (`metered`:
    usage_metered_until at `now`, when the caller read it already). Never after now."""
    now = now or clock.now()
    cut = cut or cut_read()
    if cut is not None:
        until = cut.until
    else:
        until = metered if metered is not None else usage_metered_until(now=now)
    return _measured_until(now, until)


def _measured_until(now: datetime, until: datetime) -> datetime:
    return min(now, until).replace(microsecond=0)


def rollups_after_cut(*, end: datetime) -> QuerySet[RollupDelta] | None:
    """What the fold added after the published cut to the hour holding `end`, a window's
    `to` inside an hour: a read of the window subtracts it (the rows have the rollups'
    fields). None when `end` is a whole hour, or before the rate first ran (reads then take
    what is folded)."""
    if end == hour_floor(end):
        return None
    cut = cut_read()
    if cut is None:
        return None
    return RollupDelta.objects.filter(hour=hour_floor(end), change__gt=cut.position)


# Factory-wide reads (not tenant-scoped) for rating and the KPIs: QuerySets the caller refines.


def hourly_usage_list(
    *, start: datetime | None = None, end: datetime | None = None
) -> QuerySet[HourlyUsage]:
    """Hourly rollup rows of the hours starting in [start, end) (either bound optional)."""
    return filter_within(queryset=HourlyUsage.objects.all(), field="hour", start=start, end=end)


def deployment_hour_sums(rollups: QuerySet[HourlyUsage], *by: str) -> QuerySet:
    """Hourly rollups summed per deployment and hour (and the fields `by` names, e.g. the
    tenant and project): requests `n`, compliant requests `ok`, errors `err`, input, cached
    and output tokens `i`, `c`, `o` and their SLO-compliant parts `ci`, `cc`, `co`."""
    return _summed(rollups, ("deployment_id", "hour", *by))


def _summed(rollups: QuerySet, keys: tuple[str, ...]) -> QuerySet:
    return rollups.values(*keys).annotate(
        n=Sum("requests"),
        ok=Sum("compliant_requests"),
        err=Sum("errors"),
        i=Sum("input_tokens"),
        c=Sum("cached_tokens"),
        o=Sum("output_tokens"),
        ci=Sum("compliant_input_tokens"),
        cc=Sum("compliant_cached_tokens"),
        co=Sum("compliant_output_tokens"),
    )


_HOUR_SUMS = ("n", "ok", "err", "i", "c", "o", "ci", "cc", "co")


def deployment_hour_totals(rollups: QuerySet[HourlyUsage], *by: str, end: datetime) -> list[dict]:
    """`deployment_hour_sums` of the rollups of hours before `end` (and the fields `by`
    names), the hour holding `end` (a window's `to`) as of the cut (module docstring): each
    row less the deltas of its own keys (a project's row less that project's)."""
    return _totals([rollups], ("deployment_id", "hour", *by), end=end)


def deployment_totals(
    *by: str, start: datetime, end: datetime, deployment_id: int | None = None
) -> list[dict]:
    """deployment_hour_totals of the hours of [start, end) summed over them (per deployment,
    or of the one `deployment_id`, and the fields `by` names): a few rows a deployment where
    the hours are many, read from the daily rollups of the whole days among them
    (rollups_within)."""
    sources = rollups_within(hour_ceil(start), hour_ceil(end))
    if deployment_id is not None:
        sources = [rollups.filter(deployment_id=deployment_id) for rollups in sources]
    return _totals(sources, ("deployment_id", *by), end=end)


def _totals(sources: list[QuerySet], keys: tuple[str, ...], *, end: datetime) -> list[dict]:
    def key(r: dict) -> tuple:
        return tuple(r[name] for name in keys)

    rows: dict[tuple, dict] = {}
    for rollups in sources:
        for r in _summed(rollups, keys):
            row = rows.get(key(r))
            if row is None:
                rows[key(r)] = dict(r)
                continue
            for name in _HOUR_SUMS:
                row[name] += r[name]
    after = rollups_after_cut(end=end)
    for r in _summed(after, keys) if after is not None else ():
        row = rows.get(key(r))
        if row is not None:
            for name in _HOUR_SUMS:
                row[name] -= r[name]
    return [row for row in rows.values() if row["n"]]


def daily_usage_list(*, start: datetime, end: datetime) -> QuerySet[DailyUsage]:
    """Daily rollup rows of the UTC days from start's date up to (not including) end's."""
    return DailyUsage.objects.filter(day__gte=start.date(), day__lt=end.date())


def metered_months(*, within: Iterable[Period]) -> list[datetime]:
    """The first instants of the UTC months that hold rolled-up usage on the days the spans
    touch, oldest first: one query of the daily rollups, whatever the spans' length (a day
    belongs to one month, so a span's partial first or last day only counts when that day
    has usage)."""
    spans = list(within)
    if not spans:
        return []
    days = reduce(
        or_,
        (Q(day__gte=day_floor(s.start).date(), day__lt=day_ceil(s.end).date()) for s in spans),
    )
    months = (
        DailyUsage.objects.filter(days)
        .annotate(month=TruncMonth("day"))
        .values_list("month", flat=True)
        .distinct()
        .order_by("month")
    )
    return [datetime(m.year, m.month, 1, tzinfo=UTC) for m in months]


def last_metered_month(*, within: Period) -> datetime | None:
    """The first instant of the latest UTC month holding rolled-up usage on the days the
    period touches (None when none does): one indexed read of the daily rollups."""
    day = DailyUsage.objects.filter(
        day__gte=day_floor(within.start).date(), day__lt=day_ceil(within.end).date()
    ).aggregate(last=Max("day"))["last"]
    return None if day is None else datetime(day.year, day.month, 1, tzinfo=UTC)


def first_metered_hour() -> datetime | None:
    """The earliest hour with rolled-up usage (None when nothing was metered)."""
    return HourlyUsage.objects.order_by("hour").values_list("hour", flat=True).first()


def raw_months_archived() -> set[datetime]:
    """The UTC months whose raw usage events the retention job archived and dropped."""
    months = IncompleteRawMonth.objects.filter(reason=IncompleteRawMonth.Reason.ARCHIVED)
    return {month.astimezone(UTC) for month in months.values_list("month", flat=True)}


def usage_event_list() -> QuerySet[UsageEvent]:
    """Every usage event, for the caller to filter (by tenant and time, never whole)."""
    return UsageEvent.objects.all()


def event_key_list(*, ids: list[int]) -> QuerySet[EventKey]:
    """The (source, event id) keys of the usage events with those ids."""
    return EventKey.objects.filter(id__in=ids)


def capacity_sample_list() -> QuerySet[CapacitySample]:
    """Every capacity sample of every pool, for the caller to filter by pool and time."""
    return CapacitySample.objects.all()


def five_minute_tokens_by_model(*, start: datetime, end: datetime) -> dict[str, dict]:
    """Per served model slug, its production (tok, kpis.md section 1: what its requests that
    did not fail made, at the w_in of the version in force) per 5-minute bucket start in
    [start, end), every tenant and deployment summed; buckets without traffic are absent.
    The 5-minute buckets are kept 8 days (FIVE_MINUTE_DAYS): the peak of a model's tok/s over
    its mean (kpis.md 6c) is read from them."""
    versions = DeploymentVersions()
    rows = (
        FiveMinuteUsage.objects.filter(bucket__gte=start, bucket__lt=end)
        .values("deployment_id", "deployment__model__slug", "bucket")
        .annotate(o=Sum("ok_output_tokens"), i=Sum("ok_input_tokens"), c=Sum("ok_cached_tokens"))
        .order_by()
    )
    out: dict[str, dict[datetime, Decimal]] = {}
    for row in rows:
        version = versions.at(row["deployment_id"], row["bucket"])
        if version is None:
            continue
        buckets = out.setdefault(row["deployment__model__slug"], {})
        made = production_tokens(
            output_tokens=row["o"], input_tokens=row["i"], cached_tokens=row["c"], w_in=version.w_in
        )
        buckets[row["bucket"]] = buckets.get(row["bucket"], Decimal(0)) + made
    return out


def installed_gpus_now(*, pools: Iterable[Pool], now: datetime) -> dict[int, int]:
    """Per pool id, its GPUs installed at `now`: the last capacity sample's at or before it,
    else the pool's `gpu_count`."""
    pools = list(pools)
    latest = (
        CapacitySample.objects.filter(pool__in=pools, time__lte=now)
        .values("pool_id")
        .annotate(last=Max("time"))
        .order_by()
    )
    when = {row["pool_id"]: row["last"] for row in latest}
    found = Q()
    for pool_id, time in when.items():
        found |= Q(pool_id=pool_id, time=time)
    counts = {pool.pk: pool.gpu_count for pool in pools}
    if when:
        for pool_id, installed in CapacitySample.objects.filter(found).values_list(
            "pool_id", "gpus_installed"
        ):
            counts[pool_id] = installed
    return counts
