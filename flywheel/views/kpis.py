"""The factory overview: the operators' front page (finance and investors read it too)."""

from datetime import timedelta

from django.shortcuts import render

from flywheel.charts.kpis import tps_chart, trend_chart, waterfall_chart
from flywheel.selectors.kpis import daily_trend, empty_reason_of, overview_get
from flywheel.selectors.measurement import FACTORY
from metering.selectors.sla.incidents import incident_spans
from metering.selectors.usage import window_resolve
from portal.charts import chart_json
from portal.decorators import role_required
from portal.models import Role

TREND_DAYS = 90


@role_required(Role.OPERATOR, Role.FINANCE, Role.INVESTOR)
def overview(request):
    """Factor waterfall with benchmark bands, pools table, 90-day TEF/TFI and TPS trends."""
    window = window_resolve(request.GET, default="last_30_days")
    period = window.period
    trend = daily_trend(end=period.end, days=TREND_DAYS)
    since = period.end - timedelta(days=TREND_DAYS)
    incidents = incident_spans(start=since, end=period.end) if trend else []
    context = {
        "title": "Factory overview",
        "period": period,
        "window": window,
        "trend": chart_json(trend_chart, trend, incidents=incidents) if trend else None,
        "tps": chart_json(tps_chart, trend) if trend else None,
    }
    if empty_reason := empty_reason_of(window=window, scope=FACTORY):
        context["empty_reason"] = empty_reason  # said in words; the trend still shows
    else:
        overview = overview_get(period=period)
        context |= {**overview, "waterfall": chart_json(waterfall_chart, overview["kpis"])}
    return render(request, "flywheel/kpis/overview.html", context)
