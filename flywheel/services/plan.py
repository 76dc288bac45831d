"""The forecast job's work (kpis.md 6b and 6c, architecture.md "Scheduled jobs"): every
series' forecast and backtest, written as the forecasts' read model, then the capacity plan
from them.

The series are read first and every model fitted outside any transaction; the rows are then
replaced in one short transaction (an upsert per (scope, metric), and the forecasts of
scopes that no longer have a series removed), so a killed run leaves the last complete one
and a second run writes the same rows again.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from django.db import transaction

from flywheel.domain.plan.forecast import Forecast as Fitted
from flywheel.domain.plan.forecast import forecast_make, monthly_sums
from flywheel.models import CapacityPlan, Forecast
from flywheel.selectors.plan import Series, closed_until, plan_inputs, plan_make, series_read
from portal import clock

log = logging.getLogger(__name__)


def forecasts_update(*, now: datetime | None = None) -> list[Forecast]:
    """Forecast every series of the closed days before the read window's last day (the
    factory, each pool and each model, production and revenue) and store them, replacing
    the previous run's. Returns the rows written."""
    now = now or clock.now()
    end = closed_until(now=now)
    rows = [
        _row(series, forecast_make(series.values), made_at=now) for series in series_read(end=end)
    ]
    with transaction.atomic():
        kept = {(row.scope, row.metric) for row in rows}
        stale = [
            pk
            for pk, scope, metric in Forecast.objects.values_list("pk", "scope", "metric")
            if (scope, metric) not in kept
        ]
        Forecast.objects.filter(pk__in=stale).delete()
        Forecast.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["scope", "metric"],
            update_fields=[
                "method", "note", "history_start", "history", "forecast_start", "points",
                "monthly", "is_clipped", "mape", "baseline_mape", "origins", "made_at",
            ],
        )  # fmt: skip
    log.info("forecast: %d series up to %s", len(rows), end)
    return rows


def _row(series: Series, fitted: Fitted, *, made_at: datetime) -> Forecast:
    forecast_start = series.first_day + timedelta(days=len(series.values))
    months = (
        monthly_sums(first_day=series.first_day, values=series.values, mean=fitted.mean)
        if fitted.mean
        else []
    )
    notes = [fitted.note] if fitted.note else []
    if fitted.is_clipped:
        notes.append("values below 0 were set to 0: production and revenue are never negative")
    return Forecast(
        scope=series.scope,
        metric=series.metric,
        method=fitted.method,
        note="; ".join(notes),
        history_start=series.first_day,
        history=series.values,
        forecast_start=forecast_start,
        points=[
            [mean, lo80, hi80, lo95, hi95]
            for mean, lo80, hi80, lo95, hi95 in zip(
                fitted.mean, fitted.lo80, fitted.hi80, fitted.lo95, fitted.hi95, strict=True
            )
        ],
        monthly=[
            {
                "month": f"{m.month:%Y-%m}",
                "actual": m.actual,
                "forecast": m.forecast,
                "is_whole": m.is_whole,
            }
            for m in months
        ],
        is_clipped=fitted.is_clipped,
        mape=fitted.accuracy.mape,
        baseline_mape=fitted.accuracy.baseline_mape,
        origins=[
            (series.first_day + timedelta(days=o)).isoformat() for o in fitted.accuracy.origins
        ],
        made_at=made_at,
    )


def capacity_plan_update(*, now: datetime | None = None) -> CapacityPlan:
    """Plan capacity from the stored forecasts (kpis.md 6c) and store it as the latest plan
    and, the first time in a month, as the plan as it stood at that month's start (kept:
    plan against actual reads it once the month has ended). One short transaction."""
    now = now or clock.now()
    body = plan_make(plan_inputs(now=now), now=now)
    month = f"{now.astimezone(UTC):%Y-%m}"
    with transaction.atomic():
        latest, _ = CapacityPlan.objects.update_or_create(
            key=CapacityPlan.LATEST, defaults={"made_at": now, "body": body}
        )
        CapacityPlan.objects.get_or_create(key=month, defaults={"made_at": now, "body": body})
    log.info("capacity plan: %d months from %s", len(body["months"]), month)
    return latest
