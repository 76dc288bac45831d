"""KPI snapshots: measured per scope and day or month, upserted on their key; flywheel's
stage of the pipeline (portal.pipeline).

The measure stage reads what changed past its own cursors (metering's change log: usage,
capacity and deployment versions; billing's change log: rated usage) and measures again the
days and months the changes fall in, the open day and month up to the window a read uses
(kpis.md section 0: to the published cut, portal.pipeline, not floored to the hour, with
the figures a read of it gets: it reads in one snapshot, portal.snapshot), and closes each
day and month that ended, with the counters /metrics publishes (flywheel.services.counters);
it writes them in one short transaction that consumes what it read. `snapshots_measure`
measures any range.
Every write is an upsert on (scope, period_kind, period_start) computed from the published
read models alone, so a rerun after a crash leaves one identical row per key.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from django.db import transaction

from billing.selectors.rating.rated_usage import rated_changes_read
from flywheel.models import KpiSnapshot
from flywheel.selectors.kpis import kpis_json
from flywheel.selectors.measurement import DAY, FACTORY, FactoryData, kpi_read
from flywheel.services.counters import counters_measure, counters_store
from metering.selectors.changes import usage_changes_read
from metering.selectors.factory import factory_in_service_from
from metering.selectors.usage import usage_measured_until
from portal import clock
from portal.periods import Period, day_floor, month_start, months_before, next_month
from portal.pipeline import MEASURE, log_consume
from portal.snapshot import read_snapshot

Span = tuple[datetime, datetime]  # [start, end)


def _days(start: datetime, end: datetime) -> list[datetime]:
    days, day = [], day_floor(start)
    while day < end:
        days.append(day)
        day += DAY
    return days


def snapshots_measure(
    *, start: datetime, end: datetime, now: datetime | None = None
) -> list[KpiSnapshot]:
    """Measure every scope for each day and month that [start, end) touches and upsert the
    snapshots (`_measured`). Returns the rows upserted."""
    now = now or clock.now()
    with read_snapshot():
        rows = _measured(days=_days(start, min(end, now)), now=now)
        counters = counters_measure(snapshots=rows, now=now)
    with transaction.atomic():
        _upsert(rows)
        counters_store(counters)
    return rows


def _measured(*, days: Iterable[datetime], now: datetime) -> list[KpiSnapshot]:
    """The snapshots of the days and of the months holding them (reads only), each up to
    the read window's end (`usage_measured_until`) and closed once it ends before it: the
    days measured again from the published read models, the rest of each month read from
    its closed day snapshots as any read of it is, each month in one load."""
    to = usage_measured_until(now=now)
    by_month: dict[datetime, list[datetime]] = {}
    for day in sorted({day for day in days if day < to}):
        by_month.setdefault(month_start(day), []).append(day)
    rows: list[KpiSnapshot] = []
    for month, month_days in by_month.items():
        data = kpi_read(Period(month, min(next_month(month), to)), remeasure=frozenset(month_days))
        for scope in data.scopes():
            rows += [
                _snapshot(data, scope, KpiSnapshot.PeriodKind.DAY, day, min(day + DAY, to), now)
                for day in month_days
            ]
            rows.append(_snapshot(data, scope, KpiSnapshot.PeriodKind.MONTH, month, data.end, now))
    return rows


def _snapshot(data: FactoryData, scope: str, kind: str, start, end, now) -> KpiSnapshot:
    kpis = data.kpis(scope=scope, start=start, end=end)
    sums = {}
    if scope == FACTORY:
        sums = {
            pool.slug: data.pool_sums(pool_id, start, end).as_json()
            for pool_id, pool in data.pools.items()
        }
    period_end = start + DAY if kind == KpiSnapshot.PeriodKind.DAY else next_month(start)
    return KpiSnapshot(
        scope=scope,
        period_kind=kind,
        period_start=start,
        period_end=end,
        telemetry=kpis.telemetry,
        values=kpis_json(kpis),
        sums=sums,
        rating_errors=data.rating_errors,
        is_closed=end == period_end,
        measured_at=now,
    )


def _upsert(rows: list[KpiSnapshot]) -> None:
    KpiSnapshot.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["scope", "period_kind", "period_start"],
        update_fields=[
            "period_end", "telemetry", "values", "sums", "rating_errors", "is_closed",
            "measured_at",
        ],
    )  # fmt: skip


def snapshots_update(*, now: datetime | None = None) -> int:
    """The measure stage: measure again the days (and months) that metering's and billing's
    change logs name past this stage's cursors, and every day since the last closed one
    whose snapshot does not reach the read window's end (the open day, days that ended);
    then upsert them in one short transaction that consumes both logs' entries. Returns
    the snapshots written."""
    now = now or clock.now()
    while True:
        with read_snapshot():
            usage = usage_changes_read(consumer=MEASURE)
            rated = rated_changes_read(consumer=MEASURE)
            first = factory_in_service_from()
            days: set[datetime] = set()
            if first is not None:
                spans = [*_usage_spans(usage.entries), *_rated_spans(rated.entries)]
                for span_start, span_end in spans:
                    days.update(_days(max(span_start, first), min(span_end, now)))
                days.update(_stale_open_days(since=_open_since(first, now), now=now))
            rows = _measured(days=days, now=now)
            counters = counters_measure(snapshots=rows, now=now)
        with transaction.atomic():
            if not (log_consume(usage) and log_consume(rated)):
                transaction.set_rollback(True)  # another run measured them meanwhile: again
                continue
            _upsert(rows)
            counters_store(counters)
        return len(rows)


def _open_since(first: datetime, now: datetime) -> datetime:
    """The day after the last closed day snapshot (the first in-service day when none), but
    not before last month: every day from it is open, or ended since it was last measured.
    Older days are closed, or measured by `manage.py measure` and read live meanwhile."""
    closed = (
        KpiSnapshot.objects.filter(
            scope=FACTORY, period_kind=KpiSnapshot.PeriodKind.DAY, is_closed=True
        )
        .order_by("-period_start")
        .values_list("period_start", flat=True)
        .first()
    )
    since = day_floor(first) if closed is None else closed.astimezone(UTC) + DAY
    return max(since, months_before(now, 1))


def _stale_open_days(*, since: datetime, now: datetime) -> set[datetime]:
    """The days from `since` (none of them closed) whose snapshot does not reach the read
    window's end yet: a cut that moved on, or a day that ended."""
    to = usage_measured_until(now=now)
    measured = {
        start.astimezone(UTC): end.astimezone(UTC)
        for start, end in KpiSnapshot.objects.filter(
            scope=FACTORY, period_kind=KpiSnapshot.PeriodKind.DAY, period_start__gte=since
        ).values_list("period_start", "period_end")
    }
    return {day for day in _days(since, to) if measured.get(day) != min(day + DAY, to)}


def _usage_spans(changes) -> list[Span]:
    """Metering's changes as the spans whose figures moved (open-ended: up to now)."""
    far = datetime(2101, 1, 1, tzinfo=UTC)
    return [(change.start, change.end or far) for change in changes]


def _rated_spans(changes) -> list[Span]:
    """Billing's changes: the hours a tenant's rated usage changed in."""
    return [(change.start, change.end) for change in changes]
