"""TFOM engine: maps KPIs and cost models to the financial figures (kpis.md sections 4-5).

Pure: imports no Django. Money is Decimal and stays unrounded (rounding is for
invoices and display); every division runs in KPI_CONTEXT (34 significant digits).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from decimal import Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT, ZERO, Kpis, PoolInputs, period_seconds, ratio_of
from portal.errors import FieldError

DEFAULT_BASELINE_TEF = Decimal("0.30")  # industry TEF, kpis.md section 5


MIN_BASELINE_TEF = Decimal("0.01")


def baseline_tef_parse(value: str | None) -> Decimal:
    """`baseline_tef` as a request gives it: a number in [0.01, 1] (kpis.md section 5: the
    smaller ones overflow equivalent GPUs), the default when absent; FieldError otherwise."""
    if not value:
        return DEFAULT_BASELINE_TEF
    try:
        baseline = Decimal(value)
    except ArithmeticError:
        baseline = None
    if baseline is None or not baseline.is_finite() or not MIN_BASELINE_TEF <= baseline <= 1:
        raise FieldError("baseline_tef", "must be a number in [0.01, 1], e.g. 0.30")
    return baseline


DEFAULT_IDLE_POWER_RATIO = Decimal("0.3")

DEFAULT_NODE_POWER_FACTOR = Decimal("1.8")  # DGX node power per GPU over the GPU's own

MEASURED_ENERGY_MIN_COVERAGE = Decimal("0.95")

_SECONDS_PER_DAY = 86_400

_SECONDS_PER_HOUR = 3_600

SECONDS_PER_YEAR = 365 * _SECONDS_PER_DAY  # annualize(x) = x * 365 days / days(P)

SECONDS_PER_MONTH = SECONDS_PER_YEAR // 12  # months(P) = days(P) / (365 / 12)

_MILLION = 1_000_000

ANNUALIZE_MIN_SECONDS = 7 * _SECONDS_PER_DAY  # ui.md: shorter periods are not annualized


def annualized_withheld(*, start: datetime, end: datetime) -> str | None:
    """Why the annualized figures (ROI, payback, asset turnover) of [start, end) are not
    shown (ui.md: from less than 7 days of data they are withheld), or None."""
    seconds = (end - start).total_seconds()
    if seconds >= ANNUALIZE_MIN_SECONDS:
        return None
    return f"withheld: {seconds / 3600:,.0f} h of data are too few to annualize (7 days at least)"


@dataclass(frozen=True, kw_only=True)
class CostModel:
    """A pool's cost model, the version in force at the start of the period."""

    capex_per_gpu: Decimal  # money, all-in per GPU
    depreciation_months: int  # straight line
    power_kw_per_gpu: Decimal  # kW of IT power per GPU at full load, node share included
    pue: Decimal
    electricity_price_per_kwh: Decimal  # money per kWh
    hosting_per_gpu_month: Decimal  # money
    network_storage_per_gpu_month: Decimal  # money
    idle_power_ratio: Decimal = DEFAULT_IDLE_POWER_RATIO  # idle draw over full-load draw
    node_power_factor: Decimal = DEFAULT_NODE_POWER_FACTOR  # applied to measured GPU energy

    def __post_init__(self) -> None:
        if self.depreciation_months <= 0:
            raise ValueError("depreciation_months must be positive")
        if self.pue < 1:
            raise ValueError("pue must be at least 1")
        if not ZERO <= self.idle_power_ratio <= 1:
            raise ValueError("idle_power_ratio must be in [0, 1]")


@dataclass(frozen=True, kw_only=True)
class FactoryCosts:
    """Factory-level monthly costs in force at the start of the period."""

    staff_per_month: Decimal  # money
    sga_per_month: Decimal  # money


@dataclass(frozen=True, kw_only=True)
class PoolTfomInputs:
    """One pool's KPI sums, its cost model and, when scraped, its DCGM energy over the period."""

    pool: PoolInputs
    cost_model: CostModel
    measured_gpu_energy_kwh: Decimal | None = None  # Σ DCGM GPU energy over the period, kWh
    measured_energy_coverage: Decimal | None = None  # share of the pool's GPU-seconds it covers


@dataclass(frozen=True, kw_only=True)
class Tfom(Kpis):
    """Every figure of `GET /api/v1/tfom`: the KPI figures plus the financial mapping."""

    revenue: Decimal
    energy_kwh: Decimal
    energy_cost: Decimal
    depreciation: Decimal
    hosting: Decimal
    cogs: Decimal
    gross_profit: Decimal
    gross_margin: Decimal | None
    opex: Decimal
    ebitda: Decimal
    ebit: Decimal
    roi: Decimal | None
    payback_years: Decimal | None  # None when EBITDA <= 0
    asset_turnover: Decimal | None
    cost_per_million_tokens: Decimal | None  # per million produced output tokens
    revenue_per_million_tokens: Decimal | None  # per million paid output tokens
    daily_token_value_per_gpu: Decimal | None
    tokens_per_kwh: Decimal | None  # output tokens per facility kWh
    baseline_tef: Decimal
    equivalent_gpus: Decimal
    avoided_capex: Decimal
    total_cost: Decimal  # COGS + opex
    capex_invested: Decimal
    cost_per_million_paid_tokens: Decimal | None
    # Tie-out (kpis.md): revenue is the ledger's for the closed months in the period and the
    # rating's elsewhere; `revenue_rated` is the unrounded rating of the whole period,
    # `revenue_dated` the credit notes (negative) and breakage dated in it outside the closed
    # months, and `revenue_tie_out` = revenue - revenue_rated - revenue_dated (the ledger's
    # rounding, late lines and dated documents of the closed months).
    revenue_rated: Decimal
    revenue_dated: Decimal
    revenue_tie_out: Decimal


def pool_energy_kwh(
    *,
    cost_model: CostModel,
    available_gpu_seconds: Decimal,
    busy_gpu_seconds: Decimal,
    measured_gpu_energy_kwh: Decimal | None = None,
    measured_energy_coverage: Decimal | None = None,
) -> Decimal:
    """Return a pool's facility energy in kWh (PUE included): DCGM-measured at ≥ 95% coverage, else modelled."""
    with localcontext(KPI_CONTEXT):
        if (
            measured_gpu_energy_kwh is not None
            and measured_energy_coverage is not None
            and measured_energy_coverage >= MEASURED_ENERGY_MIN_COVERAGE
        ):
            # DCGM sees the GPU only; the node factor adds CPUs, NICs and fans.
            return measured_gpu_energy_kwh * cost_model.node_power_factor * cost_model.pue
        idle = available_gpu_seconds - busy_gpu_seconds
        # Busy GPUs draw full power, healthy idle ones a share of it, unhealthy ones none.
        powered = busy_gpu_seconds + cost_model.idle_power_ratio * idle
        return cost_model.power_kw_per_gpu * cost_model.pue * powered / _SECONDS_PER_HOUR


HOURS_PER_MONTH = SECONDS_PER_MONTH // _SECONDS_PER_HOUR  # 730, the TFOM's month


def gpu_hour_cost(*, cost_model: CostModel, busy_share: Decimal) -> Decimal:
    """What a healthy GPU-hour costs when busy `busy_share` of it (kpis.md 3c at 0, 6c at
    `target_busy`): `capex_per_gpu / depreciation_months / 730 + (hosting +
    network_storage) / 730` plus its energy as the TFOM models it (pool_energy_kwh: full
    power while busy, `idle_power_ratio` of it otherwise, × pue × the price per kWh).
    Unrounded money per GPU-hour."""
    with localcontext(KPI_CONTEXT):
        depreciation = cost_model.capex_per_gpu / (cost_model.depreciation_months * HOURS_PER_MONTH)
        monthly = cost_model.hosting_per_gpu_month + cost_model.network_storage_per_gpu_month
        kwh = pool_energy_kwh(
            cost_model=cost_model,
            available_gpu_seconds=Decimal(_SECONDS_PER_HOUR),
            busy_gpu_seconds=_SECONDS_PER_HOUR * busy_share,
        )
        return depreciation + monthly / HOURS_PER_MONTH + kwh * cost_model.electricity_price_per_kwh


def tfom_compute(
    *,
    kpis: Kpis,
    pools: Sequence[PoolTfomInputs],
    factory_costs: FactoryCosts,
    minimum_shortfall: Decimal,
    sla_credits: Decimal,
    baseline_tef: Decimal = DEFAULT_BASELINE_TEF,
    revenue_tie_out: Decimal = ZERO,
    revenue_dated: Decimal = ZERO,
) -> Tfom:
    """Map a scope's KPIs and its pools' cost models to every TFOM figure over the KPIs' period.
    `revenue_tie_out`: the ledger's revenue minus the rating's for the closed months in it;
    `revenue_dated`: the credit notes (negative) and breakage the ledger dates in the period
    outside those months."""
    if baseline_tef <= 0:
        raise ValueError("baseline_tef must be positive")
    if minimum_shortfall < 0 or sla_credits < 0:
        raise ValueError("minimum_shortfall and sla_credits must be non-negative")
    calendar = sum((p.pool.calendar_gpu_seconds for p in pools), ZERO)
    if calendar != kpis.calendar_gpu_seconds:
        raise ValueError("pools do not add up to the KPIs' calendar GPU-seconds")
    seconds = period_seconds(start=kpis.from_, end=kpis.to)
    with localcontext(KPI_CONTEXT):
        # Each figure is arranged to divide once, last: installed GPUs (C / seconds) times
        # months(P) (seconds / SECONDS_PER_MONTH) is C / SECONDS_PER_MONTH, exactly.
        energy_kwh = energy_cost = depreciation = hosting = capex_gpu_seconds = ZERO
        equivalent_gpus = avoided_capex = ZERO
        for item in pools:
            pool, cost = item.pool, item.cost_model
            pool_kwh = pool_energy_kwh(
                cost_model=cost,
                available_gpu_seconds=pool.available_gpu_seconds,
                busy_gpu_seconds=pool.busy_gpu_seconds,
                measured_gpu_energy_kwh=item.measured_gpu_energy_kwh,
                measured_energy_coverage=item.measured_energy_coverage,
            )
            energy_kwh += pool_kwh
            energy_cost += pool_kwh * cost.electricity_price_per_kwh
            depreciation += (
                pool.calendar_gpu_seconds
                * cost.capex_per_gpu
                / (cost.depreciation_months * SECONDS_PER_MONTH)
            )
            monthly_per_gpu = cost.hosting_per_gpu_month + cost.network_storage_per_gpu_month
            hosting += pool.calendar_gpu_seconds * monthly_per_gpu / SECONDS_PER_MONTH
            capex_gpu_seconds += pool.calendar_gpu_seconds * cost.capex_per_gpu
            pool_equivalent, pool_avoided = _equivalent_capacity(
                pool=pool, cost_model=cost, seconds=seconds, baseline_tef=baseline_tef
            )
            equivalent_gpus += pool_equivalent
            avoided_capex += pool_avoided

        revenue_rated = kpis.realized_revenue + minimum_shortfall - sla_credits
        revenue = revenue_rated + revenue_dated + revenue_tie_out
        cogs = depreciation + energy_cost + hosting
        gross_profit = revenue - cogs
        monthly_opex = factory_costs.staff_per_month + factory_costs.sga_per_month
        opex = monthly_opex * seconds / SECONDS_PER_MONTH
        total_cost = cogs + opex
        ebitda = revenue - energy_cost - hosting - opex
        ebit = ebitda - depreciation
        # capex_invested = Σ installed GPUs x capex = capex_gpu_seconds / seconds, so
        # annualize(x) / capex_invested = x * SECONDS_PER_YEAR / capex_gpu_seconds.
        capex_invested = capex_gpu_seconds / seconds
        produced_millions = Decimal(kpis.output_tokens) / _MILLION
        paid_millions = Decimal(kpis.paid_output_tokens) / _MILLION
        kpi_figures = {f.name: getattr(kpis, f.name) for f in fields(Kpis)}
        return Tfom(
            **kpi_figures,
            revenue=revenue,
            energy_kwh=energy_kwh,
            energy_cost=energy_cost,
            depreciation=depreciation,
            hosting=hosting,
            cogs=cogs,
            gross_profit=gross_profit,
            gross_margin=ratio_of(gross_profit, revenue),
            opex=opex,
            ebitda=ebitda,
            ebit=ebit,
            roi=ratio_of(ebit * SECONDS_PER_YEAR, capex_gpu_seconds),
            payback_years=(
                ratio_of(capex_gpu_seconds, ebitda * SECONDS_PER_YEAR) if ebitda > 0 else None
            ),
            asset_turnover=ratio_of(revenue * SECONDS_PER_YEAR, capex_gpu_seconds),
            cost_per_million_tokens=ratio_of(total_cost, produced_millions),
            revenue_per_million_tokens=ratio_of(revenue, paid_millions),
            # revenue / (C / seconds) GPUs / (seconds / 86,400) days
            daily_token_value_per_gpu=ratio_of(
                revenue * _SECONDS_PER_DAY, kpis.calendar_gpu_seconds
            ),
            tokens_per_kwh=ratio_of(Decimal(kpis.output_tokens), energy_kwh),
            baseline_tef=baseline_tef,
            equivalent_gpus=equivalent_gpus,
            avoided_capex=avoided_capex,
            total_cost=total_cost,
            capex_invested=capex_invested,
            cost_per_million_paid_tokens=ratio_of(total_cost, paid_millions),
            revenue_rated=revenue_rated,
            revenue_dated=revenue_dated,
            revenue_tie_out=revenue_tie_out,
        )


def _equivalent_capacity(
    *, pool: PoolInputs, cost_model: CostModel, seconds: Decimal, baseline_tef: Decimal
) -> tuple[Decimal, Decimal]:
    """Return a pool's (equivalent GPUs, avoided capex) against the baseline TEF."""
    if pool.calendar_gpu_seconds == 0:
        return ZERO, ZERO  # no installed GPUs: nothing to scale
    with localcontext(KPI_CONTEXT):
        # N * TEF / TEF_0 with N = C / seconds and TEF = std / C
        equivalent = pool.std_gpu_seconds / (seconds * baseline_tef)
        # TEF <= TEF_0, compared without dividing: no capex avoided, never negative
        if pool.std_gpu_seconds <= baseline_tef * pool.calendar_gpu_seconds:
            return equivalent, ZERO
        # (equivalent - N) * capex, with the division by seconds last
        surplus = pool.std_gpu_seconds / baseline_tef - pool.calendar_gpu_seconds
        return equivalent, surplus * cost_model.capex_per_gpu / seconds
