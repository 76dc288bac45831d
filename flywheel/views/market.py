"""The cockpit (ui.md): how concentrated the revenue is, which tenants bring volume and
which bring price, whether they grow or leave, revenue by cohort, and the forecasts with
their measured accuracy. Operators, finance and investors read it; it writes nothing."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

from django.conf import settings
from django.shortcuts import render
from django.views.decorators.http import require_safe

from flywheel.charts.market import QUADRANT_NAMED, cohort_chart, quadrant_chart
from flywheel.charts.plan import forecast_chart
from flywheel.domain.market import ANCHOR, LONG_TAIL, PREMIUM, VOLUME
from flywheel.domain.plan.explain import METHODS, METRICS
from flywheel.models import Forecast
from flywheel.selectors.kpis import empty_reason_of
from flywheel.selectors.market import LEDGER, Market, market_read
from flywheel.selectors.measurement import FACTORY
from flywheel.selectors.plan import accuracy_of, forecast_list, forecasts_of
from metering.selectors.usage import window_resolve
from portal.charts import chart_json
from portal.decorators import role_required
from portal.models import Role

QUADRANTS = (
    (ANCHOR, "high volume, high price: the tenants the factory rests on"),
    (VOLUME, "high volume at a lower price: discounts and tiers at work"),
    (PREMIUM, "small volume at a high price: room to grow"),
    (LONG_TAIL, "small volume at a lower price"),
)


@require_safe
@role_required(Role.OPERATOR, Role.FINANCE, Role.INVESTOR)
def cockpit(request):
    """The market figures of the period and the forecasts (the stored ones: nothing is
    fitted here), for the scope chosen (`scope`, default the factory)."""
    window = window_resolve(request.GET, default="last_90_days")
    context = {"title": "Cockpit", "window": window, "period": window.period}
    if empty_reason := empty_reason_of(window=window, scope=FACTORY):
        context["empty_reason"] = empty_reason
    else:
        context |= _market(market_read(window))
    context |= _forecasts(request.GET.get("scope") or FACTORY, since=window.start.date())
    return render(request, "flywheel/market/cockpit.html", context)


def _market(market: Market) -> dict:
    points = [
        {
            "tenant": p.tenant,
            "name": market.names.get(p.tenant, p.tenant),
            "revenue": float(p.revenue),
            "x": float(p.x),
            "y": None if p.y is None else float(p.y),
            "label": p.label,
        }
        for p in market.quadrant.points
    ]
    total = market.total
    groups: dict[str | None, list] = defaultdict(list)
    for point in market.quadrant.points:
        groups[point.label].append(point)
    quadrants = [
        {
            "label": label,
            "meaning": meaning,
            "tenants": [market.names.get(p.tenant, p.tenant) for p in groups[label]],
            "share": sum((p.revenue for p in groups[label]), Decimal(0)) / total if total else None,
        }
        for label, meaning in QUADRANTS
    ]
    q = market.quadrant
    cohorts = [
        {
            "cohort": f"{c.month:%b %Y}",
            "tenants": c.tenants,
            "revenue": [float(v) for v in c.revenue],
        }
        for c in market.cohorts
    ]
    months = [f"{p.month:%b %Y}" for p in market.cohort_parts]
    partial = [f"{p.month:%b %Y}" for p in market.cohort_parts if not p.is_whole]
    return {
        "market": market,
        "sources": [{"part": part, "is_ledger": source == LEDGER} for part, source in market.parts],
        "quadrants": quadrants,
        "unplaced": [market.names.get(p.tenant, p.tenant) for p in groups[None]],
        "quadrant_chart": chart_json(
            quadrant_chart,
            points,
            x_median=None if q.x_median is None else float(q.x_median),
            y_median=None if q.y_median is None else float(q.y_median),
            currency=market.currency,
        )
        if points
        else None,
        "cohort_chart": chart_json(
            cohort_chart, cohorts, months=months, partial=partial, currency=market.currency
        )
        if cohorts
        else None,
        "partial_months": [p for p in market.cohort_parts if not p.is_whole],
        "named": QUADRANT_NAMED,
    }


def _forecasts(scope: str, *, since: date) -> dict:
    """The table of every stored forecast, and the charts of the chosen scope's."""
    forecasts = forecast_list()
    scopes = list(dict.fromkeys(f.scope for f in forecasts))
    rows = [
        {
            "forecast": f,
            "method": METHODS[f.method],
            "accuracy": accuracy_of(f),
        }
        for f in forecasts
    ]
    chosen = forecasts_of(scope=scope)
    charts = [
        {
            "forecast": f,
            "metric": METRICS[f.metric],
            "method": METHODS[f.method],
            "accuracy": accuracy_of(f),
            "chart": chart_json(forecast_chart, **_chart_data(f, since=since))
            if f.points
            else None,
            "months": [{**m, "total": m["actual"] + m["forecast"]} for m in f.monthly],
        }
        for f in chosen
    ]
    return {
        "forecasts": rows,
        "forecast_scopes": scopes,
        "forecast_scope": scope,
        "forecast_charts": charts,
        "made_at": max((f.made_at for f in forecasts), default=None),
    }


def _chart_data(forecast: Forecast, *, since: date) -> dict:
    """A forecast's chart: the closed days from the period's start (at least 28 shown), the
    forecast days, and the month in progress when the forecast starts inside one."""
    start = forecast.forecast_start
    first = min(max(since, forecast.history_start), start - timedelta(days=28))
    first = max(first, forecast.history_start)
    skip = (first - forecast.history_start).days
    days = [forecast.history_start + timedelta(days=i) for i in range(len(forecast.history))]
    month_first = start.replace(day=1)
    month_end = (month_first + timedelta(days=32)).replace(day=1)
    month = {}
    if month_first < start:
        closed, ahead = (start - month_first).days, (month_end - start).days
        month = {
            "first": month_first.isoformat(),
            "end": month_end.isoformat(),
            "label": f"{month_first:%B %Y} in progress: {closed} days closed, {ahead} forecast",
        }
    unit = (
        "Output-token units per day"
        if forecast.metric == Forecast.Metric.TOKENS
        else f"Revenue per day ({settings.FACTORY_CURRENCY})"
    )
    return {
        "days": [d.isoformat() for d in days[skip:]],
        "actual": forecast.history[skip:],
        "forecast_days": [
            (start + timedelta(days=i)).isoformat() for i in range(len(forecast.points))
        ],
        "points": forecast.points,
        "unit": unit,
        "month": month,
    }
