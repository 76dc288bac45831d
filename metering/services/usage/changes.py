"""Changes to metered figures after they were stored, for the pipeline (portal.pipeline):
capacity samples and deployment versions appended to metering's change log, hours queued to
be folded again from raw events (a new SLO over hours already folded), and the months whose
raw events are incomplete, which can never be folded again."""

from collections.abc import Iterable
from datetime import datetime

from metering.models import (
    CapacitySample,
    Deployment,
    IncompleteRawMonth,
    Pool,
    RefoldPending,
    UsageChange,
)
from portal import clock
from portal.errors import FieldError
from portal.periods import hour_ceil, hour_floor, month_start, next_month
from portal.pipeline import FOLD, log_append, stage_schedule


def raw_months_incomplete_mark(
    *, pools: Iterable[Pool], months: Iterable[datetime], reason: str
) -> int:
    """Record that the pools' raw events of `months` are not all stored (loaded as rollups,
    or archived): their hours are never folded again from raw events."""
    rows = [
        IncompleteRawMonth(pool=pool, month=month_start(month), reason=reason)
        for pool in pools
        for month in set(months)
    ]
    created = IncompleteRawMonth.objects.bulk_create(rows, ignore_conflicts=True)
    return len(created)


def raw_months_complete_check(*, pool: Pool, start: datetime, end: datetime | None, field: str):
    """Refuse, naming `field`, a change that would need the refold of a month of `pool` in
    [start, end) whose raw events are incomplete (end None: up to now)."""
    end = end or hour_ceil(clock.now())
    gaps = IncompleteRawMonth.objects.filter(
        pool=pool, month__gte=month_start(start), month__lt=end
    ).order_by("month")
    gap = gaps.first()
    if gap is None:
        return
    resume = next_month(gaps.last().month)
    raise FieldError(
        field,
        f"the usage of pool {pool.slug} in {gap.month:%Y-%m} is kept as rollups only "
        f"({gap.get_reason_display()}): it cannot be folded again under a new SLO; "
        f"take effect from {resume:%Y-%m-%dT%H:%MZ} or later",
    )


def usage_refold_queue(*, deployment: Deployment, start: datetime, end: datetime | None) -> None:
    """Queue the deployment's hours in [start, end) (no end: to now) to be folded again from
    raw events: their compliance follows the SLO in force, which a new version from a past
    hour changes. Refused naming `effective_from` when a month of it lacks raw events."""
    raw_months_complete_check(pool=deployment.pool, start=start, end=end, field="effective_from")
    RefoldPending.objects.create(deployment=deployment, start=start, end=end)
    stage_schedule(FOLD)


def usage_refold(*, start: datetime, end: datetime | None = None) -> int:
    """An explicit rebuild: every deployment's rollups of [start, end) queued to be folded
    again from raw events (the fold does it next). Refused naming `from` when a month of the
    span lacks raw events, before anything is queued. Returns the deployments queued."""
    deployments = list(Deployment.objects.select_related("pool"))
    for deployment in deployments:
        raw_months_complete_check(pool=deployment.pool, start=start, end=end, field="from")
    RefoldPending.objects.bulk_create(
        RefoldPending(deployment=deployment, start=start, end=end) for deployment in deployments
    )
    stage_schedule(FOLD)
    return len(deployments)


def version_change_append(*, deployment: Deployment, start: datetime, end: datetime | None):
    """A deployment version (R_ref, w_in, SLO) in force over [start, end): the figures of its
    pool from `start` change (for the measurement; a new SLO also refolds)."""
    if start > clock.now():
        return  # nothing measured yet is in its span
    log_append(
        UsageChange,
        [UsageChange(kind=UsageChange.Kind.VERSION, pool=deployment.pool, start=start, end=end)],
        log="metering.usage",
    )


def capacity_change_append(*, samples: Iterable[CapacitySample]) -> None:
    """Capacity samples stored: each pool's capacity changes from its first sample's hour up
    to the sample after its last one (none: up to now, since a sample carries forward)."""
    by_pool: dict[int, list[datetime]] = {}
    for sample in samples:
        by_pool.setdefault(sample.pool_id, []).append(sample.time)
    entries = []
    for pool_id, times in by_pool.items():
        following = (
            CapacitySample.objects.filter(pool_id=pool_id, time__gt=max(times))
            .order_by("time")
            .values_list("time", flat=True)
            .first()
        )
        entries.append(
            UsageChange(
                kind=UsageChange.Kind.CAPACITY,
                pool_id=pool_id,
                start=hour_floor(min(times)),
                end=hour_ceil(following) if following is not None else None,
            )
        )
    log_append(UsageChange, entries, log="metering.usage")


def pool_change_append(*, pool: Pool, before: tuple) -> None:
    """A pool's `gpu_count`, `in_service_from` or `retired_at` changed (`before`: their old
    values): its calendar time and assumed capacity change from the earliest instant either
    version of its service life reaches."""
    after = (pool.gpu_count, pool.in_service_from, pool.retired_at)
    if after == before:
        return
    instants = [t for t in (*before[1:], *after[1:]) if t is not None]
    if not instants:
        return  # never in service: nothing was measured
    log_append(
        UsageChange,
        [UsageChange(kind=UsageChange.Kind.CAPACITY, pool=pool, start=hour_floor(min(instants)))],
        log="metering.usage",
    )
