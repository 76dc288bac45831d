"""TFOM of a scope and period: measured KPIs, the cost models in force and DCGM energy,
mapped by the pure engine `flywheel.tfom` (kpis.md sections 4-5).

Cost models and factory costs are the versions in force at the period's start. A pool's
facility energy is its DCGM-measured GPU energy when that covers at least 95% of its
GPU-seconds in the period, else the nameplate model. For one pool's scope, the
factory-level items are allocated so that the pools add up to the factory: opex by
calendar GPU-seconds, minimum shortfalls, SLA credits and the ledger's dated documents by
realized revenue.

Revenue (kpis.md section 5) is the ledger's for whole closed months (the tie-out), and
elsewhere the rating's with the month's minimum shortfall and SLA credits, plus the credit
notes (negative) and breakage the ledger dates inside the period
(flywheel.selectors.revenue).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext
from operator import attrgetter
from typing import Any

from django.conf import settings
from django.db.models import Count, Sum

from flywheel.domain import tfom as engine
from flywheel.domain.kpis import KPI_CONTEXT, PoolInputs, kpis_compute
from flywheel.domain.tfom import DEFAULT_BASELINE_TEF, Tfom
from flywheel.models import CostModel, FactoryCosts, KpiSnapshot
from flywheel.selectors.kpis import kpis_json
from flywheel.selectors.measurement import FACTORY, FactoryData, kpi_read
from flywheel.selectors.revenue import revenue_dated, revenue_tie_out
from metering.selectors.telemetry import gpu_energy_hour_list
from metering.selectors.usage import first_metered_hour
from portal.errors import FieldError
from portal.money import money_str, round_half_up
from portal.periods import Period, is_part_of_month, month_start, months_before, next_month
from portal.versions import version_in_force, versions_in_force

ZERO = Decimal(0)


UNIT_PRICE = Decimal("1e-10")  # money per million tokens, as in the price book

_JOULES_PER_KWH = Decimal(3_600_000)

_SECONDS_PER_HOUR = 3600

_MICROSECOND = timedelta(microseconds=1)

# Money keys of GET /api/v1/tfom: decimal strings in cents; prices per million tokens to
# ten decimals. Every other figure follows the KPI rules (ratios and rates as numbers).
MONEY_KEYS = (
    "revenue",
    "energy_cost",
    "depreciation",
    "hosting",
    "cogs",
    "gross_profit",
    "opex",
    "ebitda",
    "ebit",
    "daily_token_value_per_gpu",
    "avoided_capex",
    "total_cost",
    "capex_invested",
    "revenue_rated",
    "revenue_dated",
    "revenue_tie_out",
)

UNIT_PRICE_KEYS = (
    "cost_per_million_tokens",
    "revenue_per_million_tokens",
    "cost_per_million_paid_tokens",
)


def cost_models_in_force(
    *, at: datetime, pool_ids: Iterable[int] | None = None
) -> dict[int, CostModel]:
    """The cost model version in force at `at` per pool id (pools without one are absent)."""
    versions = CostModel.objects.all()
    if pool_ids is not None:
        versions = versions.filter(pool_id__in=list(pool_ids))
    return versions_in_force(versions, at=at, series=attrgetter("pool_id"))


def factory_costs_in_force(*, at: datetime) -> FactoryCosts | None:
    """The factory costs version in force at `at`, if any was ever recorded by then."""
    return version_in_force(FactoryCosts.objects.all(), at=at)


def engine_cost_model(version: CostModel) -> engine.CostModel:
    return engine.CostModel(
        capex_per_gpu=version.capex_per_gpu,
        depreciation_months=version.depreciation_months,
        power_kw_per_gpu=version.power_kw_per_gpu,
        pue=version.pue,
        electricity_price_per_kwh=version.electricity_price_per_kwh,
        hosting_per_gpu_month=version.hosting_per_gpu_month,
        network_storage_per_gpu_month=version.network_storage_per_gpu_month,
        idle_power_ratio=version.idle_power_ratio,
        node_power_factor=version.node_power_factor,
    )


def measured_energy(
    *, pool_ids: list[int], start: datetime, end: datetime
) -> dict[int, tuple[Decimal, Decimal]]:
    """Per pool: (DCGM GPU energy in kWh, GPU-seconds it covers) over the hours starting in
    [start, end). A GPU-hour with an energy increase counts as covered; a GPU's first
    scrape is a baseline and adds none."""
    rows = (
        gpu_energy_hour_list(pool_ids=pool_ids, start=start, end=end)
        .values("pool_id")
        .annotate(energy=Sum("energy_j"), gpu_hours=Count("id"))
    )
    with localcontext(KPI_CONTEXT):
        return {
            row["pool_id"]: (
                Decimal(row["energy"]) / _JOULES_PER_KWH,
                Decimal(row["gpu_hours"] * _SECONDS_PER_HOUR),
            )
            for row in rows
        }


def _share(part: Decimal, whole: Decimal) -> Decimal:
    if whole == 0:
        return ZERO
    with localcontext(KPI_CONTEXT):
        return part / whole


def tfom_measure(
    *,
    scope: str,
    start: datetime,
    end: datetime,
    baseline_tef: Decimal = DEFAULT_BASELINE_TEF,
    data: FactoryData | None = None,
) -> Tfom:
    """Every TFOM figure of the factory or one pool (by slug) over [start, end), from the
    database (or `data`, already loaded over a range holding the period). Raises FieldError
    naming the pool when a pool in service has no cost model in force when its service in
    the period begins, or the scope when it is unknown."""
    if baseline_tef <= 0:
        raise FieldError("baseline_tef", "must be positive")
    data = data if data is not None else kpi_read(Period(start, end))
    if not (data.start <= start < end <= data.end):
        raise ValueError("period outside the loaded range")
    all_ids = sorted(data.pools)
    ids = _scope_ids(scope, data)
    in_service, cost_models = _costed(data, ids, start, end)
    inputs: dict[int, PoolInputs] = {i: data.pool_inputs(i, start, end) for i in all_ids}
    pools = _pool_tfom_inputs(inputs, in_service, cost_models, start, end)
    kpis = kpis_compute(scope=scope, start=start, end=end, pools=[inputs[i] for i in ids])
    staff, sga, shortfall, credits, dated = _allocated(scope, ids, inputs, data, start, end)
    return engine.tfom_compute(
        kpis=kpis,
        pools=pools,
        factory_costs=engine.FactoryCosts(staff_per_month=staff, sga_per_month=sga),
        minimum_shortfall=shortfall,
        sla_credits=credits,
        baseline_tef=baseline_tef,
        revenue_dated=dated,
        revenue_tie_out=revenue_tie_out(data=data, start=start, end=end)
        if scope == FACTORY
        else ZERO,
    )


def _scope_ids(scope: str, data: FactoryData) -> list[int]:
    """The pools of a scope: every pool for the factory, else the one named."""
    if scope == FACTORY:
        return sorted(data.pools)
    if scope in data.slugs:
        return [data.slugs[scope]]
    raise FieldError("scope", f"unknown scope {scope!r}: use 'factory' or a pool slug")


def _costed(data: FactoryData, ids: list[int], start: datetime, end: datetime):
    """The scope's pools in service in the period (their spans) and the cost model in force
    when each one's service in the period begins (kpis.md section 0); FieldError naming
    the pools without one."""
    in_service = {i: span for i in ids if (span := data.in_service(i, start, end))}
    cost_models = {}
    for pool_id, span in in_service.items():
        cost_models |= cost_models_in_force(at=span.start, pool_ids=[pool_id])
    missing = [data.pools[i].slug for i in in_service if i not in cost_models]
    if missing:
        at = min(in_service[data.slugs[slug]].start for slug in missing)
        raise FieldError(
            "cost_model",
            f"pool {', '.join(missing)} has no cost model in force at "
            f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC: add one (POST /api/v1/cost-models)",
        )
    return in_service, cost_models


def _pool_tfom_inputs(inputs, in_service, cost_models, start, end) -> list:
    """Each pool in service: its sums, its cost model, the GPU energy measured and the
    share of its calendar that measurement covers."""
    energy = measured_energy(pool_ids=list(in_service), start=start, end=end)
    pools = []
    for pool_id in in_service:
        pool = inputs[pool_id]
        kwh, covered = energy.get(pool_id, (None, None))
        coverage = None
        if covered is not None and pool.calendar_gpu_seconds > 0:
            coverage = min(Decimal(1), _share(covered, pool.calendar_gpu_seconds))
        pools.append(
            engine.PoolTfomInputs(
                pool=pool,
                cost_model=engine_cost_model(cost_models[pool_id]),
                measured_gpu_energy_kwh=kwh,
                measured_energy_coverage=coverage,
            )
        )
    return pools


def _allocated(scope, ids, inputs, data, start, end) -> tuple[Decimal, ...]:
    """Staff, SG&A, minimum shortfalls, SLA credits and the ledger's dated documents of the
    period: the factory's, or a pool's share (opex by calendar GPU time, revenue items by
    realized revenue)."""
    shortfall, credits = data.revenue_adjustments(start=start, end=end)
    dated = revenue_dated(start=start, end=end)
    recorded = factory_costs_in_force(at=start)
    staff = recorded.staff_per_month if recorded else ZERO
    sga = recorded.sga_per_month if recorded else ZERO
    if scope == FACTORY:
        return staff, sga, shortfall, credits, dated
    pool = inputs[ids[0]]
    calendar = sum((p.calendar_gpu_seconds for p in inputs.values()), ZERO)
    realized = sum((p.realized_revenue for p in inputs.values()), ZERO)
    by_capacity = _share(pool.calendar_gpu_seconds, calendar)
    by_revenue = _share(pool.realized_revenue, realized) if realized else by_capacity
    with localcontext(KPI_CONTEXT):
        return (
            staff * by_capacity,
            sga * by_capacity,
            shortfall * by_revenue,
            credits * by_revenue,
            dated * by_revenue,
        )


def tfom_json(tfom: Tfom) -> dict[str, Any]:
    """The figures of GET /api/v1/tfom: the KPI keys as `GET /api/v1/kpis` writes them, money
    as decimal strings (cents; prices per million tokens to ten decimals), every other
    figure as a number (null where its denominator is zero)."""
    out = kpis_json(tfom)
    for key in MONEY_KEYS:
        out[key] = money_str(amount=getattr(tfom, key), currency=settings.FACTORY_CURRENCY)
    for key in UNIT_PRICE_KEYS:
        out[key] = _money_string(getattr(tfom, key), UNIT_PRICE)
    out["currency"] = settings.FACTORY_CURRENCY
    return out


def _money_string(value: Decimal | None, unit: Decimal) -> str | None:
    if value is None:
        return None
    return str(round_half_up(amount=value, quantum=unit))


@dataclass(frozen=True)
class TrendMonth:
    """One month of the TFOM trend: the part of the month inside [data start, end)."""

    month: datetime  # the month's first instant
    start: datetime
    end: datetime
    tfom: Tfom | None  # None when a pool had no cost model in force
    error: str = ""
    source: str = "computed"  # "snapshot": KPI figures from the month's closed snapshot
    tef: Decimal | None = None
    tfi: Decimal | None = None

    @property
    def is_partial(self) -> bool:
        return is_part_of_month(self.month, start=self.start, end=self.end)


def tfom_trend_start(*, end: datetime, months: int = 12) -> datetime | None:
    """Where the monthly trend ending at `end` starts: the first metered hour, at most
    `months` months back (None when nothing was metered before `end`)."""
    first = first_metered_hour()
    if first is None or first >= end:
        return None
    return max(first, months_before(end - _MICROSECOND, months - 1))


def tfom_trend(
    *, end: datetime, months: int = 12, data: FactoryData | None = None
) -> list[TrendMonth]:
    """TFOM per UTC month, from the first month with metered usage (at most `months` before
    `end`) to the month holding `end`, each clipped to [first metered hour, end). TEF and
    TFI come from the month's closed factory KpiSnapshot when one covers the whole month,
    else from the computed figures. `data`, when given, must cover the trend's range."""
    start = tfom_trend_start(end=end, months=months)
    if start is None:
        return []
    data = data if data is not None else kpi_read(Period(start, end))
    snapshots = {
        snapshot.period_start: snapshot
        for snapshot in KpiSnapshot.objects.filter(
            scope=FACTORY,
            period_kind=KpiSnapshot.PeriodKind.MONTH,
            period_start__gte=month_start(start),
            period_start__lt=end,
            is_closed=True,
        )
    }
    points = []
    month = month_start(start)
    while month < end:
        month_end = next_month(month)
        bounds = {"month": month, "start": max(month, start), "end": min(month_end, end)}
        try:
            tfom = tfom_measure(scope=FACTORY, start=bounds["start"], end=bounds["end"], data=data)
        except FieldError as error:
            points.append(TrendMonth(**bounds, tfom=None, error=error.message))
            month = month_end
            continue
        snapshot = snapshots.get(month)
        is_whole = not is_part_of_month(month, start=bounds["start"], end=bounds["end"])
        if is_whole and snapshot is not None and snapshot.period_end == month_end:
            values = snapshot.values
            tef, tfi = _decimal(values.get("tef")), _decimal(values.get("tfi"))
            points.append(TrendMonth(**bounds, tfom=tfom, source="snapshot", tef=tef, tfi=tfi))
        else:
            points.append(TrendMonth(**bounds, tfom=tfom, tef=tfom.tef, tfi=tfom.tfi))
        month = month_end
    return points


def _decimal(value) -> Decimal | None:
    return None if value is None else Decimal(str(value))
