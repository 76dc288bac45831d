"""Incidents and maintenance windows as every SLA read needs them: prefetches, scope, impact."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet
from django.db.models.functions import TruncMonth

from metering.domain.sla import (
    ImpactChange,
    IncidentTimeline,
    MaintenanceInterval,
    incident_touches,
)
from metering.models import (
    HourlyUsage,
    Incident,
    IncidentImpact,
    IncidentUpdate,
    MaintenanceWindow,
)
from portal.models import Tenant
from portal.periods import month_start, next_month

# Worst last: the order in which the status page ranks what is going on.
IMPACT_RANK = {
    "": 0,
    IncidentImpact.DEGRADED: 1,
    IncidentImpact.PARTIAL_OUTAGE: 2,
    IncidentImpact.MAJOR_OUTAGE: 3,
}


def incident_queryset() -> QuerySet[Incident]:
    """Incidents with what every reader needs prefetched (updates in time order, scope)."""
    return Incident.objects.prefetch_related(
        Prefetch("updates", queryset=IncidentUpdate.objects.order_by("time", "id")),
        "deployments__model",
        "pools__deployments__model",
        "tenants",
    )


def maintenance_queryset() -> QuerySet[MaintenanceWindow]:
    return MaintenanceWindow.objects.prefetch_related(
        "deployments__model", "pools__deployments__model"
    )


def overlapping_period(queryset: QuerySet, start: datetime, end: datetime) -> QuerySet:
    if queryset.model is Incident:
        return queryset.filter(Q(resolved_at__isnull=True) | Q(resolved_at__gt=start)).filter(
            started_at__lt=end
        )
    return queryset.filter(starts_at__lt=end, ends_at__gt=start)


def deployment_slugs(obj: Incident | MaintenanceWindow) -> frozenset[str]:
    """The deployments an incident or window names, directly or through its pools (empty:
    every deployment). Needs `incident_queryset` / `maintenance_queryset` prefetches."""
    direct = {d.slug for d in obj.deployments.all()}
    return frozenset(direct | {d.slug for p in obj.pools.all() for d in p.deployments.all()})


def outages_overlapping(
    incidents: QuerySet[Incident], start: datetime, end: datetime
) -> tuple[dict[Incident, frozenset[str]], dict[MaintenanceWindow, frozenset[str]]]:
    """The incidents of `incidents` (an `incident_queryset`, in its order) and every
    maintenance window that overlap [start, end), each with its `deployment_slugs`."""
    windows = overlapping_period(maintenance_queryset(), start, end)
    return (
        {i: deployment_slugs(i) for i in overlapping_period(incidents, start, end)},
        {w: deployment_slugs(w) for w in windows},
    )


def model_names(obj: Incident | MaintenanceWindow) -> list[str]:
    """Names of the served models concerned (empty: every model)."""
    deployments = [
        *obj.deployments.all(),
        *(d for p in obj.pools.all() for d in p.deployments.all()),
    ]
    return sorted({d.model.name for d in deployments})


def current_impact(incident: Incident) -> str:
    """The impact set by the latest update that set one, else the opening impact."""
    changed = [u.impact for u in incident.updates.all() if u.impact]
    return changed[-1] if changed else incident.impact


def peak_impact(incident: Incident) -> IncidentImpact:
    """The worst impact the incident ever had (what its history shows): the one impact every
    page lists an incident under ("Worst impact"; its label is `.label`)."""
    impacts = [incident.impact, *(u.impact for u in incident.updates.all() if u.impact)]
    return IncidentImpact(max(impacts, key=IMPACT_RANK.__getitem__))


def timeline_of(incident: Incident) -> IncidentTimeline:
    """The pure module's view of an incident: opening impact, then the updates' changes."""
    return IncidentTimeline(
        started_at=incident.started_at,
        resolved_at=incident.resolved_at,
        impact=incident.impact,
        changes=tuple(
            ImpactChange(time=u.time, impact=u.impact) for u in incident.updates.all() if u.impact
        ),
    )


def maintenance_interval(window: MaintenanceWindow) -> MaintenanceInterval:
    return MaintenanceInterval(
        announced_at=window.announced_at, starts_at=window.starts_at, ends_at=window.ends_at
    )


def incident_spans(*, start, end) -> list[tuple[datetime, datetime, str]]:
    """(start, end, title) of the incidents of [start, end) that took capacity away (partial
    or major outage at worst), clipped to it, for charts to mark."""
    spans = []
    for incident in overlapping_period(incident_queryset(), start, end).order_by("started_at"):
        if peak_impact(incident) == IncidentImpact.DEGRADED:
            continue
        spans.append(
            (max(incident.started_at, start), min(incident.resolved_at or end, end), incident.title)
        )
    return spans


def months_spanned(start: datetime, end: datetime) -> list[datetime]:
    """The month starts of [start, end)."""
    months, cursor = [], month_start(start)
    while cursor < end:
        months.append(cursor)
        cursor = next_month(cursor)
    return months


def incidents_touching(queryset: QuerySet[Incident], *, tenant: Tenant, now: datetime):
    """Those that touched `tenant` in any month they span (kpis.md 3b's rule, with the
    deployments the tenant used in that month)."""
    incidents = list(queryset)
    if not incidents:
        return queryset.none()
    first = min(i.started_at for i in incidents)
    last = max(i.resolved_at or now for i in incidents)
    used: dict[datetime, set[str]] = defaultdict(set)
    rows = (
        HourlyUsage.objects.filter(
            tenant=tenant, hour__gte=month_start(first), hour__lt=next_month(last), requests__gt=0
        )
        .annotate(month=TruncMonth("hour", tzinfo=UTC))
        .values_list("month", "deployment__slug")
    )
    for month, slug in rows.distinct():
        used[month_start(month)].add(slug)
    touched = set()
    for incident in incidents:
        end = max(incident.resolved_at or now, incident.started_at + timedelta(microseconds=1))
        if any(
            incident_touches(
                incident_tenants=[t.slug for t in incident.tenants.all()],
                incident_deployments=deployment_slugs(incident),
                tenant=tenant.slug,
                deployments_used=used[month],
            )
            for month in months_spanned(incident.started_at, end)
        ):
            touched.add(incident.pk)
    return queryset.filter(pk__in=touched)


def worst_impact_is(queryset: QuerySet[Incident], impact: str) -> QuerySet[Incident]:
    """Those whose worst impact, opening or any update's, is `impact` (peak_impact in SQL)."""
    worse = [i for i, rank in IMPACT_RANK.items() if rank > IMPACT_RANK[impact]]
    updates = IncidentUpdate.objects.filter(incident=OuterRef("pk"))
    return (
        queryset.filter(Q(impact=impact) | Exists(updates.filter(impact=impact)))
        .exclude(impact__in=worse)
        .exclude(Exists(updates.filter(impact__in=worse)))
    )
