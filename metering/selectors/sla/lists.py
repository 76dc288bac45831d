"""Incident and maintenance lists; the one place incidents are scoped to a tenant."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from metering.domain.sla import incident_touches
from metering.filters import IncidentFilterSet
from metering.models import (
    HourlyUsage,
    Incident,
    MaintenanceWindow,
)
from metering.selectors.sla.incidents import (
    deployment_slugs,
    incident_queryset,
    incidents_touching,
    maintenance_queryset,
    months_spanned,
    overlapping_period,
)
from portal import clock
from portal.access import user_role, user_tenant
from portal.models import Role, Tenant
from portal.periods import Period, next_month


def incident_touched_tenants(*, incident: Incident, now: datetime) -> list[Tenant]:
    """Every tenant the incident touched in a month it spans (kpis.md 3b's rule): the one
    read of who an incident's events are addressed to."""
    end = max(incident.resolved_at or now, incident.started_at + timedelta(microseconds=1))
    named = list(incident.tenants.all())
    deployments = deployment_slugs(incident)
    months = months_spanned(incident.started_at, end)
    # Per tenant and month spanned, which of the incident's deployments it used (one range
    # of rows a month); an incident naming none touches every tenant: nothing to read.
    used: dict[int, dict[datetime, set[str]]] = defaultdict(lambda: defaultdict(set))
    for month in months if deployments else ():
        rows = (
            HourlyUsage.objects.filter(
                hour__gte=month,
                hour__lt=next_month(month),
                requests__gt=0,
                deployment__slug__in=deployments,
            )
            .values_list("tenant_id", "deployment__slug")
            .distinct()
        )
        for tenant_id, slug in rows:
            used[tenant_id][month].add(slug)
    if named:
        candidates = named
    elif not deployments:
        candidates = list(Tenant.objects.exclude(status=Tenant.Status.CLOSED))
    else:
        candidates = list(Tenant.objects.filter(pk__in=list(used)))
    return [
        tenant
        for tenant in sorted(candidates, key=lambda t: t.slug)
        if any(
            incident_touches(
                incident_tenants=[t.slug for t in named],
                incident_deployments=deployments,
                tenant=tenant.slug,
                deployments_used=used[tenant.pk][month],
            )
            for month in months
        )
    ]


def incident_list(
    *,
    user: AbstractBaseUser | AnonymousUser,
    filters=None,
    period: Period | None = None,
) -> QuerySet[Incident]:
    """Incidents the user may see, newest first: every one for operators and finance, those
    that touched their own tenant for members, none for other roles; `period` keeps those
    active during it; `filters`: IncidentFilterSet's query (status, impact, deployment,
    tenant, month, ordering), 404 for another tenant, 400 for a value it does not know."""
    role = user_role(user)
    if role not in (Role.OPERATOR, Role.FINANCE, Role.TENANT):
        return Incident.objects.none()
    queryset = incident_queryset().order_by("-started_at", "-id")
    if period is not None:
        queryset = overlapping_period(queryset, period.start, period.end)
    if filters:
        queryset = IncidentFilterSet.apply(filters, queryset=queryset, user=user)
    if role is not Role.TENANT:
        return queryset
    own = user_tenant(user)
    return incidents_touching(queryset, tenant=own, now=clock.now()) if own else queryset.none()


def incident_visible_tenants(*, incident: Incident, user) -> list[str]:
    """The tenant slugs of an incident the user may see (members see only their own)."""
    slugs = [t.slug for t in incident.tenants.all()]
    if user_role(user) is Role.TENANT:
        own = user_tenant(user)
        return [s for s in slugs if own is not None and s == own.slug]
    return slugs


def maintenance_list(
    *, period: Period | None = None, upcoming_at: datetime | None = None
) -> QuerySet[MaintenanceWindow]:
    """Maintenance windows (public information), by start: those overlapping `period`, or
    those not yet over at `upcoming_at`."""
    queryset = maintenance_queryset().order_by("starts_at", "id")
    if period is not None:
        queryset = overlapping_period(queryset, period.start, period.end)
    if upcoming_at is not None:
        queryset = queryset.filter(ends_at__gt=upcoming_at)
    return queryset
