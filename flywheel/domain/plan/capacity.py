"""The capacity plan in money (kpis.md 6c): the demand to plan for per model and month, and
per month of the horizon the placement (placement.py), the GPUs needed, installed, to add or
release and when to order them, and the month's COGS, revenue, EBITDA and margin by the
section-5 formulas with the planned busy GPU-seconds.

Demand: the forecast's daily production at its 80% upper band (or the quantile asked) /
86,400 × `peak_ratio`, the month's highest day; `peak_ratio` = p95 ÷ mean of the model's
5-minute rates (at least 1). Beyond the forecast's 90 days a day takes the value of the
same weekday in the forecast's last week (held flat, said so). The month's tokens are its
closed days as measured plus its forecast days' means.

Money per month and pool, N GPUs installed (with that month's additions), B the busy
GPU-seconds: each model's tokens over its placed GPUs at their R_ref (a model's tokens
split as its capacity is), at most N × seconds:
  energy = pool_energy_kwh(A = N × seconds, B) × price; depreciation = N × capex /
  depreciation_months × months; hosting = N × (hosting + network_storage) × months;
  revenue = Σ_models tokens × the model's realized revenue per token;
  COGS = depreciation + energy + hosting; opex = (staff + SG&A) × months;
  EBITDA = revenue − energy − hosting − opex; margin = (revenue − COGS) / revenue.
Pure: no Django.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT, ZERO, ratio_of
from flywheel.domain.plan.placement import Placement, PoolRoom, Rate, place
from flywheel.domain.tfom import SECONDS_PER_MONTH, CostModel, gpu_hour_cost, pool_energy_kwh

SECONDS_PER_DAY = 86_400
DEFAULT_LEAD_TIME_MONTHS = 3
DEFAULT_HORIZON_MONTHS = 12
QUANTILES = {"mean": 0, "p80": 2, "p95": 4}  # the index into a forecast point
WEEK = 7
# Seconds the placements of a whole plan may take: each month's steps share its part
# (kpis.md 6c: 50 models × 20 pools × 12 months within 10 s in the job). A step cut short
# keeps HiGHS' best placement and its proven gap, shown beside the month.
PLAN_SECONDS = 6.0
MIN_STEP_SECONDS = 0.4


def month_add(month: date, months: int) -> date:
    """The first day of the month `months` after (or before) `month`'s."""
    index = month.year * 12 + month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def month_days(month: date) -> int:
    return (month_add(month, 1) - month).days


def peak_ratio(rates: Sequence[float]) -> Decimal:
    """p95 ÷ mean of a model's 5-minute rates (buckets without traffic count as 0), at least
    1; 1 without traffic. The p95 is numpy's linear one."""
    if not rates or not any(rates):
        return Decimal(1)
    ordered = sorted(rates)
    position = 0.95 * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    p95 = ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    mean = sum(ordered) / len(ordered)
    return max(Decimal(1), Decimal(repr(p95)) / Decimal(repr(mean)))


@dataclass(frozen=True)
class MonthDemand:
    """A model's demand in a month: the peak tok/s to plan for and the tokens it makes."""

    peak_tok_s: Decimal
    tokens: Decimal
    held_flat: bool = False  # some of its days lie beyond the forecast


def month_demands(
    *,
    history_start: date,
    history: Sequence[float],
    forecast_start: date,
    points: Sequence[Sequence[float]],
    months: Sequence[date],
    ratio: Decimal,
    quantile: str = "p80",
) -> dict[date, MonthDemand]:
    """Per month asked, the peak tok/s to plan for (its highest future day at the quantile
    / 86,400 × ratio) and its tokens (closed days as measured + forecast means)."""
    band = QUANTILES[quantile]
    horizon_end = forecast_start + timedelta(days=len(points))
    out = {}
    for month in months:
        first, end = month, month_add(month, 1)
        tokens, peak, held = 0.0, 0.0, False
        day = first
        while day < end:
            if day < forecast_start:
                index = (day - history_start).days
                if 0 <= index < len(history):
                    tokens += history[index]
            elif points:
                index = (day - forecast_start).days
                if day >= horizon_end:
                    held = True
                    index = len(points) - WEEK + (index - len(points)) % WEEK
                    index = max(index, 0)
                point = points[index]
                tokens += point[0]
                peak = max(peak, point[band])
            day += timedelta(days=1)
        out[month] = MonthDemand(
            peak_tok_s=Decimal(repr(peak)) / SECONDS_PER_DAY * ratio,
            tokens=Decimal(repr(tokens)),
            held_flat=held,
        )
    return out


@dataclass(frozen=True)
class PlanPool:
    """A pool as the plan sees it: placement's view, its cost model, its lead time."""

    slug: str
    gpu_type: str
    installed: int
    cost_model: CostModel
    lead_time_months: int = DEFAULT_LEAD_TIME_MONTHS

    def room(self, *, installed: int, target_busy: Decimal) -> PoolRoom:
        return PoolRoom(
            slug=self.slug,
            gpu_type=self.gpu_type,
            installed=installed,
            cost_per_gpu_hour=gpu_hour_cost(cost_model=self.cost_model, busy_share=target_busy),
            capex_per_gpu=self.cost_model.capex_per_gpu,
        )


@dataclass
class PoolMonth:
    slug: str
    gpu_type: str
    installed: int  # at the month's start: today's GPUs and earlier additions
    needed: int
    add: int
    release: int  # installed (with additions) the placement leaves unused: headroom
    order_by: date | None  # when to order the additions: lead_time_months before the month
    busy_gpus: Decimal  # the planned busy GPU-seconds over the month's seconds
    cost_per_gpu_hour: Decimal
    capex_added: Decimal  # add × capex_per_gpu


@dataclass
class PlanMonth:
    month: date
    pools: list[PoolMonth]
    placement: Placement
    demand: dict[str, MonthDemand]
    tokens: Decimal
    revenue: Decimal
    energy_cost: Decimal
    depreciation: Decimal
    hosting: Decimal
    cogs: Decimal
    opex: Decimal
    ebitda: Decimal
    gross_margin: Decimal | None
    busy_gpus: Decimal
    notes: list[str] = field(default_factory=list)


def plan_months(
    *,
    months: Sequence[date],
    demand: Mapping[str, Mapping[date, MonthDemand]],
    revenue_per_token: Mapping[str, Decimal],
    pools: Sequence[PlanPool],
    rates: Sequence[Rate],
    monthly_opex: Decimal,
    target_busy: Decimal,
    allow_purchase: bool = True,
) -> list[PlanMonth]:
    """The plan, month by month: each month placed on the GPUs installed then (today's and
    the earlier months' additions), adding where capex buys capacity cheapest."""
    installed = {pool.slug: pool.installed for pool in pools}
    time_limit = max(
        MIN_STEP_SECONDS, PLAN_SECONDS / max(1, len(months)) / (3 if allow_purchase else 2)
    )
    out = []
    for month in months:
        rooms = [
            pool.room(installed=installed[pool.slug], target_busy=target_busy) for pool in pools
        ]
        peaks = {model: by_month[month].peak_tok_s for model, by_month in demand.items()}
        placement = place(
            demand=peaks, pools=rooms, rates=rates, target_busy=target_busy,
            allow_purchase=allow_purchase, time_limit=time_limit,
        )  # fmt: skip
        month_demand = {model: by_month[month] for model, by_month in demand.items()}
        plan = _month_money(
            month=month, placement=placement, demand=month_demand, pools=pools, rooms=rooms,
            installed=installed, rates=rates, revenue_per_token=revenue_per_token,
            monthly_opex=monthly_opex,
        )  # fmt: skip
        for pool in pools:
            installed[pool.slug] += placement.added.get(pool.slug, 0)
        out.append(plan)
    return out


def _month_money(
    *, month, placement, demand, pools, rooms, installed, rates, revenue_per_token, monthly_opex
) -> PlanMonth:
    seconds = Decimal(month_days(month) * SECONDS_PER_DAY)
    r_ref = {(rate.model, rate.pool): rate.r_ref for rate in rates}
    with localcontext(KPI_CONTEXT):
        full_rate = dict.fromkeys(demand, ZERO)  # Σ x × R_ref: the model's tok/s all busy
        for (model, pool), gpus in placement.gpus.items():
            full_rate[model] += gpus * r_ref[(model, pool)]
        busy = {pool.slug: ZERO for pool in pools}
        for (model, pool), gpus in placement.gpus.items():
            busy[pool] += demand[model].tokens * gpus / full_rate[model]
        energy = depreciation = hosting = busy_total = ZERO
        rows = []
        for pool, room in zip(pools, rooms, strict=True):
            before = installed[pool.slug]
            add = placement.added.get(pool.slug, 0)
            count = before + add
            available = count * seconds
            pool_busy = min(busy[pool.slug], available)
            cost = pool.cost_model
            energy += (
                pool_energy_kwh(
                    cost_model=cost, available_gpu_seconds=available, busy_gpu_seconds=pool_busy
                )
                * cost.electricity_price_per_kwh
            )
            depreciation += (
                available * cost.capex_per_gpu / (cost.depreciation_months * SECONDS_PER_MONTH)
            )
            monthly = cost.hosting_per_gpu_month + cost.network_storage_per_gpu_month
            hosting += available * monthly / SECONDS_PER_MONTH
            busy_total += pool_busy
            needed = placement.pool_gpus(pool.slug)
            rows.append(
                PoolMonth(
                    slug=pool.slug,
                    gpu_type=pool.gpu_type,
                    installed=before,
                    needed=needed,
                    add=add,
                    release=max(0, count - needed),
                    order_by=month_add(month, -pool.lead_time_months) if add else None,
                    busy_gpus=pool_busy / seconds,
                    cost_per_gpu_hour=room.cost_per_gpu_hour,
                    capex_added=add * cost.capex_per_gpu,
                )
            )
        tokens = sum((d.tokens for d in demand.values()), ZERO)
        revenue = sum(
            (d.tokens * revenue_per_token.get(model, ZERO) for model, d in demand.items()), ZERO
        )
        cogs = depreciation + energy + hosting
        opex = monthly_opex * seconds / SECONDS_PER_MONTH
        notes = []
        if any(d.held_flat for d in demand.values()):
            notes.append("beyond the forecast's 90 days: its last week held flat")
        if placement.gap:
            notes.append(
                f"placement within {placement.gap:.2%} of the optimum (the solver's time ran out)"
            )
        for model, short in sorted(placement.unserved.items()):
            notes.append(f"{model}: {short:,.0f} tok/s of its peak cannot be served")
        return PlanMonth(
            month=month,
            pools=rows,
            placement=placement,
            demand=dict(demand),
            tokens=tokens,
            revenue=revenue,
            energy_cost=energy,
            depreciation=depreciation,
            hosting=hosting,
            cogs=cogs,
            opex=opex,
            ebitda=revenue - energy - hosting - opex,
            gross_margin=ratio_of(revenue - cogs, revenue),
            busy_gpus=busy_total / seconds,
            notes=notes,
        )
