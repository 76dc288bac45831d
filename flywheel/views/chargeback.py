"""Projects and chargeback (ui.md): a tenant's projects with their quotas and usage, and a
month's chargeback per project on the invoice basis and at cost, with downloads. Members
see their own tenant's; operators and finance any tenant's (or every tenant's chargeback)."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_safe

from billing.selectors.budget import tenant_budgets
from flywheel.domain.chargeback import COST, INVOICE
from flywheel.selectors.chargeback import chargeback_read
from portal import clock
from portal.access import tenant_get, tenant_list, user_role, user_tenant
from portal.decorators import role_required
from portal.errors import FieldError
from portal.models import Role
from portal.periods import month_parse, month_start
from portal.projects import NONE


@require_safe
@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def projects(request):
    is_member = user_role(request.user) is Role.TENANT
    slug = user_tenant(request.user).slug if is_member else request.GET.get("tenant", "")
    tenant = tenant_get(user=request.user, slug=slug) if slug else None
    now = clock.now()
    month = month_parse(request.GET["month"]) if request.GET.get("month") else month_start(now)
    invoice = chargeback_read(user=request.user, month=month, tenant=slug, basis=INVOICE)
    try:
        cost, cost_error = (
            chargeback_read(user=request.user, month=month, tenant=slug, basis=COST),
            "",
        )
    except FieldError as error:  # a pool in service without a cost model in force
        cost, cost_error = None, error.message
    quotas: dict[str, list] = {}
    if tenant is not None:
        for budget in tenant_budgets(tenant=tenant, now=now):
            quotas.setdefault(budget.project or NONE, []).append(budget)
    used = {row["project"]: row for row in invoice.rows}
    project_rows = []
    if tenant is not None:
        slugs = [NONE, *tenant.projects.order_by("slug").values_list("slug", flat=True)]
        names = dict(tenant.projects.values_list("slug", "name"))
        centers = dict(tenant.projects.values_list("slug", "cost_center"))
        for project in slugs:
            project_rows.append(
                {
                    "slug": project,
                    "name": names.get(project, "usage without a project"),
                    "cost_center": centers.get(project, ""),
                    "usage": used.get(project),
                    "quotas": quotas.get(project, []) if project != NONE else [],
                }
            )
    query = f"month={month:%Y-%m}" + (f"&tenant={slug}" if slug else "")
    return render(
        request,
        "flywheel/chargeback/projects.html",
        {
            "title": "Projects and chargeback",
            "is_member": is_member,
            "tenant": slug,
            "tenant_obj": tenant,
            "tenants": [] if is_member else tenant_list(user=request.user).order_by("name"),
            "month": month,
            "is_open": month == month_start(now),
            "tenant_quotas": quotas.get(NONE, []),
            "projects": project_rows,
            "invoice": invoice,
            "cost": cost,
            "cost_error": cost_error,
            "query": query,
        },
    )
