"""Price realization: list value against realized revenue."""

from django.conf import settings
from django.shortcuts import render

from billing.charts import realization_chart, unsold_chart
from billing.selectors.rating.rated_usage import realization_get
from metering.selectors.usage import window_resolve
from portal.charts import figure_json
from portal.decorators import role_required
from portal.models import Role


@role_required(Role.OPERATOR, Role.FINANCE)
def realization(request):
    """Price realization by tenant and model, and unsold tokens by reason."""
    window = window_resolve(request.GET, default="last_30_days")
    period = window.period
    result = realization_get(period=period, user=request.user)
    currency = settings.FACTORY_CURRENCY
    return render(
        request,
        "billing/rating/realization.html",
        {
            "title": "Price realization",
            "result": result,
            "unsold_totals": result.unsold_by_reason(),
            "unsold_total": sum(result.unsold_by_reason().values()),
            "period": period,
            "window": window,
            "chart": figure_json(realization_chart(result.rows, currency=currency))
            if result.rows
            else None,
            "unsold_chart": figure_json(unsold_chart(result.unsold)) if result.unsold else None,
        },
    )
