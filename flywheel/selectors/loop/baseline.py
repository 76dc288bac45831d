"""The measured baseline of a period, and the hour it is kept for the simulator."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from decimal import Decimal

from django.core.cache import cache

from flywheel.domain.kpis import ratio_of
from flywheel.domain.loop.baseline import Baseline
from flywheel.domain.tfom import DEFAULT_BASELINE_TEF, FactoryCosts, PoolTfomInputs
from flywheel.selectors.measurement import FactoryData, kpi_read
from flywheel.selectors.revenue import revenue_dated, revenue_tie_out
from flywheel.selectors.tfom import (
    cost_models_in_force,
    engine_cost_model,
    factory_costs_in_force,
    measured_energy,
)
from portal.errors import FieldError
from portal.periods import Period

ZERO = Decimal(0)


def baseline_get(
    *,
    start: datetime,
    end: datetime,
    data: FactoryData | None = None,
    baseline_tef: Decimal = DEFAULT_BASELINE_TEF,
) -> Baseline:
    """The factory's measured period as the scenario engine needs it: each pool's KPI sums
    with its cost model in force at `start` and its DCGM energy, the factory costs, minimum
    shortfalls, SLA credits, the ledger's tie-out and dated documents (the same inputs as `tfom_measure`).
    A pool in service without a cost model is left out and named in `uncosted`, the rest
    computed; FieldError naming `cost_model` when no pool in service has one."""
    data = data if data is not None else kpi_read(Period(start, end))
    cost_models = cost_models_in_force(at=start, pool_ids=sorted(data.pools))
    ids = [i for i in sorted(data.pools) if i in cost_models]
    # Without one, a pool out of service all period adds nothing: only one in service is.
    uncosted = tuple(
        data.pools[i].slug
        for i in sorted(data.pools)
        if i not in cost_models and data.in_service(i, start, end)
    )
    if uncosted and not any(data.in_service(i, start, end) for i in ids):
        raise FieldError("cost_model", _uncosted_message(uncosted, start))
    energy = measured_energy(pool_ids=ids, start=start, end=end)
    pools = []
    for pool_id in ids:
        pool = data.pool_inputs(pool_id, start, end)
        kwh, covered = energy.get(pool_id, (None, None))
        coverage = None
        if covered is not None and pool.calendar_gpu_seconds > 0:
            coverage = min(Decimal(1), ratio_of(covered, pool.calendar_gpu_seconds))
        pools.append(
            PoolTfomInputs(
                pool=pool,
                cost_model=engine_cost_model(cost_models[pool_id]),
                measured_gpu_energy_kwh=kwh,
                measured_energy_coverage=coverage,
            )
        )
    shortfall, credits = data.revenue_adjustments(start=start, end=end)
    recorded = factory_costs_in_force(at=start)
    return Baseline(
        start=start,
        end=end,
        pools=tuple(pools),
        factory_costs=FactoryCosts(
            staff_per_month=recorded.staff_per_month if recorded else ZERO,
            sga_per_month=recorded.sga_per_month if recorded else ZERO,
        ),
        minimum_shortfall=shortfall,
        sla_credits=credits,
        baseline_tef=baseline_tef,
        revenue_tie_out=revenue_tie_out(data=data, start=start, end=end),
        revenue_dated=revenue_dated(start=start, end=end),
        uncosted=uncosted,
    )


def _uncosted_message(slugs: tuple[str, ...], at: datetime) -> str:
    return (
        f"pool {', '.join(slugs)} has no cost model in force at "
        f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC: add one (POST /api/v1/cost-models)"
    )


def uncosted_json(*, pools: tuple[str, ...], start: datetime) -> dict | None:
    """What a diagnosis or scenario says of the pools it left out for want of a cost model
    in force at `start`: their slugs and why (None when every pool in service is costed)."""
    if not pools:
        return None
    return {
        "pools": list(pools),
        "message": _uncosted_message(pools, start)
        + "; until then every figure here covers the other pools only",
    }


BASELINE_TTL = 3600  # seconds a page's measured period is kept for its slider moves


def baseline_remember(baseline: Baseline) -> str:
    """Keep a measured period for an hour under a random key (the flywheel page passes it
    with each scenario, so moving a slider does not measure the period again)."""
    key = secrets.token_urlsafe(16)  # 22 characters, as BASELINE_KEY says
    cache.set(f"flywheel:baseline:{key}", baseline, BASELINE_TTL)
    return key


BASELINE_KEY = re.compile(r"^[A-Za-z0-9_-]{22}\Z")  # what baseline_remember issues


def baseline_recall(*, key: str, start: datetime, end: datetime) -> Baseline | None:
    if not BASELINE_KEY.fullmatch(key or ""):  # a key we issued, or nothing to look up
        return None
    baseline = cache.get(f"flywheel:baseline:{key}")
    if isinstance(baseline, Baseline) and baseline.start == start and baseline.end == end:
        return baseline
    return None
