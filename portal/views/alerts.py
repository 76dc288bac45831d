"""Alerts: what the rules a user may see have fired (firing first, then the resolved),
with the figures behind each and a link to the evidence, and the rules themselves
(architecture.md "Alerts and notifications")."""

from datetime import datetime
from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from portal.alerts import alert_list, rule_delete, rule_list, rule_update
from portal.decorators import role_required
from portal.errors import FieldError
from portal.models import Alert, Role
from portal.pager import pager_page

NOTIFYING = (Role.OPERATOR, Role.FINANCE, Role.TENANT)


@role_required(*NOTIFYING)
def alerts(request):
    firing = list(alert_list(user=request.user, state=Alert.State.FIRING))
    resolved = pager_page(request, alert_list(user=request.user, state=Alert.State.RESOLVED))
    for alert in [*firing, *resolved]:
        alert.figures_shown = [
            (key.replace("_", " "), _shown(value)) for key, value in alert.figures.items()
        ]
    return render(
        request,
        "portal/alerts.html",
        {
            "title": "Alerts",
            "firing": firing,
            "page": resolved,
            "rules": rule_list(user=request.user),
        },
    )


def _shown(value) -> str:
    """A figure as a reader reads it: numbers grouped (1,332,628.05), an RFC 3339 time as
    "16 Dec 2026 10:00 UTC"."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if not isinstance(value, str):
        return str(value)
    try:
        return f"{Decimal(value):,}"
    except InvalidOperation:
        pass
    try:
        return f"{datetime.fromisoformat(value):%d %b %Y %H:%M} UTC"
    except ValueError:
        return value


@require_POST
@role_required(*NOTIFYING)
def rule_action(request, pk: int):
    """enable, disable or delete a rule the user may hold."""
    rule = get_object_or_404(rule_list(user=request.user), pk=pk)
    action = request.POST.get("action", "")
    try:
        if action in ("enable", "disable"):
            rule_update(rule=rule, changes={"enabled": action == "enable"}, by=request.user)
            messages.success(request, f"The {rule.kind} rule #{rule.pk} {action}d.")
        elif action == "delete":
            rule_delete(rule=rule, by=request.user)
            messages.success(request, f"The {rule.kind} rule #{rule.pk} deleted.")
        else:
            messages.error(request, "Unknown action.")
    except FieldError as error:
        messages.error(request, error.message)
    return redirect("alerts")
