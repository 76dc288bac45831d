"""A growth scenario's 12-month series (kpis.md section 6, step 3, `growth`).

Month m's demand is the measured production × (1 + g/100)^m; each pool serves its
demand up to its capacity, what its available GPU-seconds produce all busy at the
projected efficiency (A' × R_ref × η'); revenue, energy and the factors follow the served
production at today's realized prices. Figures are per month (demand.per_month).

Pure: imports no Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import cast

from flywheel.domain.kpis import KPI_CONTEXT, ZERO, PoolInputs
from flywheel.domain.loop.baseline import Baseline
from flywheel.domain.loop.demand import GROWTH_MONTHS, Demand
from flywheel.domain.loop.levers import LeverSpec
from flywheel.domain.loop.projection import Projection, project
from flywheel.domain.tfom import Tfom


@dataclass(frozen=True, kw_only=True)
class GrowthMonth:
    month: int  # 1 … 12 after the measured period
    demand_tokens: Decimal  # production units per month
    capacity_tokens: Decimal  # what the scenario's capacity produces all busy, per month
    served_tokens: Decimal  # per month
    projection: Projection

    @property
    def is_over_capacity(self) -> bool:
        return self.served_tokens < self.demand_tokens


@dataclass(frozen=True, kw_only=True)
class GrowthSeries:
    months: tuple[GrowthMonth, ...]
    # The first month some pool's demand exceeds its capacity without the scenario's
    # levers and targets (None: not within the 12 months), and those pools.
    first_month_over_capacity: int | None
    pools_over_capacity: tuple[str, ...]


def growth_series(
    *,
    baseline: Baseline,
    demand: Demand,
    levers: Sequence[LeverSpec] = (),
    targets: Mapping[str, Decimal] | None = None,
    estimate: str = "typical",
    measured: Tfom | None = None,
) -> GrowthSeries:
    """The 12 months of a growth demand, with and without the scenario's levers."""
    if demand.kind != "growth":
        raise ValueError("a series needs a growth demand")
    months = []
    first: int | None = None
    over: tuple[str, ...] = ()
    for month in range(1, GROWTH_MONTHS + 1):
        projection = project(
            baseline=baseline,
            levers=levers,
            targets=targets,
            estimate=estimate,
            measured=measured,
            demand=demand,
            month=month,
        )
        scale = cast(Decimal, projection.demand_scale)  # a growth demand's scale is a number
        months.append(
            GrowthMonth(
                month=month,
                demand_tokens=projection.per_month(
                    sum((p.production_tokens for p in projection.measured_pools), ZERO) * scale
                ),
                capacity_tokens=projection.per_month(_capacity_tokens(projection.pools)),
                served_tokens=projection.per_month(
                    sum((p.production_tokens for p in projection.pools), ZERO)
                ),
                projection=projection,
            )
        )
        if first is None:
            bare = project(baseline=baseline, measured=measured, demand=demand, month=month)
            over = _over_capacity(bare)
            first = month if over else None
    return GrowthSeries(
        months=tuple(months), first_month_over_capacity=first, pools_over_capacity=over
    )


def _capacity_tokens(pools: Sequence[PoolInputs]) -> Decimal:
    """Σ A × R_ref × η over the pools: their production per busy second on every available
    second (a pool that produced nothing counts none)."""
    with localcontext(KPI_CONTEXT):
        return sum(
            (
                p.available_gpu_seconds * p.production_tokens / p.busy_gpu_seconds
                for p in pools
                if p.busy_gpu_seconds > 0
            ),
            ZERO,
        )


def _over_capacity(projection: Projection) -> tuple[str, ...]:
    """The pools whose demand the projection could not serve in full."""
    scale = cast(Decimal, projection.demand_scale)  # a growth demand's scale is a number
    with localcontext(KPI_CONTEXT):
        return tuple(
            before.pool
            for before, after in zip(projection.measured_pools, projection.pools, strict=True)
            if after.std_gpu_seconds < before.std_gpu_seconds * scale
        )
