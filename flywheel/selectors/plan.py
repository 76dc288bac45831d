"""Forecasts (kpis.md 6b): the daily series the forecast job fits, read from the published
read models, and the stored forecasts the pages and the API show.

A series is one scope's daily production (output-token units, kpis.md section 1: metering's
daily rollups, with the w_in of the deployment version in force; a day in which a version
takes effect after midnight is read hour by hour) or realized revenue after promotions
(billing's rated usage), per closed UTC day, for the factory, each pool and each model
(`model:<slug>`), from its first day with production, a year at most. Both metrics of a
scope start on the same day; a day without usage is a 0.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q, Sum

from billing.selectors.rating.rated_usage import realized_by_day
from flywheel.domain.plan.capacity import (
    DEFAULT_HORIZON_MONTHS,
    PlanMonth,
    PlanPool,
    month_add,
    month_days,
    month_demands,
    peak_ratio,
    plan_months,
)
from flywheel.domain.plan.explain import METHODS, METRICS, accuracy_sentence
from flywheel.domain.plan.placement import DEFAULT_TARGET_BUSY, Rate, place
from flywheel.domain.tfom import HOURS_PER_MONTH
from flywheel.models import CapacityPlan, Forecast, KpiSnapshot
from flywheel.selectors.measurement import FACTORY
from flywheel.selectors.tfom import cost_models_in_force, engine_cost_model, factory_costs_in_force
from metering.domain.usage.production import production_tokens
from metering.selectors.factory import (
    Curve,
    DeploymentVersions,
    curve_list,
    deployment_list,
    pool_list,
    served_model_list,
)
from metering.selectors.usage import (
    daily_usage_list,
    deployment_hour_sums,
    five_minute_tokens_by_model,
    hourly_usage_list,
    installed_gpus_now,
    usage_measured_until,
)
from portal import clock
from portal.errors import FieldError
from portal.money import money_str
from portal.periods import day_floor

HISTORY_DAYS = 365  # the longest series fitted: weekly seasonality and trend need far less
MODEL_PREFIX = "model:"
DAY = timedelta(days=1)


@dataclass(frozen=True)
class Series:
    """One scope's daily values from `first_day`, one per closed day, oldest first."""

    scope: str
    metric: str
    first_day: date
    values: list[float]


def closed_until(*, now: datetime | None = None) -> date:
    """The first UTC day not closed yet: every day before it is measured whole (the read
    window's end, kpis.md section 0, floored to the day)."""
    return day_floor(usage_measured_until(now=now or clock.now())).date()


def series_read(*, end: date, days: int = HISTORY_DAYS) -> list[Series]:
    """Every scope's production and revenue series over the closed days before `end` (at
    most `days` of them): the factory, each pool, each model. Scopes without production in
    that time have none."""
    start = end - timedelta(days=days)
    deployments = list(deployment_list().select_related("pool", "model"))
    scopes_of = {d.pk: (FACTORY, d.pool.slug, f"{MODEL_PREFIX}{d.model.slug}") for d in deployments}
    grids = {
        "tokens": _production_by_day(start, end, deployments),
        "revenue": _revenue_by_day(start, end),
    }
    sums: dict[str, dict[str, dict[date, float]]] = {m: defaultdict(dict) for m in grids}
    for metric, grid in grids.items():
        for (day, deployment), value in grid.items():
            for scope in scopes_of.get(deployment, ()):
                days_of = sums[metric][scope]
                days_of[day] = days_of.get(day, 0.0) + value
    series = []
    for scope, produced in sorted(sums["tokens"].items(), key=lambda item: _order(item[0])):
        started = [day for day, value in produced.items() if value > 0]
        if not started:
            continue
        first = min(started)
        span = [first + timedelta(days=i) for i in range((end - first).days)]
        for metric in ("tokens", "revenue"):
            values = sums[metric].get(scope, {})
            series.append(Series(scope, metric, first, [values.get(day, 0.0) for day in span]))
    return series


def _order(scope: str) -> tuple[int, str]:
    """The factory first, then the pools, then the models."""
    return (0 if scope == FACTORY else 2 if scope.startswith(MODEL_PREFIX) else 1, scope)


def _midnight(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _production_by_day(start: date, end: date, deployments) -> dict[tuple[date, int], float]:
    """Production per (day, deployment) in [start, end): daily rollups under the version in
    force that day; the days a version of the deployment takes effect after midnight from
    the hourly rollups, each hour under its own version."""
    versions = DeploymentVersions()
    split: set[tuple[date, int]] = set()
    for deployment in deployments:
        for begins, _, _ in versions.series(deployment.pk).spans():
            if begins != _midnight(begins) and start <= begins.date() < end:
                split.add((begins.date(), deployment.pk))
    grid: dict[tuple[date, int], float] = defaultdict(float)
    begin = datetime.combine(start, datetime.min.time(), tzinfo=UTC)
    finish = datetime.combine(end, datetime.min.time(), tzinfo=UTC)
    daily = (
        daily_usage_list(start=begin, end=finish)
        .values("day", "deployment_id")
        .annotate(o=Sum("output_tokens"), i=Sum("input_tokens"), c=Sum("cached_tokens"))
        .order_by()
    )
    for row in daily:
        cell = (row["day"], row["deployment_id"])
        if cell in split:
            continue
        moment = datetime.combine(row["day"], datetime.min.time(), tzinfo=UTC)
        grid[cell] += _tok(versions, row, row["deployment_id"], moment)
    if split:
        hours = Q()
        for day, deployment in split:
            midnight = datetime.combine(day, datetime.min.time(), tzinfo=UTC)
            hours |= Q(deployment_id=deployment, hour__gte=midnight, hour__lt=midnight + DAY)
        for row in deployment_hour_sums(hourly_usage_list().filter(hours)):
            hour = row["hour"].astimezone(UTC)
            grid[(hour.date(), row["deployment_id"])] += _tok(
                versions, row, row["deployment_id"], hour
            )
    return dict(grid)


def _tok(versions: DeploymentVersions, row: dict, deployment: int, moment: datetime) -> float:
    version = versions.at(deployment, moment)
    if version is None:
        return 0.0
    tok = production_tokens(
        output_tokens=row["o"], input_tokens=row["i"], cached_tokens=row["c"], w_in=version.w_in
    )
    return float(tok)


def _revenue_by_day(start: date, end: date) -> dict[tuple[date, int], float]:
    """Realized revenue after promotions per (day, deployment) in [start, end)."""
    begin = datetime.combine(start, datetime.min.time(), tzinfo=UTC)
    finish = datetime.combine(end, datetime.min.time(), tzinfo=UTC)
    return {
        (row["day"], row["deployment_id"]): float(row["realized"] - (row["promotions"] or 0))
        for row in realized_by_day(start=begin, end=finish)
    }


# -- stored forecasts ------------------------------------------------------------------


def forecast_list() -> list[Forecast]:
    """Every stored forecast without its daily values (a table of them needs its method,
    accuracy and monthly sums): the factory's first, then the pools', then the models'."""
    rows = Forecast.objects.defer("history", "points")
    return sorted(rows, key=lambda f: (_order(f.scope), f.metric))


def forecasts_of(*, scope: str) -> list[Forecast]:
    """A scope's stored forecasts with their daily values, production first."""
    return sorted(Forecast.objects.filter(scope=scope), key=lambda f: f.metric != "tokens")


def forecast_get(*, scope: str, metric: str) -> Forecast:
    """The stored forecast of a scope and metric; FieldError naming the parameter when the
    metric is unknown or the scope has no forecast."""
    if metric not in Forecast.Metric.values:
        raise FieldError("metric", f"unknown metric {metric!r}: use tokens or revenue")
    forecast = Forecast.objects.filter(scope=scope, metric=metric).first()
    if forecast is None:
        scopes = sorted({f.scope for f in Forecast.objects.only("scope")}, key=_order)
        known = ", ".join(scopes[:20]) or "none yet: the forecast job has not run"
        raise FieldError(
            "scope",
            f"no forecast for {scope!r}: use factory, a pool slug or model:<slug> ({known})",
        )
    return forecast


def accuracy_of(forecast: Forecast) -> str:
    """The accuracy line shown beside the forecast, in words."""
    return accuracy_sentence(
        mape=forecast.mape, baseline_mape=forecast.baseline_mape, origins=len(forecast.origins)
    )


def forecast_json(forecast: Forecast) -> dict[str, Any]:
    """GET /api/v1/forecast: daily points with their p80 and p95 bands, the monthly sums,
    the method and its backtest. Tokens are integers, revenue decimal strings (cents)."""
    value = _shown(forecast.metric)
    return {
        "scope": forecast.scope,
        "metric": forecast.metric,
        "unit": "output-token units"
        if forecast.metric == Forecast.Metric.TOKENS
        else settings.FACTORY_CURRENCY,
        "method": forecast.method,
        "method_label": METHODS[forecast.method],
        "note": forecast.note or None,
        "made_at": forecast.made_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "history_start": forecast.history_start.isoformat(),
        "forecast_start": forecast.forecast_start.isoformat(),
        "horizon_days": len(forecast.points),
        "clipped_at_zero": forecast.is_clipped,
        "mape": forecast.mape,
        "baseline_mape": forecast.baseline_mape,
        "origins": forecast.origins,
        "accuracy": accuracy_of(forecast),
        "history": [
            {"day": (forecast.history_start + i * DAY).isoformat(), "actual": value(v)}
            for i, v in enumerate(forecast.history)
        ],
        "points": [
            {
                "day": (forecast.forecast_start + i * DAY).isoformat(),
                "forecast": value(mean),
                "p80": [value(lo80), value(hi80)],
                "p95": [value(lo95), value(hi95)],
            }
            for i, (mean, lo80, hi80, lo95, hi95) in enumerate(forecast.points)
        ],
        "monthly": [
            {
                "month": month["month"],
                "actual": value(month["actual"]),
                "forecast": value(month["forecast"]),
                "total": value(month["actual"] + month["forecast"]),
                "is_whole": month["is_whole"],
            }
            for month in forecast.monthly
        ],
        "metric_label": METRICS[forecast.metric],
    }


def _shown(metric: str):
    """How a value of the metric is written: whole tokens, or money in cents."""
    if metric == Forecast.Metric.TOKENS:
        return lambda v: round(v)
    currency = settings.FACTORY_CURRENCY
    return lambda v: money_str(amount=Decimal(repr(v)), currency=currency)


# -- the capacity plan (kpis.md 6c) ----------------------------------------------------

PEAK_DAYS = 28  # the window of the 5-minute rates peak_ratio reads (8 days are kept)
REVENUE_DAYS = 28  # the window of a model's realized revenue per token


@dataclass(frozen=True)
class PlanInputs:
    """What the plan reads: the pools with a cost model in force, the rates of each model on
    each of them, each model's forecast, peak ratio and revenue per token, the factory's
    monthly opex, and what was left out and why."""

    pools: list[PlanPool]
    rates: list[Rate]
    forecasts: dict[str, Forecast]  # model slug -> its stored production forecast
    peak_ratios: dict[str, Decimal]
    revenue_per_token: dict[str, Decimal]
    monthly_opex: Decimal
    curves: list[Curve]
    notes: list[str]


def plan_inputs(*, now: datetime) -> PlanInputs:
    """The plan's inputs as they stand at `now` (flywheel.domain.plan.capacity)."""
    notes: list[str] = []
    pools = [p for p in pool_list() if p.retired_at is None or p.retired_at > now]
    costs = cost_models_in_force(at=now, pool_ids=[p.pk for p in pools])
    installed = installed_gpus_now(pools=pools, now=now)
    plan_pools = []
    for pool in pools:
        version = costs.get(pool.pk)
        if version is None:
            notes.append(f"pool {pool.slug} has no cost model in force: not planned")
            continue
        plan_pools.append(
            PlanPool(
                slug=pool.slug, gpu_type=pool.gpu_type, installed=installed[pool.pk],
                cost_model=engine_cost_model(version), lead_time_months=version.lead_time_months,
            )
        )  # fmt: skip
    forecasts = {
        f.scope.removeprefix(MODEL_PREFIX): f
        for f in Forecast.objects.filter(scope__startswith=MODEL_PREFIX, metric="tokens")
        if f.points
    }
    revenues = {
        f.scope.removeprefix(MODEL_PREFIX): f
        for f in Forecast.objects.filter(scope__startswith=MODEL_PREFIX, metric="revenue")
    }
    curves = curve_list()
    rates = _rates(plan_pools, sorted(forecasts), curves, notes)
    opex = factory_costs_in_force(at=now)
    return PlanInputs(
        pools=plan_pools,
        rates=rates,
        forecasts=forecasts,
        peak_ratios=_peak_ratios(now, forecasts),
        revenue_per_token={
            model: _revenue_per_token(forecasts[model], revenues.get(model)) for model in forecasts
        },
        monthly_opex=(opex.staff_per_month + opex.sga_per_month) if opex else Decimal(0),
        curves=curves,
        notes=notes,
    )


def _rates(pools: list[PlanPool], models: list[str], curves: list[Curve], notes) -> list[Rate]:
    """Each model's R_ref and tp on each pool: the best of its curves on the pool's GPU type
    at its SLO; else, where it is deployed on the pool, its latest version's R_ref (tp 1)."""
    best: dict[tuple[str, str], Curve] = {}
    for curve in curves:
        key = (curve.model, curve.gpu_type)
        if curve.r_ref is not None and (key not in best or curve.r_ref > best[key].r_ref):
            best[key] = curve
    versions = DeploymentVersions()
    deployed = {
        (d.model.slug, d.pool.slug): versions.series(d.pk).latest()
        for d in deployment_list().select_related("model", "pool")
    }
    rates = []
    for model in models:
        found = False
        for pool in pools:
            curve = best.get((model, pool.gpu_type))
            version = deployed.get((model, pool.slug))
            if curve is not None:
                rates.append(Rate(model, pool.slug, curve.r_ref, curve.tp))  # type: ignore[arg-type]
            elif version is not None:
                rates.append(Rate(model, pool.slug, version.r_ref, 1))
            else:
                continue
            found = True
        if not found:
            notes.append(f"{model} has no curve or deployment on a planned pool: not placed")
    return rates


def _peak_ratios(now: datetime, forecasts: dict[str, Forecast]) -> dict[str, Decimal]:
    """Each model's p95 over mean of its 5-minute tok/s (kpis.md 6c) over the last 28 days
    (the 5-minute buckets are kept 8), a bucket without traffic a 0, from its first bucket."""
    end = closed_until(now=now)
    finish = datetime.combine(end, datetime.min.time(), tzinfo=UTC)
    buckets = five_minute_tokens_by_model(start=finish - timedelta(days=PEAK_DAYS), end=finish)
    ratios = {}
    for model in forecasts:
        made = buckets.get(model, {})
        if not made:
            ratios[model] = Decimal(1)
            continue
        first = min(made)
        span = int((finish - first).total_seconds()) // 300
        rates = [float(made.get(first + timedelta(minutes=5 * i), 0)) for i in range(span)]
        ratios[model] = peak_ratio(rates)
    return ratios


def _revenue_per_token(tokens: Forecast, revenue: Forecast | None) -> Decimal:
    """Realized revenue per production token over the model's last 28 closed days."""
    if revenue is None:
        return Decimal(0)
    made = sum(tokens.history[-REVENUE_DAYS:])
    earned = sum(revenue.history[-REVENUE_DAYS:])
    return Decimal(repr(earned)) / Decimal(repr(made)) if made else Decimal(0)


def plan_make(
    inputs: PlanInputs,
    *,
    now: datetime,
    horizon_months: int = DEFAULT_HORIZON_MONTHS,
    target_busy: Decimal = DEFAULT_TARGET_BUSY,
    quantile: str = "p80",
) -> dict[str, Any]:
    """The plan for the horizon from the month holding `now`, as the API answers it."""
    first = now.astimezone(UTC).date().replace(day=1)
    months = [month_add(first, i) for i in range(horizon_months)]
    demand = {
        model: month_demands(
            history_start=f.history_start, history=f.history, forecast_start=f.forecast_start,
            points=f.points, months=months, ratio=inputs.peak_ratios[model], quantile=quantile,
        )
        for model, f in inputs.forecasts.items()
    }  # fmt: skip
    planned = plan_months(
        months=months, demand=demand, revenue_per_token=inputs.revenue_per_token,
        pools=inputs.pools, rates=inputs.rates, monthly_opex=inputs.monthly_opex,
        target_busy=target_busy,
    )  # fmt: skip
    currency = settings.FACTORY_CURRENCY
    return {
        "made_at": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "horizon_months": horizon_months,
        "target_busy": str(target_busy),
        "quantile": quantile,
        "currency": currency,
        "notes": inputs.notes,
        "peak_ratios": {m: str(round(r, 3)) for m, r in sorted(inputs.peak_ratios.items())},
        "revenue_per_million_tokens": {
            m: money_str(amount=r * 10**6, currency=currency)
            for m, r in sorted(inputs.revenue_per_token.items())
        },
        "months": [_month_json(m, currency) for m in planned],
    }


def _month_json(month: PlanMonth, currency: str) -> dict[str, Any]:
    def money(value: Decimal) -> str | None:
        return money_str(amount=value, currency=currency)

    return {
        "month": f"{month.month:%Y-%m}",
        "pools": [
            {
                "pool": p.slug,
                "gpu_type": p.gpu_type,
                "installed": p.installed,
                "needed": p.needed,
                "add": p.add,
                "release": p.release,
                "order_by": p.order_by.isoformat() if p.order_by else None,
                "busy_gpus": str(round(p.busy_gpus, 1)),
                "cost_per_gpu_hour": money(p.cost_per_gpu_hour),
                "capex_added": money(p.capex_added),
            }
            for p in month.pools
        ],
        "placement": [
            {"model": model, "pool": pool, "gpus": gpus}
            for (model, pool), gpus in sorted(month.placement.gpus.items())
        ],
        "demand": [
            {
                "model": model,
                "peak_tok_s": round(d.peak_tok_s),
                "capacity_tok_s": round(month.placement.capacity.get(model, 0)),
                "unserved_tok_s": round(month.placement.unserved.get(model, 0)),
                "tokens": round(d.tokens),
            }
            for model, d in sorted(month.demand.items())
        ],
        "cost_per_hour": money(month.placement.cost_per_hour),
        "tokens": round(month.tokens),
        "busy_gpus": str(round(month.busy_gpus, 1)),
        "revenue": money(month.revenue),
        "energy_cost": money(month.energy_cost),
        "depreciation": money(month.depreciation),
        "hosting": money(month.hosting),
        "cogs": money(month.cogs),
        "opex": money(month.opex),
        "ebitda": money(month.ebitda),
        "gross_margin": None if month.gross_margin is None else str(round(month.gross_margin, 4)),
        "notes": month.notes,
    }


QUANTILE_NAMES = ("p80", "p95", "mean")
HORIZON_MAX = 36


def plan_params(params) -> tuple[int, Decimal, str]:
    """`horizon_months` (1–36, default 12), `target_busy` (0.05–1, default 0.8) and
    `quantile` (p80, p95 or mean) of a request; FieldError naming the one refused."""
    horizon = params.get("horizon_months") or str(DEFAULT_HORIZON_MONTHS)
    if not horizon.isdigit() or not 1 <= int(horizon) <= HORIZON_MAX:
        raise FieldError("horizon_months", f"must be a whole number from 1 to {HORIZON_MAX}")
    busy = target_busy_parse(params.get("target_busy"))
    quantile = params.get("quantile") or "p80"
    if quantile not in QUANTILE_NAMES:
        raise FieldError("quantile", "must be p80, p95 or mean")
    return int(horizon), busy, quantile


def target_busy_parse(value) -> Decimal:
    """A target busy share from 0.05 to 1 (default 0.8); FieldError naming target_busy."""
    if value is None or value == "":
        return DEFAULT_TARGET_BUSY
    try:
        busy = Decimal(str(value))
    except ArithmeticError:
        busy = Decimal(-1)
    if not busy.is_finite() or not Decimal("0.05") <= busy <= 1:
        raise FieldError("target_busy", "must be a number from 0.05 to 1")
    return busy


def capacity_plan_get(*, horizon_months: int, target_busy: Decimal, quantile: str) -> dict:
    """The plan: the forecast job's stored one for the default terms (pages read it), else
    planned now from the stored forecasts for the terms asked; with plan against actual."""
    stored = CapacityPlan.objects.filter(key=CapacityPlan.LATEST).first()
    defaults = (DEFAULT_HORIZON_MONTHS, DEFAULT_TARGET_BUSY, "p80")
    if stored is not None and (horizon_months, target_busy, quantile) == defaults:
        body = stored.body
    elif stored is None and not Forecast.objects.exists():
        body = None
    else:
        now = clock.now()
        body = plan_make(
            plan_inputs(now=now), now=now, horizon_months=horizon_months,
            target_busy=target_busy, quantile=quantile,
        )  # fmt: skip
    if body is None:
        return {"months": [], "plan_vs_actual": [], "notes": [NO_PLAN]}
    return {**body, "plan_vs_actual": plan_against_actual()}


NO_PLAN = "no plan yet: the forecast job plans once it has forecast the models' production"


def plan_against_actual(*, now: datetime | None = None) -> list[dict]:
    """For each month that ended and had a plan at its start: that plan's figures for the
    month beside what was measured (production tokens and realized revenue from the
    forecasts' closed days, busy GPUs from the month's KPI snapshot), oldest first."""
    now = now or clock.now()
    current = f"{now.astimezone(UTC):%Y-%m}"
    plans = CapacityPlan.objects.exclude(key=CapacityPlan.LATEST).filter(key__lt=current)
    if not plans:
        return []
    factory = {f.metric: f for f in Forecast.objects.filter(scope=FACTORY)}
    busy = {
        f"{row.period_start.astimezone(UTC):%Y-%m}": row
        for row in KpiSnapshot.objects.filter(
            scope=FACTORY, period_kind=KpiSnapshot.PeriodKind.MONTH
        )
    }
    currency = settings.FACTORY_CURRENCY
    out = []
    for plan in sorted(plans, key=lambda p: p.key):
        planned = next((m for m in plan.body["months"] if m["month"] == plan.key), None)
        if planned is None:
            continue
        month = date.fromisoformat(f"{plan.key}-01")
        snapshot = busy.get(plan.key)
        seconds = month_days(month) * 86_400
        revenue = _month_sum(factory.get("revenue"), month)
        out.append(
            {
                "month": plan.key,
                "plan_made_at": plan.made_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                "planned": {
                    "tokens": planned["tokens"],
                    "busy_gpus": planned["busy_gpus"],
                    "revenue": planned["revenue"],
                    "ebitda": planned["ebitda"],
                },
                "actual": {
                    "tokens": round(_month_sum(factory.get("tokens"), month)),
                    "busy_gpus": str(
                        round(Decimal(snapshot.values["busy_gpu_seconds"]) / seconds, 1)
                    )
                    if snapshot
                    else None,
                    "revenue": money_str(amount=Decimal(repr(revenue)), currency=currency),
                },
            }
        )
    return out


def _month_sum(forecast: Forecast | None, month: date) -> float:
    """A stored series' closed days of `month`, summed."""
    if forecast is None:
        return 0.0
    first = (month - forecast.history_start).days
    last = first + month_days(month)
    return sum(forecast.history[max(first, 0) : max(last, 0)])


def what_if(*, demand: dict[str, Decimal], target_busy: Decimal, allow_purchase: bool) -> dict:
    """POST /api/v1/capacity-plan/what-if: a stated peak demand per model placed now on the
    pools as installed (with purchases where capex buys capacity cheapest, when allowed):
    the placement, GPUs per pool, the cost per hour and per 730-hour month."""
    now = clock.now()
    known = {m.slug for m in served_model_list()}
    for model in demand:
        if model not in known:
            raise FieldError(f"demand.{model}", f"unknown model {model!r}")
    inputs = plan_inputs(now=now)
    notes = [n for n in inputs.notes if not n.endswith("not placed")]
    rates = _rates(inputs.pools, sorted(demand), inputs.curves, notes)
    rooms = [p.room(installed=p.installed, target_busy=target_busy) for p in inputs.pools]
    placed = place(
        demand=demand, pools=rooms, rates=rates, target_busy=target_busy,
        allow_purchase=allow_purchase,
    )  # fmt: skip
    currency = settings.FACTORY_CURRENCY
    hour = placed.cost_per_hour
    return {
        "target_busy": str(target_busy),
        "allow_purchase": allow_purchase,
        "currency": currency,
        "placement": [
            {"model": model, "pool": pool, "gpus": gpus}
            for (model, pool), gpus in sorted(placed.gpus.items())
        ],
        "pools": [
            {
                "pool": room.slug,
                "gpu_type": room.gpu_type,
                "installed": room.installed,
                "gpus": placed.pool_gpus(room.slug),
                "add": placed.added.get(room.slug, 0),
                "capex_added": money_str(
                    amount=placed.added.get(room.slug, 0) * room.capex_per_gpu, currency=currency
                ),
                "cost_per_gpu_hour": money_str(amount=room.cost_per_gpu_hour, currency=currency),
            }
            for room in rooms
        ],
        "demand": [
            {
                "model": model,
                "peak_tok_s": _plain(peak),
                "capacity_tok_s": _plain(placed.capacity.get(model, Decimal(0))),
                "unserved_tok_s": _plain(placed.unserved.get(model, Decimal(0))),
            }
            for model, peak in sorted(demand.items())
        ],
        "can_serve": not placed.unserved,
        "cost_per_hour": money_str(amount=hour, currency=currency),
        "cost_per_month": money_str(amount=hour * HOURS_PER_MONTH, currency=currency),
        "notes": notes,
    }


def plan_rows(plan: dict) -> list[list]:
    """The plan's CSV: one row per month and pool, the month's figures on each."""
    rows = []
    for month in plan["months"]:
        for pool in month["pools"]:
            rows.append(
                [
                    month["month"], pool["pool"], pool["gpu_type"], pool["installed"],
                    pool["needed"], pool["add"], pool["release"], pool["order_by"],
                    Decimal(pool["busy_gpus"]), Decimal(pool["cost_per_gpu_hour"]),
                    month["tokens"], Decimal(month["revenue"]), Decimal(month["cogs"]),
                    Decimal(month["ebitda"]),
                    Decimal(month["gross_margin"]) if month["gross_margin"] else None,
                ]
            )  # fmt: skip
    return rows


def _plain(value: Decimal) -> str:
    """A rate without trailing zeros or exponent: 10000.000000 -> '10000'."""
    return format(value.normalize(), "f")


def plan_additions() -> list[dict]:
    """The stored plan's GPU additions, the first per pool (kpis.md 6: what the goal check
    proposes when no lever set meets the goal under growing demand): "add N GPUs of type T
    by month M", with the date to order by and the capex, priced from the plan."""
    stored = CapacityPlan.objects.filter(key=CapacityPlan.LATEST).first()
    if stored is None:
        return []
    currency = stored.body.get("currency", settings.FACTORY_CURRENCY)
    seen, out = set(), []
    for month in stored.body["months"]:
        for pool in month["pools"]:
            if pool["add"] and pool["pool"] not in seen:
                seen.add(pool["pool"])
                out.append(
                    {
                        "pool": pool["pool"],
                        "gpu_type": pool["gpu_type"],
                        "gpus": pool["add"],
                        "by_month": month["month"],
                        "order_by": pool["order_by"],
                        "capex": pool.get("capex_added"),
                        "message": f"add {pool['add']} {pool['gpu_type']} GPUs to {pool['pool']} "
                        f"by {month['month']} (order by {pool['order_by']}): capex "
                        f"{pool.get('capex_added')} {currency}, from the capacity plan",
                    }
                )
    return out
