"""Reads for the KPI pages: measured periods and the snapshot history."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from portal.periods import Period

from .bands import band_of
from .kpis import period_seconds, pool_reference_rate
from .measurement import FACTORY, FactoryData
from .models import KpiSnapshot
from .services.snapshots import kpis_json

FACTOR_KEYS = (
    "availability", "occupancy", "efficiency", "tef",
    "sla_delivery", "sell_through", "price_realization", "tfi",
)  # fmt: skip


def overview_get(*, period: Period) -> dict:
    """The factory's KPIs over the period with their bands, and one row per pool."""
    data = FactoryData(start=period.start, end=period.end)
    factory = kpis_json(data.kpis(scope=FACTORY, start=period.start, end=period.end))
    seconds = period_seconds(start=period.start, end=period.end)
    pools = []
    for pool_id, pool in sorted(data.pools.items(), key=lambda kv: kv[1].slug):
        inputs = data.pool_inputs(pool_id, period.start, period.end)
        kpis = kpis_json(data.kpis(scope=pool.slug, start=period.start, end=period.end))
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
        "rating_errors": data.rating_errors,
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
