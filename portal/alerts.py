"""Alert rules and alerts (kpis.md section 3c; architecture.md "Alerts and notifications").

A rule kind lives in the app that owns its data: the app registers it here
(`kind_register`, from its AppConfig.ready) with how its params are checked, the scopes it
takes, who may hold it and how it is evaluated from read models. The `alerts` job
(`alerts_evaluate`) runs each kind's evaluation and keeps the alerts: a finding whose key
(rule, scope key, window start, threshold) has no alert yet fires one; a firing alert whose
rule was evaluated without finding it again resolves; a key fires at most once. Both are
events (portal.events), delivered like every other: to the rule's tenant and the factory."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet

from portal import clock
from portal.access import tenant_scoped, user_role, user_tenant
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


@dataclass(frozen=True)
class Finding:
    """A rule's condition holding: the key's parts, the figure shown and every figure
    behind it (decimal strings), a readable summary and the page with the evidence."""

    rule: AlertRule
    window_start: datetime
    threshold: str
    value: str
    summary: str
    figures: dict
    link: str = ""
    scope_key: str = ""
    level: str | None = None  # None: the rule's

    @property
    def key(self) -> tuple:
        return (self.rule.pk, self.scope_key, self.window_start, self.threshold)


@dataclass(frozen=True)
class Evaluation:
    findings: list[Finding]
    # Rules whose figures could not be read (stale): their alerts stay as they are.
    skipped: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Param:
    """A rule param as the browser's form asks for it: `int`, `decimal` (kept as text),
    `choice` (one of `choices`) or `percents` (whole percents, comma-separated)."""

    name: str
    label: str
    type: str = "int"
    help: str = ""
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kind:
    name: str
    params_check: Callable[[dict], dict]  # normalized params; FieldError naming params.<x>
    evaluate: Callable[[list[AlertRule], datetime], Evaluation]
    holders: frozenset[Role]  # roles that may hold it, operators aside (they hold every kind)
    # Whether a rule of the kind names a tenant: "required" (a tenant's budget), "optional"
    # (a burn rate: the factory's or a tenant's) or "never" (the factory's plumbing).
    tenant: str = "never"
    scope_keys: frozenset[str] = frozenset()  # what `scope` may name beside the tenant
    # What the scope names exists (a pool…): the checked scope; FieldError naming scope.<x>.
    scope_check: Callable[[dict], dict] | None = None
    # The browser's form: the params asked for, and what the scope may name (value, label).
    params: tuple[Param, ...] = ()
    scope_options: Callable[[], list[tuple[object, str]]] | None = None
    summary: str = ""  # what it watches, in a sentence
    threshold_shown: str = "{}"  # an alert's threshold as read: "{}%", "{} min"
    fired_event: str = "alert.fired"
    # A condition kind (burn, drift, silence…) keys its alerts by the time the condition
    # began: while one is firing for a (rule, scope key, threshold), a finding of the same
    # continues it, whatever onset it names. A calendar kind (budget…) keys by its month
    # or day, so each threshold fires once in it.
    condition: bool = False


KINDS: dict[str, Kind] = {}


def scope_naming(
    key: str, *, exists: Callable[[Any], bool], expected: str, of_type: type = str
) -> Callable[[dict], dict]:
    """A kind's `scope_check` when its scope names at most one thing: {} (every one) or
    {key: value}, `value` an `of_type` (never a bool) for which `exists(value)`; else a
    FieldError naming scope.<key>, saying what is `expected`."""

    def check(scope: dict) -> dict:
        if key in scope:
            value = scope[key]
            if isinstance(value, bool) or not isinstance(value, of_type) or not exists(value):
                raise FieldError(f"scope.{key}", expected)
        return scope

    return check


def kind_register(kind: Kind) -> None:
    KINDS[kind.name] = kind


# A tenant's SLO target from its contract (kpis.md 3c: a tenant's burn rule falls back to
# it): contracts live above the app whose kind reads it, which provides the read at start-up.
TenantTargets = Callable[[list[int], datetime], dict[int, Decimal]]
_tenant_targets: list[TenantTargets] = []


def tenant_slo_targets_provide(read: TenantTargets) -> None:
    _tenant_targets[:] = [read]


def tenant_slo_targets(tenant_ids: list[int], at: datetime) -> dict[int, Decimal]:
    """The contract SLO target in force at `at` of each tenant that has one."""
    return _tenant_targets[0](tenant_ids, at) if _tenant_targets and tenant_ids else {}


def kinds_held(user: User) -> list[Kind]:
    """The kinds a user may hold rules of, by name."""
    role = user_role(user)
    return [
        KINDS[name]
        for name in sorted(KINDS)
        if role is Role.OPERATOR or role in KINDS[name].holders
    ]


def _kind(name: str) -> Kind:
    kind = KINDS.get(name)
    if kind is None:
        raise FieldError("kind", f"one of {', '.join(sorted(KINDS))}")
    return kind


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
    if role not in _kind(kind).holders:
        raise RuleForbidden("kind", f"your role may not hold {kind} rules")
    if role is Role.TENANT and (tenant is None or tenant != user_tenant(user)):
        raise RuleForbidden("tenant", "a member holds rules on its own tenant only")
    if tenant is None:
        raise RuleForbidden("tenant", "your role holds rules on a tenant only")


def _checked(kind: str, *, tenant: Tenant | None, scope: dict, params: dict) -> tuple[dict, dict]:
    definition = _kind(kind)
    if definition.tenant == "required" and tenant is None:
        raise FieldError("tenant", f"a {kind} rule is a tenant's: name it")
    if definition.tenant == "never" and tenant is not None:
        raise FieldError("tenant", f"a {kind} rule watches the factory: it names no tenant")
    if not isinstance(scope, dict):
        raise FieldError("scope", "an object")
    if unknown := sorted(set(scope) - definition.scope_keys):
        allowed = ", ".join(sorted(definition.scope_keys)) or "nothing but the tenant"
        raise FieldError(f"scope.{unknown[0]}", f"a {kind} rule's scope names {allowed}")
    if definition.scope_check is not None:
        scope = definition.scope_check(scope)
    if not isinstance(params, dict):
        raise FieldError("params", "an object")
    return scope, definition.params_check(params)


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
    if kind == AlertRule.Kind.BUDGET and AlertRule.objects.filter(kind=kind, tenant=tenant):
        raise RuleConflict("tenant", f"{tenant.slug} has a budget already: change that one")
    rule = AlertRule.objects.create(
        kind=kind, tenant=tenant, scope=scope, params=params, level=level, enabled=enabled
    )
    audit_object(obj=rule, actor=by, action="create", object_type="alert_rule")
    return rule


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
    rule.scope, rule.params = scope, params
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
