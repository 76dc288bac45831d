"""Alert rules and alerts (kpis.md section 3c; architecture.md "Alerts and notifications").

A rule's kind is one an app registered (portal.alert_kinds): it says how the rule's params
are checked, the scopes it takes, who may hold it and how it is evaluated. The `alerts` job
(`alerts_evaluate`) runs each kind's evaluation and keeps the alerts: a finding whose key
(rule, scope key, window start, threshold) has no alert yet fires one; a firing alert whose
rule was evaluated without finding it again resolves; a key fires at most once. Both are
events (portal.events), delivered like every other: to the rule's tenant and the factory."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet

from portal import clock
from portal.access import tenant_scoped, user_role, user_tenant
from portal.alert_kinds import KINDS, Finding, kind_get
from portal.errors import FieldError
from portal.events import EventIn, events_raise
from portal.formatting import rfc3339
from portal.models import Alert, AlertRule, Role, Tenant
from portal.services import audit_object, audit_snapshot, object_delete


class RuleForbidden(FieldError):
    """The user's role may not hold this rule (403)."""

    http_status = 403


class RuleConflict(FieldError):
    """A rule that may exist once already does (409)."""

    http_status = 409


# ---------------------------------------------------------------- rules


def rule_list(*, user: User) -> QuerySet[AlertRule]:
    """The rules a user may see: every one for staff, its tenant's for a member."""
    return tenant_scoped(AlertRule.objects.select_related("tenant"), user=user)


def rule_access_check(*, user: User, kind: str, tenant: Tenant | None) -> None:
    """Operators hold every kind on any scope; finance and members the kinds that name
    them, finance on any tenant, a member on its own."""
    role = user_role(user)
    if role is Role.OPERATOR:
        return
    if role not in kind_get(kind).holders:
        raise RuleForbidden("kind", f"your role may not hold {kind} rules")
    if role is Role.TENANT and (tenant is None or tenant != user_tenant(user)):
        raise RuleForbidden("tenant", "a member holds rules on its own tenant only")
    if tenant is None:
        raise RuleForbidden("tenant", "your role holds rules on a tenant only")


def _checked(kind: str, *, tenant: Tenant | None, scope: dict, params: dict) -> tuple[dict, dict]:
    definition = kind_get(kind)
    if definition.tenant == "required" and tenant is None:
        raise FieldError("tenant", f"a {kind} rule is a tenant's: name it")
    if definition.tenant == "never" and tenant is not None:
        raise FieldError("tenant", f"a {kind} rule watches the factory: it names no tenant")
    if not isinstance(scope, dict):
        raise FieldError("scope", "an object")
    if unknown := sorted(set(scope) - definition.scope_keys):
        allowed = ", ".join(sorted(definition.scope_keys)) or "nothing but the tenant"
        raise FieldError(f"scope.{unknown[0]}", f"a {kind} rule's scope names {allowed}")
    if "project" in scope:
        scope = {**scope, "project": _project_named(scope["project"], tenant=tenant)}
    if definition.scope_check is not None:
        scope = definition.scope_check(scope)
    if not isinstance(params, dict):
        raise FieldError("params", "an object")
    return scope, definition.params_check(params)


def _project_named(value, *, tenant: Tenant | None) -> str:
    """A scope's project: a slug of the rule's tenant's projects (a tenant names its own
    only: another's is unknown to it); else a FieldError naming scope.project."""
    if tenant is None or not isinstance(value, str) or not tenant.projects.filter(slug=value):
        raise FieldError("scope.project", "one of the tenant's projects, by slug")
    return value


def _one_key(kind: str, scope: dict, params: dict) -> str:
    """What a tenant's one rule of the kind is one per (AlertRule.one_key)."""
    definition = kind_get(kind)
    return definition.one_key(scope, params) if definition.one_key else ""


@transaction.atomic
def rule_create(
    *,
    kind: str,
    by: User,
    tenant: Tenant | None = None,
    scope: dict | None = None,
    params: dict | None = None,
    level: str = "warning",
    enabled: bool = True,
) -> AlertRule:
    if user_role(by) is Role.TENANT and tenant is None:
        tenant = user_tenant(by)  # a member's rule is its tenant's
    rule_access_check(user=by, kind=kind, tenant=tenant)
    scope, params = _checked(kind, tenant=tenant, scope=scope or {}, params=params or {})
    one_per_tenant = kind_get(kind).one_per_tenant
    one_key = _one_key(kind, scope, params) if one_per_tenant else ""
    _one_check(kind=kind, tenant=tenant, one_key=one_key, one_per_tenant=one_per_tenant)
    rule = AlertRule.objects.create(
        kind=kind,
        tenant=tenant,
        scope=scope,
        params=params,
        level=level,
        enabled=enabled,
        one_per_tenant=one_per_tenant,
        one_key=one_key,
    )
    audit_object(obj=rule, actor=by, action="create", object_type="alert_rule")
    return rule


def _one_check(*, kind: str, tenant: Tenant | None, one_key: str, one_per_tenant: bool) -> None:
    """A 409 when the tenant holds a rule of the kind that may exist once per key already."""
    if one_per_tenant and AlertRule.objects.filter(kind=kind, tenant=tenant, one_key=one_key):
        what = f" ({one_key})" if one_key else ""
        raise RuleConflict("tenant", f"{tenant.slug} has a {kind}{what} already: change that one")


@transaction.atomic
def rule_update(*, rule: AlertRule, changes: dict, by: User) -> AlertRule:
    """Change scope, params, level or enabled (the kind and the tenant are fixed)."""
    rule_access_check(user=by, kind=rule.kind, tenant=rule.tenant)
    before = audit_snapshot(rule)
    scope, params = _checked(
        rule.kind,
        tenant=rule.tenant,
        scope=changes.get("scope", rule.scope),
        params=changes.get("params", rule.params),
    )
    one_key = _one_key(rule.kind, scope, params) if rule.one_per_tenant else ""
    if one_key != rule.one_key:
        _one_check(kind=rule.kind, tenant=rule.tenant, one_key=one_key, one_per_tenant=True)
    rule.scope, rule.params, rule.one_key = scope, params, one_key
    rule.level = changes.get("level", rule.level)
    rule.enabled = changes.get("enabled", rule.enabled)
    rule.save()
    audit_object(obj=rule, actor=by, action="update", object_type="alert_rule", before=before)
    return rule


@transaction.atomic
def rule_delete(*, rule: AlertRule, by: User) -> None:
    rule_access_check(user=by, kind=rule.kind, tenant=rule.tenant)
    object_delete(obj=rule, actor=by, object_type="alert_rule")


# ---------------------------------------------------------------- alerts


def alert_list(*, user: User, state: str | None = None) -> QuerySet[Alert]:
    """The alerts of the rules a user may see, newest first."""
    alerts = Alert.objects.filter(rule__in=rule_list(user=user)).select_related("rule__tenant")
    return alerts.filter(state=state) if state else alerts


def alerts_evaluate(
    *, now: datetime | None = None, kinds: Iterable[str] | None = None
) -> dict[str, int]:
    """The `alerts` job: evaluate every enabled rule (of `kinds`, when given) through its
    kind, fire the findings no alert has the key of, resolve the firing alerts of evaluated
    rules found no more. In one transaction holding the rules, so two runs never fire one
    key twice."""
    now = now or clock.now()
    with transaction.atomic():
        rules = AlertRule.objects.select_for_update(of=("self",)).filter(enabled=True)
        if kinds is not None:
            rules = rules.filter(kind__in=list(kinds))
        rules = list(rules.select_related("tenant"))
        findings, evaluated = _evaluate(rules, now)
        keys = {finding.key: finding for finding in findings}
        holding = {_condition(*key) for key in keys}
        known = _alerts(rules, findings)
        firing = {_condition(*key) for key, a in known.items() if a.state == Alert.State.FIRING}
        fired = [
            finding
            for key, finding in keys.items()
            if key not in known and not (_is_condition(finding.rule) and _condition(*key) in firing)
        ]
        _fire(fired, now=now)
        resolved = [
            alert
            for key, alert in known.items()
            if alert.state == Alert.State.FIRING
            and alert.rule_id in evaluated
            and key not in keys
            and not (_is_condition(alert.rule) and _condition(*key) in holding)
        ]
        _resolve(resolved, now=now)
    return {"rules": len(rules), "fired": len(fired), "resolved": len(resolved)}


def _evaluate(rules: list[AlertRule], now: datetime) -> tuple[list[Finding], set[int]]:
    by_kind: dict[str, list[AlertRule]] = defaultdict(list)
    for rule in rules:
        by_kind[rule.kind].append(rule)
    findings: list[Finding] = []
    evaluated: set[int] = set()
    for name, of_kind in by_kind.items():
        kind = KINDS.get(name)
        if kind is None:
            continue  # its app does not evaluate it
        evaluation = kind.evaluate(of_kind, now)
        findings += evaluation.findings
        evaluated |= {rule.pk for rule in of_kind} - evaluation.skipped
    return findings, evaluated


def _is_condition(rule: AlertRule) -> bool:
    return KINDS[rule.kind].condition


def _condition(rule_id: int, scope_key: str, window_start: datetime, threshold: str) -> tuple:
    """What a condition kind's alert is while it fires: its key but the onset."""
    return (rule_id, scope_key, threshold)


def _alerts(rules: Iterable[AlertRule], findings: list[Finding]) -> dict[tuple, Alert]:
    """The alerts of `rules` that are firing or have a finding's key (fired before), each
    holding its rule (read once, above)."""
    rules = {rule.pk: rule for rule in rules}
    starts = {finding.window_start for finding in findings}
    alerts = Alert.objects.filter(rule__in=list(rules)).filter(
        Q(state=Alert.State.FIRING) | Q(window_start__in=starts)
    )
    known = {}
    for alert in alerts:
        alert.rule = rules[alert.rule_id]
        known[(alert.rule_id, alert.scope_key, alert.window_start, alert.threshold)] = alert
    return known


def _fire(findings: list[Finding], *, now: datetime) -> None:
    """The findings' alerts and their events, in a few statements however many."""
    alerts = Alert.objects.bulk_create(
        Alert(
            rule=finding.rule,
            scope_key=finding.scope_key,
            window_start=finding.window_start,
            threshold=finding.threshold,
            level=finding.level or finding.rule.level,
            value=finding.value,
            figures=finding.figures,
            summary=finding.summary[:300],
            link=finding.link,
            fired_at=now,
        )
        for finding in findings
    )
    events_raise(
        [
            _announced(a, type=KINDS[a.rule.kind].fired_event, summary=a.summary, at=now)
            for a in alerts
        ]
    )


def _resolve(alerts: list[Alert], *, now: datetime) -> None:
    for alert in alerts:
        alert.state, alert.resolved_at = Alert.State.RESOLVED, now
    Alert.objects.bulk_update(alerts, ["state", "resolved_at"])
    events_raise(
        [
            _announced(a, type="alert.resolved", summary=f"Resolved: {a.summary}", at=now)
            for a in alerts
        ]
    )


def _announced(alert: Alert, *, type: str, summary: str, at: datetime) -> EventIn:
    rule = alert.rule
    return EventIn(
        type=type,
        summary=summary,
        data={
            "alert": alert.pk,
            "rule": rule.pk,
            "kind": rule.kind,
            "scope": {"tenant": rule.tenant.slug} | rule.scope if rule.tenant else rule.scope,
            "threshold": alert.threshold,
            "value": alert.value,
            "window_start": rfc3339(alert.window_start),
            "figures": alert.figures,
            "state": alert.state,
        },
        tenant=rule.tenant,
        level=alert.level,
        link=alert.link,
        at=at,
    )
