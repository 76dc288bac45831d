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
from flywheel.domain.plan.explain import METHODS, METRICS, accuracy_sentence
from flywheel.models import Forecast
from flywheel.selectors.measurement import FACTORY
from metering.domain.usage.production import production_tokens
from metering.selectors.factory import DeploymentVersions, deployment_list
from metering.selectors.usage import (
    daily_usage_list,
    deployment_hour_sums,
    hourly_usage_list,
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
