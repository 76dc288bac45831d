"""Events: what the apps tell people (architecture.md "Alerts and notifications"). An app
raises an event through `event_raise` inside the transaction that caused it; the event and
its deliveries (each webhook endpoint and each opted-in user it is addressed to) are
stored with it, so a rollback raises nothing and a crash loses nothing; the `deliver` job
sends them once that transaction commits. The inbox reads the same events.

Who an event reaches: one addressed to a tenant reaches that tenant's endpoints and
members; one for the factory reaches the factory's endpoints and staff: operators every
type, finance the billing types. Investors receive none."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from portal import clock
from portal.access import user_of, user_role, user_tenant, with_access
from portal.alert_kinds import KINDS
from portal.models import (
    Delivery,
    EmailSubscription,
    Event,
    InboxRead,
    Role,
    Tenant,
    WebhookEndpoint,
)
from portal.pipeline import DELIVER, stage_schedule

# Every event type, what it says (the endpoint and email forms list these).
EVENT_TYPES: dict[str, str] = {
    "invoice.issued": "An invoice was issued",
    "invoice.overdue": "An invoice is past due with an amount outstanding",
    "payment.received": "A payment was recorded on an invoice",
    "credit_note.issued": "A credit note was issued",
    "incident.opened": "An incident was opened",
    "incident.updated": "An incident was updated",
    "incident.resolved": "An incident was resolved",
    "usage.batch_rejected": "A usage batch was refused, or partly accepted",
    "flywheel.proposal": "The weekly flywheel cycle proposed levers",
    "alert.fired": "An alert rule's condition holds",
    "alert.resolved": "An alert's condition no longer holds",
    "budget.threshold_reached": "A tenant's spend reached a threshold of its budget",
}
# The factory's billing events: the ones finance receives and may subscribe endpoints to.
BILLING_EVENTS = frozenset(
    {
        "invoice.issued",
        "invoice.overdue",
        "payment.received",
        "credit_note.issued",
        "budget.threshold_reached",
    }
)


@dataclass(frozen=True)
class EventIn:
    """An event to raise (`event_raise`'s arguments)."""

    type: str
    summary: str
    data: Mapping[str, Any]
    tenant: Tenant | None = None
    for_factory: bool = True
    level: str = Event.Level.INFO
    link: str = ""
    at: datetime | None = None


def event_raise(
    *,
    type: str,
    summary: str,
    data: Mapping[str, Any],
    tenant: Tenant | None = None,
    for_factory: bool = True,
    level: str = Event.Level.INFO,
    link: str = "",
    at: datetime | None = None,
) -> Event:
    """Store an event and its deliveries in the caller's transaction, and ask for the
    `deliver` job once it commits. `tenant`: the tenant it is addressed to (its endpoints
    and members); `for_factory`: the factory's endpoints and staff too. `data` must hold
    only what its audience may see (never another tenant's)."""
    spec = EventIn(type, summary, data, tenant, for_factory, level, link, at)
    return events_raise([spec])[0]


def events_raise(specs: list[EventIn]) -> list[Event]:
    """`event_raise` for many events at once (a job firing alerts), in a number of queries
    that does not grow with them."""
    for spec in specs:
        if spec.type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {spec.type!r}")
        if spec.tenant is None and not spec.for_factory:
            raise ValueError("an event needs an audience: a tenant, the factory or both")
    if not specs:
        return []
    with transaction.atomic():
        events = Event.objects.bulk_create(
            Event(
                webhook_id=f"msg_{secrets.token_hex(12)}",
                type=spec.type,
                level=spec.level,
                tenant=spec.tenant,
                for_factory=spec.for_factory,
                occurred_at=spec.at or clock.now(),
                summary=spec.summary[:300],
                link=spec.link,
                data=dict(spec.data),
            )
            for spec in specs
        )
        due = timezone.now()  # deliveries run on the real clock
        endpoints = list(WebhookEndpoint.objects.filter(enabled=True))
        subscribers = _subscribers({event.type for event in events})
        rows = []
        for event in events:
            rows += [
                Delivery(
                    event=event,
                    channel=Delivery.Channel.WEBHOOK,
                    endpoint=endpoint,
                    next_attempt_at=due,
                )
                for endpoint in endpoints
                if _reaches(endpoint, event)
            ]
            rows += [
                Delivery(
                    event=event, channel=Delivery.Channel.EMAIL, user=user, next_attempt_at=due
                )
                for user in subscribers.get(event.type, [])
                if event_visible(event, user=user)
            ]
        Delivery.objects.bulk_create(rows)
        if rows:
            stage_schedule(DELIVER)
    return events


def _reaches(endpoint: WebhookEndpoint, event: Event) -> bool:
    """An enabled endpoint gets the event: its tenant's (or the factory's, for the
    factory), of a type it subscribes to (none listed: every type)."""
    if endpoint.tenant_id is None:
        audience = event.for_factory
    else:
        audience = endpoint.tenant_id == event.tenant_id
    return audience and (not endpoint.event_types or event.type in endpoint.event_types)


def _subscribers(types: set[str]) -> dict[str, list[User]]:
    """The active users with an email address opted in to each of `types`, each read with
    its tenant and role (who may see an event asks no more queries, however many)."""
    subscribed: dict[str, list[User]] = {}
    rows = EmailSubscription.objects.filter(event_type__in=types, user__is_active=True)
    for row in with_access(rows.exclude(user__email=""), user="user"):
        subscribed.setdefault(row.event_type, []).append(user_of(row))
    return subscribed


INBOX_DAYS = 90  # how far back the inbox reaches
ALERT_EVENTS = ("alert.fired", "alert.resolved")


def _finance_kinds() -> list[str]:
    """The alert kinds finance holds rules of (a tenant's budget, its uptime below tier):
    their alerts reach finance's inbox and email beside the billing events."""
    return sorted(name for name, kind in KINDS.items() if Role.FINANCE in kind.holders)


def _audience(user: AbstractBaseUser | AnonymousUser) -> Q | None:
    """The events of the last INBOX_DAYS a user may see, as a filter (None: none)."""
    role = user_role(user)
    recent = Q(created_at__gte=timezone.now() - timedelta(days=INBOX_DAYS))
    if role is Role.OPERATOR:
        return recent & Q(for_factory=True)
    if role is Role.FINANCE:
        alerts = Q(type__in=ALERT_EVENTS, data__kind__in=_finance_kinds())
        return recent & Q(for_factory=True) & (Q(type__in=BILLING_EVENTS) | alerts)
    if role is Role.TENANT:
        return recent & Q(tenant=user_tenant(user))
    return None


def event_visible(event: Event, *, user: AbstractBaseUser) -> bool:
    role = user_role(user)
    if role is Role.OPERATOR:
        return event.for_factory
    if role is Role.FINANCE:
        return event.for_factory and (
            event.type in BILLING_EVENTS
            or (event.type in ALERT_EVENTS and event.data.get("kind") in _finance_kinds())
        )
    if role is Role.TENANT:
        tenant = user_tenant(user)
        return tenant is not None and event.tenant_id == tenant.pk
    return False


def event_types_for(user: AbstractBaseUser) -> list[str]:
    """The event types a user may receive (the email opt-in lists these)."""
    role = user_role(user)
    if role is Role.FINANCE:
        return [t for t in EVENT_TYPES if t in BILLING_EVENTS]
    if role is Role.TENANT:
        return [t for t in EVENT_TYPES if t not in ("flywheel.proposal",)]
    return list(EVENT_TYPES) if role is Role.OPERATOR else []


# ---------------------------------------------------------------- the inbox


def inbox_list(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Event]:
    """The events the user may see, newest first, each with `is_read`."""
    audience = _audience(user)
    if audience is None:
        return Event.objects.none()
    read = InboxRead.objects.filter(user=user, event=OuterRef("pk"))
    events = Event.objects.filter(audience).annotate(is_read=Exists(read))
    return events.order_by("-occurred_at", "-pk")


UNREAD_COUNTED = 100  # the navigation says "99+" beyond: every page pays for 100 at most


def inbox_unread_count(*, user: AbstractBaseUser | AnonymousUser) -> int:
    """The user's unread events, counted up to UNREAD_COUNTED: a burst of events (a close
    issuing invoices) never makes every page slower."""
    audience = _audience(user)
    if audience is None:
        return 0
    # NOT EXISTS written out: `exclude(reads__user=user)` makes the same SQL, its join
    # machinery costing about 1 ms of CPU on every page.
    read = InboxRead.objects.filter(event=OuterRef("pk"), user=user)
    unread = Event.objects.filter(audience, ~Exists(read)).order_by()
    return unread[:UNREAD_COUNTED].count()


def inbox_mark_read(*, user: User, event_ids: list[int] | None = None) -> int:
    """Mark the given events (None: every one the user may see) read; returns how many
    were unread."""
    unread = inbox_list(user=user).filter(is_read=False)
    if event_ids is not None:
        unread = unread.filter(pk__in=event_ids)
    rows = [InboxRead(user=user, event_id=pk) for pk in unread.values_list("pk", flat=True)]
    InboxRead.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def email_subscriptions_set(*, user: User, event_types: list[str]) -> list[str]:
    """The user's email opt-ins become `event_types` (those the user may receive)."""
    allowed = set(event_types_for(user))
    wanted = [t for t in dict.fromkeys(event_types) if t in allowed]
    with transaction.atomic():
        EmailSubscription.objects.filter(user=user).exclude(event_type__in=wanted).delete()
        EmailSubscription.objects.bulk_create(
            [EmailSubscription(user=user, event_type=t) for t in wanted], ignore_conflicts=True
        )
    return wanted
