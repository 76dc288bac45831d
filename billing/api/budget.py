"""A tenant's budget this month, cheap enough for a gateway to call per request from its
cache (architecture.md "Alerts and notifications")."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.selectors.budget import budget_get
from portal.access import tenant_get
from portal.api.notify import NotifyPermission


class BudgetView(APIView):
    """{"state" (none, unknown, ok, warning, exceeded), "unit", "month", "budget", "spent",
    "remaining", "projected", "as_of", "thresholds", "reached"}: staff any tenant, a member
    (or its `read` or `notify` token) its own. `unknown` when rated usage lags the fold by
    more than 15 minutes (never `ok` on stale figures); `none` without a budget rule."""

    permission_classes = [NotifyPermission]

    @extend_schema(responses={200: dict})
    def get(self, request, slug: str):
        return Response(budget_get(tenant=tenant_get(user=request.user, slug=slug)).as_json())
