"""The measured period a scenario starts from, and its measured TFOM."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from flywheel.domain.kpis import ZERO, PoolInputs, kpis_compute
from flywheel.domain.tfom import (
    DEFAULT_BASELINE_TEF,
    FactoryCosts,
    PoolTfomInputs,
    Tfom,
    tfom_compute,
)


@dataclass(frozen=True, kw_only=True)
class Baseline:
    """A measured period: every pool's TFOM inputs, the factory costs and revenue items."""

    start: datetime
    end: datetime
    pools: tuple[PoolTfomInputs, ...]
    factory_costs: FactoryCosts
    minimum_shortfall: Decimal = ZERO  # money over the period, held in projections
    sla_credits: Decimal = ZERO  # money over the period, held in projections
    # The ledger's revenue minus the rating's over the closed months in it (credit notes,
    # breakage, line rounding; kpis.md Tie-out), held in projections.
    revenue_tie_out: Decimal = ZERO
    # The credit notes (negative) and breakage dated in it outside those months, held too.
    revenue_dated: Decimal = ZERO
    baseline_tef: Decimal = DEFAULT_BASELINE_TEF
    scope: str = "factory"
    # Pools in service left out for want of a cost model (their slugs): the figures cover
    # the others, and say so.
    uncosted: tuple[str, ...] = ()


def measured_tfom(baseline: Baseline) -> Tfom:
    """The TFOM of the period as measured (what tfom_measure gives for the same inputs)."""
    return baseline_tfom(baseline, [p.pool for p in baseline.pools], baseline.pools, ZERO)


def baseline_tfom(
    baseline: Baseline,
    pools: Sequence[PoolInputs],
    items: Sequence[PoolTfomInputs],
    lever_monthly_cost: Decimal,
) -> Tfom:
    kpis = kpis_compute(scope=baseline.scope, start=baseline.start, end=baseline.end, pools=pools)
    costs = baseline.factory_costs
    if lever_monthly_cost:
        costs = FactoryCosts(
            staff_per_month=costs.staff_per_month,
            sga_per_month=costs.sga_per_month + lever_monthly_cost,
        )
    return tfom_compute(
        kpis=kpis,
        pools=items,
        factory_costs=costs,
        minimum_shortfall=baseline.minimum_shortfall,
        sla_credits=baseline.sla_credits,
        baseline_tef=baseline.baseline_tef,
        revenue_tie_out=baseline.revenue_tie_out,
        revenue_dated=baseline.revenue_dated,
    )
