"""Alerts: what the rules a user may see have fired (firing first, then the resolved),
with the figures behind each and a link to the evidence, and the rules themselves
(architecture.md "Alerts and notifications")."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from portal.access import user_role
from portal.alert_kinds import KINDS, alert_shown, kinds_held
from portal.alerts import alert_list, rule_create, rule_delete, rule_list, rule_update
from portal.decorators import role_required
from portal.errors import FieldError
from portal.formatting import recorded_value, words
from portal.forms import rule_params, rule_scope
from portal.models import Alert, Event, Role, Tenant
from portal.pager import pager_page

NOTIFYING = (Role.OPERATOR, Role.FINANCE, Role.TENANT)
SCOPE_LABELS = {
    "deployment": "Deployment",
    "pool": "Pool",
    "source": "Source",
    "scrape_target": "Scrape target",
}


@role_required(*NOTIFYING)
def alerts(request, *, posted=None, error: FieldError | None = None, status: int = 200):
    firing = list(alert_list(user=request.user, state=Alert.State.FIRING))
    resolved = pager_page(request, alert_list(user=request.user, state=Alert.State.RESOLVED))
    for alert in [*firing, *resolved]:
        alert.figures_shown = _figures(alert.figures)
        alert.threshold_shown, alert.value_shown = alert_shown(
            kind=alert.rule.kind,
            threshold=alert.threshold,
            value=alert.value,
            figures=alert.figures,
        )
    return render(
        request,
        "portal/alerts.html",
        {
            "title": "Alerts",
            "firing": firing,
            "page": resolved,
            "rules": _rules(request.user),
            **_rule_form(request.user, posted or {}, error),
        },
        status=status,
    )


def _rules(user) -> list:
    """The rules the user may see, each saying whether the user may change it."""
    held = {kind.name for kind in kinds_held(user)}
    rules = list(rule_list(user=user))
    for rule in rules:
        rule.held = rule.kind in held
    return rules


def _rule_form(user, posted, error: FieldError | None) -> dict:
    """The new-rule form: per kind the user may hold, its scope's options and its params,
    with what was posted and the error naming a field."""
    chosen = posted.get("kind", "")
    kinds = []
    for kind in kinds_held(user):
        prefix = f"{kind.name}:"
        key = next(iter(kind.scope_keys), None)
        kinds.append(
            {
                "name": kind.name,
                "summary": kind.summary,
                "tenant": kind.tenant,
                "scope_key": key,
                "scope_label": SCOPE_LABELS.get(key, key),
                "scope_value": posted.get(f"{prefix}scope", ""),
                "scope_options": kind.scope_options() if key and kind.scope_options else [],
                "params": [
                    {
                        "param": param,
                        "input": f"{prefix}params.{param.name}",
                        "value": posted.get(f"{prefix}params.{param.name}", ""),
                        "error": error.message
                        if error and kind.name == chosen and error.field == f"params.{param.name}"
                        else "",
                    }
                    for param in kind.params
                ],
            }
        )
    if not chosen and kinds:
        chosen = kinds[0]["name"]
    staff = user_role(user) is not Role.TENANT
    return {
        "rule_kinds": kinds,
        "rule_kind": chosen,
        "rule_tenants": Tenant.objects.order_by("name") if staff else None,
        "rule_posted": posted,
        "rule_levels": Event.Level.choices,
        "rule_error": error,
        "rule_error_field": error.field if error else "",
    }


@require_POST
@role_required(*NOTIFYING)
def rule_new(request):
    """Create a rule from the form: the chosen kind's scope and params (fields prefixed by
    the kind); errors re-show the form with the field named."""
    posted = request.POST
    name = posted.get("kind", "")
    kind = KINDS.get(name)
    try:
        if kind is None or kind not in kinds_held(request.user):
            raise FieldError("kind", "choose a kind of rule you may hold")
        prefix = f"{name}:"
        fields = {k[len(prefix) :]: v for k, v in posted.items() if k.startswith(prefix)}
        tenant = None  # a member's rule is its own tenant's (rule_create)
        staff = user_role(request.user) is not Role.TENANT
        if staff and kind.tenant != "never" and posted.get("tenant"):
            tenant = Tenant.objects.filter(slug=posted["tenant"]).first()
            if tenant is None:
                raise FieldError("tenant", "choose a tenant")
        level = posted.get("level") or "warning"
        if level not in Event.Level.values:
            raise FieldError("level", f"one of {', '.join(Event.Level.values)}")
        rule = rule_create(
            kind=name,
            by=request.user,
            tenant=tenant,
            scope=rule_scope(kind, fields.get("scope", "")),
            params=rule_params(kind, fields),
            level=level,
        )
    except FieldError as error:
        return alerts(request, posted=posted, error=error, status=error.http_status)
    messages.success(request, f"The {rule.kind} rule #{rule.pk} is watching.")
    return redirect("alerts")


def _figures(figures: dict, prefix: str = "") -> list[tuple[str, str]]:
    """An alert's figures as (label, text), nested ones under their parent's name, each as
    a reader reads it (portal.formatting.recorded_value: 1,332,628.05, 0.9991, an RFC 3339
    time as "2026-12-16 10:00 UTC")."""
    shown = []
    for key, value in figures.items():
        label = f"{prefix}{words(key)}"
        if isinstance(value, dict):
            shown += _figures(value, prefix=f"{label} ")
        else:
            shown.append((label, recorded_value(value)))
    return shown


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
