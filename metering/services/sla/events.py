"""The incident events (architecture.md "Alerts and notifications"): opened, updated and
resolved, raised through the kernel in the transaction that made them, to each tenant the
incident touched (that tenant's payload names no other) and to the factory."""

from __future__ import annotations

from datetime import datetime

from django.urls import reverse

from metering.models import Incident, IncidentSeverity, IncidentStatus
from metering.selectors.sla.incidents import deployment_slugs
from metering.selectors.sla.lists import incident_touched_tenants
from portal.events import event_raise
from portal.formatting import rfc3339
from portal.models import Event

LEVELS = {IncidentSeverity.SEV1: Event.Level.CRITICAL, IncidentSeverity.SEV2: Event.Level.WARNING}


def _rfc3339(moment: datetime | None) -> str | None:
    return rfc3339(moment) if moment else None


def incident_event_raise(
    *, incident: Incident, message: str, at: datetime, now: datetime
) -> list[Event]:
    """incident.opened, .updated or .resolved (by the incident's state now), happened `at`
    (its start, the update's time), to the factory and to every tenant it touched."""
    if incident.status == IncidentStatus.RESOLVED:
        kind, level, verb = "incident.resolved", Event.Level.INFO, "resolved"
    else:
        opened = incident.updates.count() <= 1
        kind = "incident.opened" if opened else "incident.updated"
        level = LEVELS.get(incident.severity, Event.Level.INFO)
        verb = "opened" if opened else f"updated: {incident.get_status_display().lower()}"
    data = {
        "incident_id": incident.pk,
        "title": incident.title,
        "severity": incident.severity,
        "impact": incident.impact,
        "status": incident.status,
        "started_at": _rfc3339(incident.started_at),
        "resolved_at": _rfc3339(incident.resolved_at),
        "deployments": sorted(deployment_slugs(incident)),
        "message": message,
    }
    summary = f"{incident.get_severity_display()} incident {verb}: {incident.title}"
    link = reverse("incident-page", args=[incident.pk])
    tenants = incident_touched_tenants(incident=incident, now=now)
    events = [
        event_raise(
            type=kind,
            summary=summary,
            data={**data, "tenants": [t.slug for t in tenants]},
            level=level,
            link=link,
            at=at,
        )
    ]
    for tenant in tenants:  # each tenant's own: no other tenant named
        events.append(
            event_raise(
                type=kind,
                summary=summary,
                data=data,
                tenant=tenant,
                for_factory=False,
                level=level,
                link=reverse("sla-page"),
                at=at,
            )
        )
    return events
