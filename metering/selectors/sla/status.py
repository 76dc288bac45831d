"""The public status page: per served model, its current status and daily uptime bars."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from itertools import pairwise

from django.db.models import Q, QuerySet

from metering.domain.sla import uptime_compute
from metering.models import Incident, ServedModel
from metering.selectors.factory import pool_list, pool_service_lives
from metering.selectors.sla.incidents import (
    IMPACT_RANK,
    current_impact,
    incident_queryset,
    maintenance_interval,
    outages_overlapping,
    timeline_of,
)
from portal import clock
from portal.models import Tenant
from portal.periods import day_floor

STATUS_DAYS = 90


@dataclass(frozen=True, kw_only=True)
class StatusDay:
    day: datetime
    uptime: Fraction | None  # None: the whole day was maintenance, or has no data
    worst_impact: str  # "" when no incident touched the day
    has_maintenance: bool
    incidents: tuple[str, ...]  # titles
    has_data: bool = True  # False: the model's pools were not in service that day


@dataclass(frozen=True, kw_only=True)
class ModelStatus:
    model: ServedModel
    status: str  # operational | maintenance | an impact value
    uptime: Fraction | None  # over the days shown
    days: tuple[StatusDay, ...]


def _concerns(scope: frozenset[str], deployments: set[str]) -> bool:
    return not scope or not scope.isdisjoint(deployments)


def public_incidents(tenant: Tenant | None = None) -> QuerySet[Incident]:
    """Incidents public to everyone: those scoped to no tenant; with `tenant` (a signed-in
    member's status view), those that name it too. An incident scoped to some tenants
    shows only to their members, never on the public status page."""
    scope = Q(tenants__isnull=True)
    if tenant is not None:
        scope |= Q(tenants=tenant)
    return incident_queryset().filter(pk__in=Incident.objects.filter(scope).values("pk"))


def status_overview(
    *, now: datetime | None = None, days: int = STATUS_DAYS, tenant: Tenant | None = None
) -> list[ModelStatus]:
    """Per served model: its current status and one uptime bar per UTC day over `days` days
    up to today. Every public incident on one of its deployments counts."""
    now = now or clock.now()
    today = day_floor(now)
    start, end = today - timedelta(days=days - 1), today + timedelta(days=1)
    incidents, windows = outages_overlapping(public_incidents(tenant), start, end)
    models = (
        ServedModel.objects.filter(deployments__isnull=False)
        .distinct()
        .prefetch_related("deployments")
    )
    day_starts = [start + timedelta(days=n) for n in range(days)]
    lives = pool_service_lives(pools=list(pool_list()))
    result = []
    for model in models.order_by("name"):
        slugs = {d.slug for d in model.deployments.all()}
        since, until = _served(model, lives)
        mine = [i for i, scope in incidents.items() if _concerns(scope, slugs)]
        maintenance = [w for w, scope in windows.items() if _concerns(scope, slugs)]
        timelines = [timeline_of(i) for i in mine]
        intervals = [maintenance_interval(w) for w in maintenance]
        pieces = [
            (a, b, impact, incident.title)
            for incident, timeline in zip(mine, timelines, strict=True)
            for a, b, impact in timeline.segments(until=now)
        ]
        bars = _day_bars(
            day_starts, end, served=(since, until), now=now, timelines=timelines,
            intervals=intervals, pieces=pieces,
        )  # fmt: skip
        served = max(start, since) if since is not None else end
        overall = (
            uptime_compute(
                month_start=served,
                month_end=end,
                now=now,
                incidents=timelines,
                maintenance_windows=intervals,
            ).uptime
            if served < end
            else None
        )
        status = _current(mine, maintenance, now)
        result.append(ModelStatus(model=model, status=status, uptime=overall, days=tuple(bars)))
    return result


def _day_bars(day_starts, end, *, served, now, timelines, intervals, pieces) -> list[StatusDay]:
    """One bar per UTC day: its uptime as an SLA measures it, the worst impact and the
    incidents active in it; a day the model was not served has no data."""
    since, until = served
    bars = []
    for day, day_end in pairwise([*day_starts, end]):
        if since is None or day_end <= since or (until is not None and day >= until):
            bars.append(
                StatusDay(day=day, uptime=None, worst_impact="", has_maintenance=False,
                          incidents=(), has_data=False)
            )  # fmt: skip
            continue
        figures = uptime_compute(
            month_start=day,
            month_end=day_end,
            now=now,
            incidents=timelines,
            maintenance_windows=intervals,
        )
        active = [p for p in pieces if p[0] < day_end and p[1] > day]
        bars.append(
            StatusDay(
                day=day,
                uptime=figures.uptime,
                worst_impact=max((p[2] for p in active), key=IMPACT_RANK.get, default=""),
                has_maintenance=figures.maintenance_seconds > 0,
                incidents=tuple(dict.fromkeys(p[3] for p in active)),
            )
        )
    return bars


def _current(incidents, maintenance, now) -> str:
    """The worst impact of its open incidents, else maintenance in progress, else
    operational."""
    open_impacts = [current_impact(i) for i in incidents if i.resolved_at is None]
    if open_impacts:
        return max(open_impacts, key=IMPACT_RANK.get)
    if any(w.starts_at <= now < w.ends_at for w in maintenance):
        return "maintenance"
    return "operational"


def _served(model: ServedModel, lives: dict) -> tuple[datetime | None, datetime | None]:
    """When the model was first and last served: the service lives of its pools."""
    spans = [lives[d.pool_id] for d in model.deployments.all() if lives[d.pool_id][0]]
    if not spans:
        return None, None
    untils = [until for _, until in spans]
    return min(since for since, _ in spans), None if None in untils else max(untils)


def incident_history(
    *, now: datetime | None = None, days: int = STATUS_DAYS, tenant: Tenant | None = None
) -> list[Incident]:
    """Public incidents (and `tenant`'s own) open now or started within `days` days, newest
    first."""
    now = now or clock.now()
    since = now - timedelta(days=days)
    return list(
        public_incidents(tenant)
        .filter(Q(resolved_at__isnull=True) | Q(started_at__gte=since))
        .order_by("-started_at", "-id")
    )
