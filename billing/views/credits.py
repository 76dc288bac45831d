"""The SLA page: attainment and credits per tenant-month."""

from django.shortcuts import render

from billing.charts import sla_history_chart
from billing.selectors.credits import SlaFigures, sla_figures_list
from metering.selectors.factory import factory_in_service_from
from metering.selectors.sla.incidents import peak_impact
from metering.selectors.sla.months import TierSla
from metering.selectors.usage import last_metered_month
from portal import clock
from portal.access import tenant_get, tenant_list, user_role, user_tenant
from portal.charts import figure_json
from portal.decorators import role_required
from portal.errors import FieldError
from portal.models import Role, Tenant
from portal.pager import pager_page
from portal.periods import (
    Period,
    month_parse,
    month_start,
    months_back,
    months_before,
    next_month,
)

SLA_MONTHS = 6  # months of history on the SLA page


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def sla(request):
    """SLA attainment against target per month, the incidents behind it, and credits. A
    member sees their tenant; staff pick a month (all tenants) or a tenant (its history)."""
    is_member = user_role(request.user) is Role.TENANT
    slug = request.GET.get("tenant", "")
    # Naming a tenant is the same filter for everyone: another tenant is a 404.
    tenant = tenant_get(user=request.user, slug=slug) if slug else None
    if is_member:
        tenant = user_tenant(request.user)
    this_month = month_start(clock.now())
    # Newest first; none before the factory was in service (nothing earlier has figures).
    months = months_back(SLA_MONTHS, now=this_month, since=factory_in_service_from())
    context = {"title": "SLA", "is_member": is_member, "tenant": tenant}
    if tenant is not None:
        history = [sla_figures_list(month_start=m, tenants=[tenant])[0] for m in months[::-1]]
        incidents = {i.pk: i for f in history for i in f.sla.incidents}
        context |= {
            "history": history[::-1],
            "by_tier": _by_tier(history[::-1]),
            "incidents": [
                {"incident": i, "impact": peak_impact(i)}
                for i in sorted(incidents.values(), key=lambda i: i.started_at, reverse=True)
            ],
            "chart": figure_json(sla_history_chart(history)),
        }
    else:
        # Opens on the last month with usage (this month once it has any), within the
        # 13 months usage is kept.
        recent = Period(months_before(this_month, 12), next_month(this_month))
        month = _month_param(
            request.GET.get("month"), default=last_metered_month(within=recent) or this_month
        )
        # A page of the tenants (by slug), their figures only.
        page = pager_page(request, tenant_list(user=request.user).order_by("slug"))
        rows = sla_figures_list(month_start=month, tenants=page.object_list, user=request.user)
        context |= {
            "month": month,
            "months": months if month in months else [*months, month],
            "page": page,
            "rows": rows,
            "by_tier": _by_tier(rows),
        }
    context["tenants"] = [] if is_member else Tenant.objects.order_by("name")
    return render(request, "billing/credits/sla.html", context)


def _by_tier(rows: list[SlaFigures]) -> list[tuple[SlaFigures, str, TierSla]]:
    """The tenant-months' figures per service tier, as /api/v1/sla's `by_tier` gives them:
    (the tenant-month, the tier, its figures), in the rows' order."""
    return [(row, tier, made) for row in rows for tier, made in row.sla.by_tier.items()]


def _month_param(value: str | None, *, default):
    """The month asked for (YYYY-MM, within the years the portal takes), else `default`."""
    try:
        return month_parse(value)
    except FieldError:
        return default
