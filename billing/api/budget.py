"""A tenant's budget this month, cheap enough for a gateway to call per request from its
cache (architecture.md "Alerts and notifications")."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.selectors.budget import budget_answer
from portal.access import tenant_get
from portal.api.notify import NotifyPermission


class BudgetView(APIView):
    """The tenant's monthly budget: {"state" (none, unknown, ok, warning, exceeded), "unit",
    "month", "budget", "spent", "remaining", "projected", "as_of", "thresholds", "reached"},
    plus "blocked" and "blocked_by" (a hard budget of the tenant, or of ?project=, exceeded),
    "budgets" (each of them this period) and with ?project= the project's own ("project"):
    staff any tenant, a member (or its `read` or `notify` token) its own. `unknown` when rated
    usage lags the fold by more than 15 minutes (never `ok` on stale figures); `none` without
    a budget rule. A project the tenant has not is a 400 naming `project`."""

    permission_classes = [NotifyPermission]

    @extend_schema(responses={200: dict})
    def get(self, request, slug: str):
        tenant = tenant_get(user=request.user, slug=slug)
        project = request.query_params.get("project", "")
        return Response(budget_answer(tenant=tenant, project=project))
