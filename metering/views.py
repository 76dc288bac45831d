import csv

from django.http import HttpResponse
from django.shortcuts import render

from metering.charts import capacity_chart, usage_by_model_chart
from metering.models import Pool
from metering.selectors import capacity_series, usage_by_pool, usage_daily_by_model
from portal.access import user_role
from portal.charts import figure_json
from portal.decorators import role_required
from portal.models import Role, Tenant
from portal.periods import PRESETS, period_from_preset

CSV_FIELDS = [
    "day",
    "model",
    "requests",
    "errors",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "p50_ms",
    "p95_ms",
]


def _csv_cell(value) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def usage(request):
    """Usage by model and day: chart, table and CSV of exactly what is shown."""
    period, preset = period_from_preset(request.GET)
    is_member = user_role(request.user) is Role.TENANT
    tenant = None if is_member else (request.GET.get("tenant") or None)
    rows = usage_daily_by_model(user=request.user, period=period, tenant=tenant)
    if request.GET.get("format") == "csv":
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="usage-{period.start:%Y%m%d}.csv"'
        writer = csv.writer(response)
        writer.writerow(CSV_FIELDS)
        for row in rows:
            writer.writerow([_csv_cell(row[f]) for f in CSV_FIELDS])
        return response
    totals = {
        k: sum(r[k] for r in rows) for k in ("requests", "errors", "input_tokens", "output_tokens")
    }
    return render(
        request,
        "metering/usage.html",
        {
            "title": "Usage",
            "rows": rows,
            "totals": totals,
            "period": period,
            "preset": preset,
            "presets": PRESETS,
            "tenant": tenant,
            "is_member": is_member,
            "tenants": [] if is_member else Tenant.objects.order_by("name"),
            "chart": figure_json(usage_by_model_chart(rows)) if rows else None,
        },
    )


@role_required(Role.OPERATOR)
def metering(request):
    """The operator's metering page: usage by pool, capacity timelines."""
    period, preset = period_from_preset(request.GET)
    pools = list(Pool.objects.all())
    capacity = []
    for pool in pools:
        series = capacity_series(pool=pool, period=period)
        capacity.append(
            {
                "pool": pool,
                "chart": figure_json(capacity_chart(series, pool.slug)) if series else None,
            }
        )
    return render(
        request,
        "metering/metering.html",
        {
            "title": "Metering",
            "period": period,
            "preset": preset,
            "presets": PRESETS,
            "by_pool": usage_by_pool(period=period),
            "capacity": capacity,
        },
    )
