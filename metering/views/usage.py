"""The usage page: tokens by day, model and service tier, and its CSV export."""

from django.shortcuts import render

from metering.selectors.factory import pool_list, served_model_list
from metering.selectors.usage import USAGE_SUMS, usage_daily_by_model, window_resolve
from portal.access import tenant_list, user_role
from portal.charts import figure_json, usage_by_model_chart
from portal.decorators import role_required
from portal.exports import csv_response, export_query
from portal.filters import rows_ordered
from portal.models import Role
from portal.pager import pager_page
from portal.projects import NONE, projects_of_shown
from portal.refresh import refresh_stamp, refresh_unchanged

CSV_FIELDS = [
    "day",
    "model",
    "project",
    "service_tier",
    "requests",
    "errors",
    "input_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "p50_ms",
    "p95_ms",
]

NEWEST_FIRST = "-day"  # the table's order without ?ordering= (within a day, by model)


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def usage(request):
    """Usage by model and day: chart, a paginated table, and a CSV of every row of the
    period and filters shown (not only the current page), both sorted by `ordering` (a
    column; without it the table newest day first, today on its first page, and the CSV by
    day, model and project, as it is read into the books); the filters are the API's
    (UsageFilterSet: tenant, model, pool, project (a slug of the tenant's projects or
    (none)); another tenant's slug is a 404). A running window's figures refresh while the
    page is open (portal.refresh)."""
    window = window_resolve(request.GET, default="last_30_days")
    if unchanged := refresh_unchanged(request, window=window):
        return unchanged
    tenant = request.GET.get("tenant", "")
    period = window.period
    is_member = user_role(request.user) is Role.TENANT
    rows = usage_daily_by_model(
        user=request.user, period=period, filters=request.GET, by_project=True, by_tier=True
    )
    ordering = request.GET.get("ordering")
    if request.GET.get("format") == "csv":
        table = rows_ordered(rows, ordering, columns=CSV_FIELDS)
        return csv_response(
            filename=f"usage-{period.start:%Y%m%d}-{period.end:%Y%m%d}.csv",  # end excluded
            header=CSV_FIELDS,
            rows=([row[f] for f in CSV_FIELDS] for row in table),
        )
    table = rows_ordered(rows, ordering or NEWEST_FIRST, columns=CSV_FIELDS)
    totals = {name: sum(r[name] for r in rows) for name in USAGE_SUMS}
    return render(
        request,
        "metering/usage/usage.html",
        {
            "title": "Usage",
            "page": pager_page(request, table),
            "ordering_default": NEWEST_FIRST,
            "row_count": len(rows),
            "csv_query": export_query(request),
            "totals": totals,
            "period": period,
            "window": window,
            "refresh": "#usage-figures",
            "refresh_stamp": refresh_stamp(window),
            "tenant": tenant,
            "model": request.GET.get("model", ""),
            "pool": request.GET.get("pool", ""),
            "project": request.GET.get("project", ""),
            "projects": projects_of_shown(user=request.user, tenant_slug=tenant),
            "no_project": NONE,
            "is_member": is_member,
            "tenants": [] if is_member else tenant_list(user=request.user).order_by("name"),
            "models": served_model_list(),
            "pools": pool_list(),
            "chart": figure_json(usage_by_model_chart(rows, period=period)) if rows else None,
        },
    )
