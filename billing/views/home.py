"""The tenant member's home: usage, SLA and invoices of their tenant."""

from django.shortcuts import render

from billing.selectors.balances import credit_balance, open_balance
from billing.selectors.invoices import invoice_list
from billing.services.credits import sla_figures_list
from metering.selectors.sla.incidents import peak_impact
from metering.selectors.usage import usage_daily_by_model, window_resolve
from portal import clock
from portal.access import user_tenant
from portal.charts import figure_json, usage_by_model_chart
from portal.decorators import role_required
from portal.models import Role
from portal.periods import month_start, months_before


@role_required(Role.TENANT)
def tenant_home(request):
    """A member's front page: usage by model and day, SLA attainment against target, the
    incidents that touched them, their invoices, open and credit balances, API tokens."""
    tenant = user_tenant(request.user)
    period = window_resolve({}, default="last_30_days").period
    rows = usage_daily_by_model(user=request.user, period=period)
    this_month = month_start(clock.now())
    sla_rows = [
        sla_figures_list(month_start=months_before(this_month, n), tenants=[tenant])[0]
        for n in range(3)
    ]
    incidents = {i.pk: i for f in sla_rows for i in f.sla.incidents}
    return render(
        request,
        "billing/home/tenant_home.html",
        {
            "title": tenant.name,
            "tenant": tenant,
            "totals": {
                key: sum(r[key] for r in rows)
                for key in ("requests", "errors", "input_tokens", "output_tokens")
            },
            "chart": figure_json(usage_by_model_chart(rows)) if rows else None,
            "sla_rows": sla_rows,
            "current": sla_rows[0],
            "incidents": [
                {"incident": i, "impact": peak_impact(i)}
                for i in sorted(incidents.values(), key=lambda i: i.started_at, reverse=True)
            ],
            "invoices": invoice_list(user=request.user)[:6],
            "open_total": open_balance(tenant=tenant),
            "credit_total": credit_balance(tenant=tenant),
        },
    )
