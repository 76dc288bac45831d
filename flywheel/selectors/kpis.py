"""Reads for the KPI pages: measured periods and the snapshot history."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db.models import Model

from flywheel.domain.bands import band_of
from flywheel.domain.kpis import Kpis, PoolInputs, kpis_compute, period_seconds, pool_reference_rate
from flywheel.domain.tfom import Tfom
from flywheel.models import KpiSnapshot
from flywheel.selectors.loop.shapes import rfc3339
from flywheel.selectors.measurement import FACTORY, FactoryData, PoolSums, Versions
from flywheel.services.kpis import DAY, kpis_json, snapshot_get
from metering.selectors.factory import deployment_list, pool_list, pool_service_lives
from portal import clock
from portal.periods import Period, Window, hour_ceil

FACTOR_KEYS = (
    "availability", "occupancy", "efficiency", "tef",
    "sla_delivery", "sell_through", "price_realization", "tfi",
)  # fmt: skip


@dataclass(frozen=True)
class Measured:
    """The KPIs of a period: the factory's, and each pool's with its inputs."""

    start: datetime
    end: datetime  # how far the figures reach: the period's end, or the last measurement's
    factory: Kpis
    pools: list[tuple[Model, PoolInputs, Kpis]]  # (metering Pool, its inputs, its KPIs)
    rating_errors: dict[str, str]
    measured_at: datetime | None  # the oldest snapshot used (None: measured for this request)


def period_measure(*, start: datetime, end: datetime, now: datetime | None = None) -> Measured:
    """KPIs of [start, end). A period of whole days adds up the pools' sums stored in the
    factory's day snapshots, so a page reads one row per day however many events the
    days hold; days without a usable snapshot are measured for the request. Any other
    period is measured for the request (FactoryData)."""
    now = now or clock.now()
    stop = min(end, hour_ceil(now))  # hours to come have produced nothing yet
    if stop <= start:
        return _measured_live(start, end)
    if not (_is_midnight(start) and _is_midnight(end)):
        return _measured_live(start, stop)
    pools = {pool.pk: pool for pool in pool_list()}
    days, day = [], start
    while day < stop:
        days.append(day)
        day += DAY
    snapshots = {
        row.period_start: row
        for row in KpiSnapshot.objects.filter(
            scope=FACTORY,
            period_kind=KpiSnapshot.PeriodKind.DAY,
            period_start__gte=start,
            period_start__lt=stop,
        )
    }
    slugs = {pool.slug for pool in pools.values()}
    parts: dict[datetime, tuple[datetime, dict[str, PoolSums]]] = {}
    errors: dict[str, str] = {}
    measured_at = None
    for day in days:
        row = snapshots.get(day)
        day_end = min(day + DAY, stop)
        # Usable: it has every pool's sums and reaches the day's end (the last day may
        # end at the last measurement).
        if row and slugs <= row.sums.keys() and (row.period_end >= day_end or day == days[-1]):
            parts[day] = (row.period_end, {s: PoolSums.from_json(row.sums[s]) for s in slugs})
            errors.update(row.rating_errors)
            measured_at = min(measured_at or row.measured_at, row.measured_at)
    missing = [day for day in days if day not in parts]
    if missing:
        data = FactoryData(start=missing[0], end=min(missing[-1] + DAY, stop))
        for day in missing:
            day_end = min(day + DAY, stop)
            parts[day] = (
                day_end,
                {p.slug: data.pool_sums(pk, day, day_end) for pk, p in pools.items()},
            )
        errors.update(data.rating_errors)
    totals: dict[int, PoolSums] = {}
    for day in days:
        for pk, pool in pools.items():
            part = parts[day][1][pool.slug]
            if pk in totals:
                totals[pk].add(part)
            else:
                totals[pk] = part
    versions = Versions()
    deployments = defaultdict(list)
    for deployment_id, pool_id in deployment_list().values_list("pk", "pool_id"):
        deployments[pool_id].append(deployment_id)
    r_refs = {pk: versions.latest_r_refs(deployments[pk]) for pk in pools}
    return _measured(start, parts[days[-1]][0], pools, totals, r_refs, errors, measured_at)


def _measured_live(start: datetime, end: datetime) -> Measured:
    data = FactoryData(start=start, end=end)
    sums = {pk: data.pool_sums(pk, start, end) for pk in data.pools}
    r_refs = {pk: data.r_refs(pk) for pk in data.pools}
    return _measured(start, end, data.pools, sums, r_refs, data.rating_errors, None)


def _measured(start, end, pools, sums, r_refs, errors, measured_at) -> Measured:
    rows = []
    for pk, pool in sorted(pools.items(), key=lambda kv: kv[1].slug):
        inputs = sums[pk].inputs(pool=pool.slug, r_refs=r_refs[pk])
        rows.append(
            (pool, inputs, kpis_compute(scope=pool.slug, start=start, end=end, pools=[inputs]))
        )
    factory = kpis_compute(
        scope=FACTORY, start=start, end=end, pools=[inputs for _, inputs, _ in rows]
    )
    return Measured(start, end, factory, rows, errors, measured_at)


def _is_midnight(moment: datetime) -> bool:
    return moment.astimezone(UTC).time() == time.min


def overview_get(*, period: Period) -> dict:
    """The factory's KPIs over the period with their bands, and one row per pool."""
    measured = period_measure(start=period.start, end=period.end)
    factory = kpis_json(measured.factory)
    seconds = period_seconds(start=measured.start, end=measured.end)
    pools = []
    for pool, inputs, pool_kpis in measured.pools:
        kpis = kpis_json(pool_kpis)
        pools.append(
            {
                "pool": pool,
                "gpus": inputs.calendar_gpu_seconds / seconds,  # time-weighted installed GPUs
                "r_ref": pool_reference_rate(pool=inputs),
                "kpis": kpis,
                "bands": {key: band_of(key, kpis[key]) for key in FACTOR_KEYS},
            }
        )
    return {
        "kpis": factory,
        "bands": {key: band_of(key, factory[key]) for key in FACTOR_KEYS},
        "pools": pools,
        "rating_errors": measured.rating_errors,
        "measured_to": measured.end if measured.end < period.end else None,
        "measured_at": measured.measured_at,
    }


def daily_trend(*, end: datetime, days: int = 90, scope: str = FACTORY) -> list[dict]:
    """Closed day snapshots of a scope over the `days` before `end`, oldest first (the day
    in progress is left out: its figures would read as a cliff)."""
    rows = KpiSnapshot.objects.filter(
        scope=scope,
        is_closed=True,
        period_kind=KpiSnapshot.PeriodKind.DAY,
        period_start__gte=end - timedelta(days=days),
        period_start__lt=end,
    ).order_by("period_start")
    return [
        {
            "day": row.period_start.date(),
            "tef": row.values.get("tef"),
            "tfi": row.values.get("tfi"),
            "tps": row.values.get("tps"),
            "theoretical_tps": row.values.get("theoretical_tps"),
        }
        for row in rows
    ]


def product_of_factors(values: dict) -> Decimal | None:
    """α·β·η·σ·s·ρ: what the waterfall multiplies to (the TFI when every factor is defined)."""
    product = Decimal(1)
    for key in ("availability", "occupancy", "efficiency", "sla_delivery", "sell_through",
                "price_realization"):  # fmt: skip
        if values.get(key) is None:
            return None
        product *= Decimal(str(values[key]))
    return product


def kpis_get(*, scope: str, start: datetime, end: datetime) -> dict:
    """A closed snapshot when one covers exactly [start, end), else measured now."""
    if snapshot := snapshot_get(scope=scope, start=start, end=end):
        return {**snapshot.values, "source": "snapshot", "rating_errors": snapshot.rating_errors}
    data = FactoryData(start=start, end=end)
    if scope != FACTORY and scope not in data.slugs:
        raise ValidationError({"scope": [f"unknown scope {scope!r}: use 'factory' or a pool slug"]})
    kpis = data.kpis(scope=scope, start=start, end=end)
    return {**kpis_json(kpis), "source": "live", "rating_errors": data.rating_errors}


def empty_reason_of(*, window: Window, scope: str) -> str | None:
    """Why a window has nothing to measure (kpis.md section 0), or None: `no_usage_yet` when
    it ends before any hour of it is metered, `no_pool_in_service` when no pool (of the
    scope) is in service in it."""
    if window.is_empty:
        return "no_usage_yet"
    pools = [p for p in pool_list() if scope in (FACTORY, p.slug)]
    for since, until in pool_service_lives(pools=pools).values():
        if since is not None and since < window.to and (until is None or until > window.start):
            return None
    return "no_pool_in_service"


def window_json(*, window: Window, scope: str, figures: Iterable[str]) -> dict | None:
    """The answer for a window with nothing to measure (kpis.md section 0): every figure
    null, with `empty_reason`; None when the window can be measured."""
    if scope != FACTORY and not pool_list().filter(slug=scope).exists():
        raise ValidationError({"scope": [f"unknown scope {scope!r}: use 'factory' or a pool slug"]})
    reason = empty_reason_of(window=window, scope=scope)
    if reason is None:
        return None
    return {
        **dict.fromkeys(figures),
        "scope": scope,
        "from": rfc3339(window.start),
        "to": rfc3339(window.to),
        "empty_reason": reason,
    }


KPI_FIGURES = [("from" if f.name == "from_" else f.name) for f in fields(Kpis)]
TFOM_FIGURES = [("from" if f.name == "from_" else f.name) for f in fields(Tfom)]
