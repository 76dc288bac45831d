"""The factory overview: the operators' front page (finance and investors read it too);
finance's home is the same with the books first."""

from datetime import timedelta

from django.shortcuts import render

from billing.domain.receivables import BUCKET_LABELS, BUCKETS
from billing.selectors.close import month_close_state
from billing.selectors.receivables import receivables_summary
from flywheel.charts.kpis import tps_chart, trend_chart, waterfall_chart
from flywheel.selectors.kpis import daily_trend, empty_reason_of, overview_get
from flywheel.selectors.measurement import FACTORY, day_snapshots_stamp
from metering.selectors.factory import pool_list
from metering.selectors.sla.incidents import incident_spans
from metering.selectors.usage import window_resolve
from portal import clock
from portal.charts import chart_json
from portal.decorators import role_required
from portal.kept import kept
from portal.models import Role
from portal.periods import month_start, months_before

TREND_DAYS = 90


@role_required(Role.OPERATOR, Role.FINANCE, Role.INVESTOR)
def overview(request):
    """Factor waterfall with benchmark bands, pools table, 90-day TEF/TFI and TPS trends."""
    return render(request, "flywheel/kpis/overview.html", _overview_context(request))


@role_required(Role.FINANCE)
def finance_home(request):
    """Finance's home: the books first (what is receivable and overdue today, and whether
    last month is closed, with its report), then the factory overview."""
    now = clock.now()
    last = months_before(month_start(now), 1)
    status, close = month_close_state(last)
    books = {
        "receivables": receivables_summary(user=request.user, as_of=now.date()),
        "buckets": [(bucket, BUCKET_LABELS[bucket]) for bucket in BUCKETS],
        "close_month": last,
        "close_status": status,
        "close": close,
    }
    context = _overview_context(request) | {"title": "Finance home", "books": books}
    return render(request, "flywheel/kpis/overview.html", context)


def _overview_context(request) -> dict:
    window = window_resolve(request.GET, default="last_30_days")
    period = window.period
    context = {
        "title": "Factory overview",
        "period": period,
        "window": window,
        **_trend_charts(period.end),
    }
    pools = list(pool_list())  # read once for both
    if empty_reason := empty_reason_of(window=window, scope=FACTORY, pools=pools):
        context["empty_reason"] = empty_reason  # said in words; the trend still shows
    else:
        overview = overview_get(period=period, pools=pools)
        context |= {**overview, "waterfall": chart_json(waterfall_chart, overview["kpis"])}
    return context


def _trend_charts(end) -> dict:
    """The 90-day trend's two charts (None without a closed day in them), kept in the shared
    cache (portal.kept) under the day snapshots they draw (day_snapshots_stamp) and the
    incidents they mark."""
    since = end - timedelta(days=TREND_DAYS)
    incidents = incident_spans(start=since, end=end)

    def draw() -> dict:
        trend = daily_trend(end=end, days=TREND_DAYS)
        if not trend:
            return {"trend": None, "tps": None}
        return {
            "trend": chart_json(trend_chart, trend, incidents=incidents),
            "tps": chart_json(tps_chart, trend),
        }

    stamp = day_snapshots_stamp(start=since, end=end)
    return kept(("flywheel.trend_charts", since, end, stamp, incidents), draw)
