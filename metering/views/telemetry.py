"""The metering page: reconciliation of engine counters with usage, and scrape-target health."""

from django.shortcuts import render

from metering.charts import capacity_chart_json
from metering.models import Pool
from metering.selectors.factory import pool_service_lives
from metering.selectors.ingestion import rejection_list, source_list
from metering.selectors.telemetry import (
    reconciliation_by_deployment,
    reconciliation_list,
    reconciliation_tolerance,
    scrape_target_health,
)
from metering.selectors.usage import capacity_stamps, usage_by_pool, window_resolve
from portal import clock
from portal.decorators import role_required
from portal.models import Role
from portal.pager import pager_page

FLAGS_PAGE_SIZE = 25  # flagged deployment-hours per page of the metering page
REJECTIONS_SHOWN = 20  # the newest; every one kept is at GET /api/v1/usage/rejections


@role_required(Role.OPERATOR)
def metering(request):
    """The operator's metering page: usage by pool, capacity timelines, reconciliation of
    engine against metered tokens, scrape target health, and the ingestion debugger
    (sources and rejected batches)."""
    now = clock.now()
    window = window_resolve(request.GET, default="last_30_days")
    period = window.period
    pools = list(Pool.objects.all())
    lives = pool_service_lives(pools=pools)
    stamps = capacity_stamps(pools=pools, period=period)
    capacity = [
        {
            "pool": pool,
            "in_service": lives[pool.pk],
            "chart": capacity_chart_json(pool=pool, period=period, stamp=stamps[pool.pk]),
        }
        for pool in pools
    ]
    reconciled = reconciliation_list(start=period.start, end=period.end)
    flagged = sorted(
        (row for row in reconciled if row.is_flagged), key=lambda row: row.hour, reverse=True
    )  # newest hour first, deployments in order within an hour
    tolerance_ratio, tolerance_tokens = reconciliation_tolerance()
    return render(
        request,
        "metering/telemetry/metering.html",
        {
            "title": "Metering",
            "period": period,
            "window": window,
            "by_pool": usage_by_pool(period=period),
            "capacity": capacity,
            "reconciled_hours": len(reconciled),
            "reconciliation": reconciliation_by_deployment(rows=reconciled),
            "page": pager_page(request, flagged, size=FLAGS_PAGE_SIZE),
            "tolerance_pct": tolerance_ratio * 100,
            "tolerance_tokens": tolerance_tokens,
            "targets": scrape_target_health(),
            "now": now,
            "sources": source_list(now=now),
            "rejections": rejection_list()[:REJECTIONS_SHOWN],
        },
    )
