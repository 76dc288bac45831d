"""Alert rule kinds (kpis.md section 3c): what an app declares about each kind it owns.

A kind lives in the app that owns its data: the app registers it here (`kind_register`,
from its AppConfig.ready) with how its params are checked, the scopes it takes, who may
hold it and how it is evaluated from its read models. The kernel names no kind: a rule's
kind is one registered (portal.alerts checks it), so a new kind needs no kernel change and
no migration. The rules and the `alerts` job are portal.alerts; the events they raise,
portal.events (which reads this registry for finance's audience, not portal.alerts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User

from portal.access import user_role
from portal.errors import FieldError
from portal.models import AlertRule, Role


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


# How a kind writes one of its alerts' figures (the threshold or the value, as stored)
# for people: from that text and the alert's figures, in the figure's unit ("TEF 44.8%",
# "15.2× the budget rate"). Every place that shows an alert reads it: the alerts page,
# the summary the kind writes (inbox, webhooks, email) calls the same function.
Shown = Callable[[str, dict], str]


def shown_as_stored(text: str, figures: dict) -> str:
    """A figure stored as people read it already ("86.0%", "12 min")."""
    return text


def shown_with_unit(template: str) -> Shown:
    """A figure shown with its unit: shown_with_unit("{} min")("15", …) → "15 min"."""
    return lambda text, figures: template.format(text)


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
    # What `scope` may name beside the tenant; "project", one of the rule's tenant's projects,
    # is checked by the kernel (portal.alerts), which holds the projects.
    scope_keys: frozenset[str] = frozenset()
    # What the scope names exists (a pool…): the checked scope; FieldError naming scope.<x>.
    scope_check: Callable[[dict], dict] | None = None
    # The browser's form: the params asked for, and what the scope may name (value, label).
    params: tuple[Param, ...] = ()
    scope_options: Callable[[], list[tuple[object, str]]] | None = None
    summary: str = ""  # what it watches, in a sentence
    threshold_shown: Shown = shown_as_stored  # an alert's threshold in words and units
    value_shown: Shown = shown_as_stored  # an alert's value in words and units
    fired_event: str = "alert.fired"
    # A condition kind (burn, drift, silence…) keys its alerts by the time the condition
    # began: while one is firing for a (rule, scope key, threshold), a finding of the same
    # continues it, whatever onset it names. A calendar kind (budget…) keys by its month
    # or day, so each threshold fires once in it.
    condition: bool = False
    # A tenant holds one rule of the kind at most (its budget): a second is a 409, and the
    # database refuses it too (AlertRule.one_per_tenant) ...
    one_per_tenant: bool = False
    # ... per the key this gives its checked (scope, params) (a budget: one per project and
    # period); None: one per tenant.
    one_key: Callable[[dict, dict], str] | None = None


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


def kind_get(name: str) -> Kind:
    """The registered kind `name`; FieldError naming `kind` when no app registered it."""
    kind = KINDS.get(name)
    if kind is None:
        raise FieldError("kind", f"one of {', '.join(sorted(KINDS))}")
    return kind


def alert_shown(*, kind: str, threshold: str, value: str, figures: dict) -> tuple[str, str]:
    """An alert's threshold and value as its kind writes them for people (a kind no app
    registers any longer: as stored)."""
    definition = KINDS.get(kind)
    if definition is None:
        return threshold, value
    return (
        definition.threshold_shown(threshold, figures),
        definition.value_shown(value, figures),
    )


def kinds_held(user: User) -> list[Kind]:
    """The kinds a user may hold rules of, by name."""
    role = user_role(user)
    return [
        KINDS[name]
        for name in sorted(KINDS)
        if role is Role.OPERATOR or role in KINDS[name].holders
    ]
