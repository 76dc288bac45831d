"""Incident and maintenance lists; the one place incidents are scoped to a tenant."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import TruncMonth

from metering.domain.sla import incident_touches
from metering.models import (
    HourlyUsage,
    Incident,
    IncidentStatus,
    IncidentUpdate,
    MaintenanceWindow,
)
from metering.selectors.sla.incidents import (
    IMPACT_RANK,
    deployment_slugs,
    incident_queryset,
    maintenance_queryset,
    overlapping_period,
)
from portal import clock
from portal.access import tenant_get, user_role, user_tenant
from portal.models import Role, Tenant
from portal.periods import Period, month_start, next_month


def _months(start: datetime, end: datetime) -> list[datetime]:
    months, cursor = [], month_start(start)
    while cursor < end:
        months.append(cursor)
        cursor = next_month(cursor)
    return months


def _touching_ids(incidents: list[Incident], tenant: Tenant, now: datetime) -> set[int]:
    """Incidents that touched `tenant` in any month they span (kpis.md 3b's rule, with the
    deployments the tenant used in that month)."""
    if not incidents:
        return set()
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
            for month in _months(incident.started_at, end)
        ):
            touched.add(incident.pk)
    return touched


def incident_touched_tenants(*, incident: Incident, now: datetime) -> list[Tenant]:
    """Every tenant the incident touched in a month it spans (kpis.md 3b's rule): the one
    read of who an incident's events are addressed to."""
    end = max(incident.resolved_at or now, incident.started_at + timedelta(microseconds=1))
    named = list(incident.tenants.all())
    deployments = deployment_slugs(incident)
    used: dict[int, dict[datetime, set[str]]] = defaultdict(lambda: defaultdict(set))
    rows = (
        HourlyUsage.objects.filter(
            hour__gte=month_start(incident.started_at), hour__lt=next_month(end), requests__gt=0
        )
        .annotate(month=TruncMonth("hour", tzinfo=UTC))
        .values_list("tenant_id", "month", "deployment__slug")
        .distinct()
    )
    for tenant_id, month, slug in rows:
        used[tenant_id][month_start(month)].add(slug)
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
            for month in _months(incident.started_at, end)
        )
    ]


def incident_list(
    *,
    user: AbstractBaseUser | AnonymousUser,
    status: str | None = None,
    period: Period | None = None,
    tenant: str | None = None,
    impact: str | None = None,
    deployment: str | None = None,
    now: datetime | None = None,
) -> QuerySet[Incident]:
    """Incidents the user may see, newest first: every one for operators and finance (those
    that touched `tenant` when given), those that touched their own tenant for members,
    none for other roles. `status` is a lifecycle status or `open`; `period` keeps those
    active during it; `impact` those whose worst impact it is (`peak_impact`);
    `deployment` those that name it or its pool. Another tenant's slug raises 404."""
    role = user_role(user)
    if role not in (Role.OPERATOR, Role.FINANCE, Role.TENANT):
        return Incident.objects.none()
    queryset = incident_queryset().order_by("-started_at", "-id")
    if period is not None:
        queryset = overlapping_period(queryset, period.start, period.end)
    if impact:
        queryset = _worst_impact(queryset, impact)
    if deployment:
        named = Incident.objects.filter(
            Q(deployments__slug=deployment) | Q(pools__deployments__slug=deployment)
        )
        queryset = queryset.filter(pk__in=named.values("pk"))
    if status == "open":
        queryset = queryset.exclude(status=IncidentStatus.RESOLVED)
    elif status:
        queryset = queryset.filter(status=status)
    scope = tenant_get(user=user, slug=tenant) if tenant else None
    if role is Role.TENANT:
        scope = user_tenant(user)
    if scope is not None:
        touched = _touching_ids(list(queryset), scope, now or clock.now())
        queryset = queryset.filter(pk__in=touched)
    return queryset


def _worst_impact(queryset: QuerySet[Incident], impact: str) -> QuerySet[Incident]:
    """Those whose worst impact, opening or any update's, is `impact` (peak_impact in SQL)."""
    worse = [i for i, rank in IMPACT_RANK.items() if rank > IMPACT_RANK[impact]]
    updates = IncidentUpdate.objects.filter(incident=OuterRef("pk"))
    return (
        queryset.filter(Q(impact=impact) | Exists(updates.filter(impact=impact)))
        .exclude(impact__in=worse)
        .exclude(Exists(updates.filter(impact__in=worse)))
    )


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
