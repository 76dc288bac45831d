"""Reads for the KPI pages: measured periods and the snapshot history."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Model

from flywheel.domain.kpis import (
    KPI,
    KPIS,
    MONEY,
    Kpis,
    PoolInputs,
    band_of,
    kpis_compute,
    period_seconds,
    pool_reference_rate,
)
from flywheel.domain.loop.factors import FACTORS
from flywheel.domain.tfom import Tfom
from flywheel.models import KpiSnapshot
from flywheel.selectors.measurement import FACTORY, closed_days_stamp, kpi_read
from metering.selectors.factory import (
    DeploymentVersions,
    deployment_list,
    pool_list,
    pool_service_lives,
)
from portal.formatting import rfc3339
from portal.kept import kept
from portal.money import money_str
from portal.periods import Period, Window

# The overview's factor table: the ratios with a band (α…ρ, TEF and TFI), as declared.
FACTOR_KEYS = tuple(kpi.key for kpi in KPIS if kpi.band is not None)
MONEY_KEYS = frozenset(kpi.key for kpi in KPIS if kpi.unit == MONEY)


def kpis_json(kpis: Kpis) -> dict[str, Any]:
    """The figures as JSON: ratios and rates as numbers, money as decimal strings, token
    counts as integers, times RFC 3339 (architecture.md, response shapes)."""
    out: dict[str, Any] = {}
    for key, value in kpis.as_dict().items():
        if isinstance(value, datetime):
            out[key] = rfc3339(value)
        elif key in MONEY_KEYS:
            out[key] = money_str(amount=value, currency=settings.FACTORY_CURRENCY)
        elif isinstance(value, Decimal):
            out[key] = float(value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class Measured:
    """The KPIs of a period: the factory's, and each pool's with its inputs."""

    start: datetime
    end: datetime
    factory: Kpis
    pools: list[tuple[Model, PoolInputs, Kpis]]  # (metering Pool, its inputs, its KPIs)
    rating_errors: dict[str, str]
    measured_at: datetime | None  # the oldest snapshot used (None: measured for this request)


def period_measure(*, start: datetime, end: datetime) -> Measured:
    """KPIs of [start, end) for the factory and each pool: the one KPI read of pages, API,
    /metrics and exports. Whole days the measure job closed come from its day snapshots,
    the rest is measured for the request (FactoryData)."""
    data = kpi_read(Period(start, end))
    sums = {pk: data.pool_sums(pk, start, end) for pk in data.pools}
    r_refs = {pk: data.r_refs(pk) for pk in data.pools}
    return _measured(start, end, data.pools, sums, r_refs, data.rating_errors, data.measured_at)


def scope_kpis(measured: Measured, *, scope: str) -> Kpis:
    """The KPIs of one scope of a measured period: the factory's or a pool's (by slug)."""
    if scope == FACTORY:
        return measured.factory
    for pool, _, kpis in measured.pools:
        if pool.slug == scope:
            return kpis
    raise ValidationError({"scope": [f"unknown scope {scope!r}: use 'factory' or a pool slug"]})


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


def overview_get(*, period: Period, pools: list[Model] | None = None) -> dict:
    """The factory's KPIs over the period with their bands, and one row per pool. A period
    read whole from closed day snapshots is kept in the shared cache (portal.kept) under
    closed_days_stamp, the pools and the R_ref of their deployments' latest versions (what
    its figures are made of); the pools themselves are read each time (`pools`: every pool,
    when the caller read them in this snapshot). `stamp` names what the figures show (None
    when measured for this read), for the page to keep its HTML."""
    pools = list(pool_list()) if pools is None else pools
    stamp = closed_days_stamp(
        start=period.start, end=period.end, slugs=[pool.slug for pool in pools]
    )
    if stamp is None:
        return _overview_measured(period) | {"stamp": None}
    versions = DeploymentVersions()
    deployments: dict[int, list[int]] = {pool.pk: [] for pool in pools}
    for deployment in deployment_list():
        deployments.setdefault(deployment.pool_id, []).append(deployment.pk)
    r_refs = sorted(
        (pool.pk, pool.slug, versions.latest_r_refs(deployments[pool.pk])) for pool in pools
    )
    key = ("flywheel.overview", period.start, period.end, stamp, r_refs)
    overview = kept(key, lambda: _pools_by_pk(_overview_measured(period)))
    by_pk = {pool.pk: pool for pool in pools}
    # What the page's figures show, exactly: the kept overview's key and the pools' names.
    shown = [(pool.pk, pool.slug, pool.name, pool.gpu_type) for pool in pools]
    return overview | {
        "pools": [row | {"pool": by_pk[row["pool"]]} for row in overview["pools"]],
        "stamp": (key, shown, settings.FACTORY_CURRENCY),
    }


def _pools_by_pk(overview: dict) -> dict:
    """The overview with each pool row naming its pool by id (a kept value holds no model)."""
    return overview | {"pools": [row | {"pool": row["pool"].pk} for row in overview["pools"]]}


def _overview_measured(period: Period) -> dict:
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
    bands = {key: band_of(key, factory[key]) for key in FACTOR_KEYS}
    return {
        "kpis": factory,
        "bands": bands,
        "factor_rows": [
            {
                "label": KPI[key].row_label,
                "value": factory[key],
                "decimals": KPI[key].shown_decimals,
                "band": bands[key],
                "strong": bool(KPI[key].chain),
            }
            for key in FACTOR_KEYS
        ],
        "pools": pools,
        "rating_errors": measured.rating_errors,
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
            "day": start.date(),
            "tef": values.get("tef"),
            "tfi": values.get("tfi"),
            "tps": values.get("tps"),
            "theoretical_tps": values.get("theoretical_tps"),
        }
        for start, values in rows.values_list("period_start", "values")
    ]


def product_of_factors(values: dict) -> Decimal | None:
    """α·β·η·σ·s·ρ: what the waterfall multiplies to (the TFI when every factor is defined)."""
    product = Decimal(1)
    for key in FACTORS:
        if values.get(key) is None:
            return None
        product *= Decimal(str(values[key]))
    return product


def kpis_get(*, scope: str, start: datetime, end: datetime) -> dict:
    """The KPIs of a scope over [start, end) as GET /api/v1/kpis writes them."""
    measured = period_measure(start=start, end=end)
    return {**kpis_json(scope_kpis(measured, scope=scope)), "rating_errors": measured.rating_errors}


def empty_reason_of(*, window: Window, scope: str, pools: list[Model] | None = None) -> str | None:
    """Why a window has nothing to measure (kpis.md section 0), or None: `no_usage_yet` when
    it ends before any hour of it is metered, `no_pool_in_service` when no pool (of the
    scope) is in service in it (`pools`: every pool, when the caller read them already)."""
    if window.is_empty:
        return "no_usage_yet"
    pools = [p for p in (pool_list() if pools is None else pools) if scope in (FACTORY, p.slug)]
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
