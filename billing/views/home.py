"""The tenant member's home: usage, SLA and invoices of their tenant."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from billing.charts import budget_burn_chart
from billing.forms import BudgetForm
from billing.selectors.balances import credit_balance, open_balance
from billing.selectors.budget import budget_days, budget_get, rated_as_of
from billing.selectors.credits import sla_figures_list
from billing.selectors.invoices import invoice_list
from billing.selectors.month_to_date import month_to_date
from billing.selectors.pricing import contract_in_force, tenant_prices
from billing.views.reservations import month_so_far, reservation_rows
from metering.selectors.factory import factory_in_service_from
from metering.selectors.sla.incidents import peak_impact
from metering.selectors.usage import usage_daily_by_model, window_resolve
from portal import clock
from portal.access import user_tenant
from portal.alerts import rule_create, rule_update
from portal.charts import figure_json, usage_by_model_chart
from portal.decorators import role_required
from portal.errors import FieldError
from portal.models import Role
from portal.periods import month_start, months_back
from portal.refresh import refresh_stamp, refresh_unchanged


@role_required(Role.TENANT)
def tenant_home(request):
    """A member's front page: its budget this month (set or changed from here), usage by
    model and day, the month to date (amount due so far, allowance used), the contract and
    prices in force, SLA attainment against target, the incidents that touched them, their
    invoices, open and credit balances, API tokens. The figures of the running window
    refresh while the page is open (portal.refresh)."""
    return _home(request, form=None)


@require_POST
@role_required(Role.TENANT)
def budget_set(request):
    """Set or change the member's budget; a refusal shows the home page with its errors."""
    form = BudgetForm(request.POST)
    if form.is_valid() and _budget_save(request, form):
        return redirect("home")
    return _home(request, form=form)


def _home(request, *, form: BudgetForm | None):
    window = window_resolve({}, default="last_30_days")
    if unchanged := refresh_unchanged(request, window=window):
        return unchanged
    tenant = user_tenant(request.user)
    budget = budget_get(tenant=tenant)
    form = form or BudgetForm(initial=_initial(budget))
    period = window.period
    rows = usage_daily_by_model(user=request.user, period=period)
    now = clock.now()
    this_month = month_start(now)
    so_far = month_so_far()
    contract = contract_in_force(tenant=tenant, when=now)
    sla_rows = [
        sla_figures_list(month_start=month, tenants=[tenant])[0]
        for month in months_back(3, now=this_month, since=factory_in_service_from())
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
            "chart": figure_json(usage_by_model_chart(rows, period=period)) if rows else None,
            "period": period,
            "window": window,
            "refresh": "#usage-tiles,#month-to-date,#budget-figures,#usage-by-model",
            "refresh_stamp": refresh_stamp(window),
            "sla_rows": sla_rows,
            "current": sla_rows[0],
            "incidents": [
                {"incident": i, "impact": peak_impact(i)}
                for i in sorted(incidents.values(), key=lambda i: i.started_at, reverse=True)
            ],
            "month": month_to_date(tenant=tenant, month=this_month),
            "reservations": reservation_rows(user=request.user, start=so_far.start, end=so_far.end),
            "rated_as_of": rated_as_of(now=now),
            "contract": contract,
            "prices": tenant_prices(contract=contract, at=now),
            "invoices": invoice_list(user=request.user)[:6],
            "open_total": open_balance(tenant=tenant),
            "credit_total": credit_balance(tenant=tenant),
            "budget": budget,
            "budget_chart": _burn(budget),
            "budget_form": form,
        },
        status=400 if form.errors else 200,
    )


def _burn(budget) -> str | None:
    """The budget's month so far against it, when something was spent."""
    days = budget_days(budget)
    return figure_json(budget_burn_chart(days, budget)) if days else None


def _initial(budget) -> dict:
    rule = budget.rule
    if rule is None:
        return {}
    thresholds = ", ".join(map(str, rule.params["thresholds"]))
    return {k: rule.params.get(k) for k in ("amount", "tokens")} | {"thresholds": thresholds}


def _budget_save(request, form: BudgetForm) -> bool:
    """Create the member's budget rule or change it; a refusal is the form's error."""
    budget = budget_get(tenant=user_tenant(request.user))
    try:
        if budget.rule is None:
            rule_create(kind="budget", params=form.params(), by=request.user)
        else:
            rule_update(rule=budget.rule, changes={"params": form.params()}, by=request.user)
    except FieldError as error:
        name = error.field.removeprefix("params.")
        form.add_error(name if name in form.fields else None, error.message)
        return False
    messages.success(request, "Budget saved.")
    return True
