"""Projecting a measured period with lever multipliers and direct factor targets, under
the demand a scenario states (kpis.md section 6, step 3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT, ZERO, PoolInputs, period_seconds
from flywheel.domain.loop.baseline import Baseline, baseline_tfom, measured_tfom
from flywheel.domain.loop.demand import MEASURED, Demand, per_month
from flywheel.domain.loop.factors import CAPPED, FACTORS, ONE
from flywheel.domain.loop.levers import (
    MONTHS_OF_COST,
    LeverSpec,
    gpus_withdrawn,
    lever_multipliers,
    pool_multipliers,
)
from flywheel.domain.loop.pools import (
    PoolCapacity,
    demand_serve,
    pool_capacity,
    pools_withdraw,
    project_pools,
)
from flywheel.domain.tfom import PoolTfomInputs, Tfom, pool_energy_kwh


@dataclass(frozen=True, kw_only=True)
class Projection:
    """A scenario's outcome: the measured and the projected TFOM of the same period."""

    start: datetime
    end: datetime
    measured: Tfom
    tfom: Tfom
    levers: tuple[str, ...] = ()
    targets: Mapping[str, Decimal] = field(default_factory=dict)
    estimate: str = "typical"
    one_time_cost: Decimal = ZERO
    monthly_cost: Decimal = ZERO
    pools: tuple[PoolInputs, ...] = ()  # each pool's projected sums
    measured_pools: tuple[PoolInputs, ...] = ()  # each pool's measured sums, in that order
    demand: Demand = MEASURED
    demand_scale: Decimal | None = ONE  # the demand served, × the measured production
    withdrawn: Mapping[str, int] = field(default_factory=dict)  # pool → GPUs out of service

    @property
    def capacity(self) -> tuple[PoolCapacity, ...]:
        """Each pool's GPUs before and after (installed, busy, headroom, released)."""
        seconds = period_seconds(start=self.start, end=self.end)
        return tuple(
            pool_capacity(
                measured=before,
                projected=after,
                seconds=seconds,
                withdrawn=self.withdrawn.get(before.pool, 0),
                is_bounded=self.demand.is_bounded,
            )
            for before, after in zip(self.measured_pools, self.pools, strict=True)
        )

    @property
    def cost(self) -> Decimal:
        return self.one_time_cost + MONTHS_OF_COST * self.monthly_cost

    def per_month(self, amount: Decimal) -> Decimal:
        """`amount` per month: the period's when it is a calendar month (demand.per_month)."""
        return per_month(amount, start=self.start, end=self.end)

    @property
    def ebitda_per_month(self) -> Decimal:
        return self.per_month(self.tfom.ebitda)

    @property
    def ebitda_gain_per_month(self) -> Decimal:
        return self.per_month(self.tfom.ebitda - self.measured.ebitda)


def project(
    *,
    baseline: Baseline,
    levers: Sequence[LeverSpec] = (),
    targets: Mapping[str, Decimal] | None = None,
    estimate: str = "typical",
    measured: Tfom | None = None,
    demand: Demand = MEASURED,
    month: int | None = None,
) -> Projection:
    """Project the period with `targets` (factor → value, replacing the measured value)
    and `levers` (multiplying it, factory-wide or in their pool; withdrawing GPUs), each
    multiplier at `estimate`, under `demand`: bounded (measured, growth in `month`, by
    default the last of the series), production is the demand served up to capacity and
    occupancy follows from it (a β target or multiplier has nothing to act on until demand
    grows); unlimited, production follows the factors."""
    targets = dict(targets or {})
    for factor, value in targets.items():
        if factor not in FACTORS:
            raise ValueError(f"unknown factor {factor!r}")
        if factor in CAPPED and not ZERO <= value <= ONE:
            raise ValueError(f"{factor}: a target must be between 0 and 1")
        if value < 0:
            raise ValueError(f"{factor}: a target must not be negative")
    measured = measured if measured is not None else measured_tfom(baseline)
    multipliers = lever_multipliers(levers, estimate)
    scoped = pool_multipliers(levers, estimate)
    moving = dict(targets)
    if demand.is_bounded:  # occupancy is what serving the demand takes
        moving.pop("occupancy", None)
        multipliers.pop("occupancy", None)
        scoped = {pool: _without(factors, "occupancy") for pool, factors in scoped.items()}
    levels: dict[str, Decimal | None] = {}  # the factors moved, at their projected level
    with localcontext(KPI_CONTEXT):
        for factor in FACTORS:
            if factor not in moving and factor not in multipliers:
                continue
            level = moving.get(factor, getattr(measured, factor))
            if level is not None and factor in multipliers:
                level = level * multipliers[factor]
                if factor in CAPPED:
                    level = min(level, ONE)
            levels[factor] = level
    withdrawn = gpus_withdrawn(levers)
    seconds = period_seconds(start=baseline.start, end=baseline.end)
    pools = project_pools(baseline, levels, measured, scoped)
    pools = pools_withdraw(pools, withdrawn, seconds, keeps_busy=demand.is_bounded)
    scale = demand.scale() if month is None else demand.scale(month)
    measured_pools = tuple(item.pool for item in baseline.pools)
    if scale is not None:
        pools = demand_serve(measured_pools, pools, scale)
    monthly = sum((lever.monthly_cost for lever in levers), ZERO)
    projected_inputs = [
        replace(
            item,
            pool=pool,
            measured_gpu_energy_kwh=_scaled_energy(item, pool),
        )
        for item, pool in zip(baseline.pools, pools, strict=True)
    ]
    tfom = baseline_tfom(baseline, pools, projected_inputs, monthly)
    return Projection(
        start=baseline.start,
        end=baseline.end,
        measured=measured,
        tfom=tfom,
        levers=tuple(lever.slug for lever in levers),
        targets=targets,
        estimate=estimate,
        one_time_cost=sum((lever.one_time_cost for lever in levers), ZERO),
        monthly_cost=monthly,
        pools=tuple(pools),
        measured_pools=measured_pools,
        demand=demand,
        demand_scale=scale,
        withdrawn=withdrawn,
    )


def _without(factors: Mapping[str, Decimal], factor: str) -> dict[str, Decimal]:
    return {name: value for name, value in factors.items() if name != factor}


def _scaled_energy(item: PoolTfomInputs, projected: PoolInputs) -> Decimal | None:
    """DCGM-measured energy scaled by the energy formula's ratio, projected over measured."""
    if item.measured_gpu_energy_kwh is None:
        return None
    before = pool_energy_kwh(
        cost_model=item.cost_model,
        available_gpu_seconds=item.pool.available_gpu_seconds,
        busy_gpu_seconds=item.pool.busy_gpu_seconds,
    )
    after = pool_energy_kwh(
        cost_model=item.cost_model,
        available_gpu_seconds=projected.available_gpu_seconds,
        busy_gpu_seconds=projected.busy_gpu_seconds,
    )
    if before == after:
        return item.measured_gpu_energy_kwh
    if before == 0:
        return None  # nothing to scale: the formula takes over
    with localcontext(KPI_CONTEXT):
        return item.measured_gpu_energy_kwh * after / before
