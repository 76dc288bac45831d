"""Reads of SLA data: incidents and maintenance windows, per tenant-month uptime, SLO
attainment and SLA delivery rate σ (kpis.md 3 and 3b), and the public status page.

The arithmetic lives in the pure `metering.uptime`; this module only gathers its inputs
from the database. Credit tiers, credit amounts and contracts belong to billing, which
calls `sla_month_list` (or `sla_month_get`) and applies its contract's tiers to `uptime`.
Tenant scoping of incidents happens here, in `incident_list`, and nowhere else.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from itertools import pairwise

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Prefetch, Q, QuerySet, Sum
from django.db.models.functions import TruncMonth
from django.utils import timezone

from metering.models import (
    DeploymentVersion,
    HourlyUsage,
    Incident,
    IncidentImpact,
    IncidentStatus,
    IncidentUpdate,
    MaintenanceWindow,
    ServedModel,
)
from metering.uptime import (
    ImpactChange,
    IncidentTimeline,
    MaintenanceInterval,
    incident_touches,
    maintenance_touches,
    uptime_compute,
)
from portal.access import tenant_get, tenant_scoped, user_role, user_tenant
from portal.models import Role, Tenant
from portal.periods import Period, month_start, next_month

# Worst last: the order in which the status page ranks what is going on.
IMPACT_RANK = {
    "": 0,
    IncidentImpact.DEGRADED: 1,
    IncidentImpact.PARTIAL_OUTAGE: 2,
    IncidentImpact.MAJOR_OUTAGE: 3,
}
STATUS_DAYS = 90


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


def _overlapping(queryset: QuerySet, start: datetime, end: datetime) -> QuerySet:
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


def peak_impact(incident: Incident) -> str:
    """The worst impact the incident ever had (what its history shows)."""
    impacts = [incident.impact, *(u.impact for u in incident.updates.all() if u.impact)]
    return max(impacts, key=IMPACT_RANK.__getitem__)


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


def _interval(window: MaintenanceWindow) -> MaintenanceInterval:
    return MaintenanceInterval(starts_at=window.starts_at, ends_at=window.ends_at)


# ---------------------------------------------------------------- per tenant and month


@dataclass(frozen=True, kw_only=True)
class SlaMonth:
    """SLA figures of one tenant and UTC month (month-to-date up to `period_end`).
    Ratios are exact fractions, None when their denominator is zero."""

    tenant: Tenant
    month: str  # YYYY-MM
    month_start: datetime
    period_end: datetime  # the month's end, or now month-to-date
    is_month_to_date: bool
    month_seconds: Decimal  # M
    maintenance_seconds: Decimal  # W
    downtime_seconds: Decimal  # D, impact-weighted
    uptime: Fraction | None  # 1 - D / (M - W)
    requests: int
    compliant_requests: int
    slo_attainment: Fraction | None  # compliant requests / requests
    std_gpu_seconds: Fraction  # Σ std(e)
    compliant_std_gpu_seconds: Fraction  # Σ std(e) over compliant events
    sla_delivery: Fraction | None  # σ
    deployments_used: frozenset[str]
    incidents: tuple[Incident, ...]  # those that touched the tenant, by start
    maintenance_windows: tuple[MaintenanceWindow, ...]  # those excluded for the tenant


def _used_deployments(tenant_ids: list[int], start: datetime, end: datetime) -> dict[int, set[str]]:
    used: dict[int, set[str]] = defaultdict(set)
    rows = HourlyUsage.objects.filter(
        tenant_id__in=tenant_ids, hour__gte=start, hour__lt=end, requests__gt=0
    ).values_list("tenant_id", "deployment__slug")
    for tenant_id, slug in rows.distinct():
        used[tenant_id].add(slug)
    return used


_SUMS = [
    "requests",
    "compliant_requests",
    "output_tokens",
    "input_tokens",
    "cached_tokens",
    "compliant_output_tokens",
    "compliant_input_tokens",
    "compliant_cached_tokens",
]


def _production(tenant_ids: list[int], start: datetime, end: datetime) -> dict[int, dict]:
    """Per tenant: requests, compliant requests, Σ std and compliant Σ std from the hourly
    rollups; std = (output + w_in × (input − cached)) / R_ref of the version in force."""
    totals: dict[int, dict] = defaultdict(
        lambda: {"requests": 0, "compliant_requests": 0, "std": Fraction(0), "ok_std": Fraction(0)}
    )
    rows = HourlyUsage.objects.filter(tenant_id__in=tenant_ids, hour__gte=start, hour__lt=end)
    deployment_ids = set(rows.values_list("deployment_id", flat=True).distinct())
    versions: dict[int, list[DeploymentVersion]] = defaultdict(list)
    for version in DeploymentVersion.objects.filter(deployment_id__in=deployment_ids).order_by(
        "effective_from"
    ):
        versions[version.deployment_id].append(version)
    far = datetime.max.replace(tzinfo=UTC)
    for deployment_id, spans in versions.items():
        for version, until in zip(
            spans, [*(v.effective_from for v in spans[1:]), far], strict=True
        ):
            lo, hi = max(start, version.effective_from), min(end, until)
            if lo >= hi:
                continue
            r_ref, w_in = Fraction(version.r_ref), Fraction(version.w_in)
            sums = (
                rows.filter(deployment_id=deployment_id, hour__gte=lo, hour__lt=hi)
                .values("tenant_id")
                .annotate(**{f"s_{name}": Sum(name) for name in _SUMS})
            )
            for s in sums:
                total = totals[s["tenant_id"]]
                total["requests"] += s["s_requests"]
                total["compliant_requests"] += s["s_compliant_requests"]
                total["std"] += (
                    s["s_output_tokens"] + w_in * (s["s_input_tokens"] - s["s_cached_tokens"])
                ) / r_ref
                total["ok_std"] += (
                    s["s_compliant_output_tokens"]
                    + w_in * (s["s_compliant_input_tokens"] - s["s_compliant_cached_tokens"])
                ) / r_ref
    return totals


def _check_month_start(value: datetime) -> datetime:
    if value.tzinfo is None or value != month_start(value):
        raise ValueError(f"month_start must be midnight UTC on the 1st, got {value!r}")
    return value.astimezone(UTC)


def sla_month_list(
    *,
    month_start: datetime,
    tenants: Iterable[Tenant] | None = None,
    user: AbstractBaseUser | AnonymousUser | None = None,
    now: datetime | None = None,
) -> list[SlaMonth]:
    """SLA figures of a UTC month for `tenants` (default: every tenant; with `user`, only
    those the user may see), ordered by tenant slug. A month not yet over is counted up
    to `now` (default: the current time)."""
    start = _check_month_start(month_start)
    month_end = next_month(start)
    now = now or timezone.now()
    end = min(max(now, start), month_end)
    chosen = (
        Tenant.objects.all()
        if tenants is None
        else Tenant.objects.filter(pk__in=[t.pk for t in tenants])
    )
    if user is not None:
        chosen = tenant_scoped(chosen, user=user, field=None)
    tenant_list = list(chosen.order_by("slug"))
    ids = [t.pk for t in tenant_list]
    used = _used_deployments(ids, start, end)
    production = _production(ids, start, end)
    incidents = list(_overlapping(incident_queryset(), start, end).order_by("started_at", "id"))
    windows = list(_overlapping(maintenance_queryset(), start, end))
    scopes = {i.pk: (deployment_slugs(i), {t.slug for t in i.tenants.all()}) for i in incidents}
    window_scopes = {w.pk: deployment_slugs(w) for w in windows}
    timelines = {i.pk: timeline_of(i) for i in incidents}
    result = []
    for tenant in tenant_list:
        tenant_used = used.get(tenant.pk, set())
        touching = tuple(
            i
            for i in incidents
            if incident_touches(
                incident_tenants=scopes[i.pk][1],
                incident_deployments=scopes[i.pk][0],
                tenant=tenant.slug,
                deployments_used=tenant_used,
            )
        )
        excluded = tuple(
            w
            for w in windows
            if maintenance_touches(
                window_deployments=window_scopes[w.pk], deployments_used=tenant_used
            )
        )
        figures = uptime_compute(
            month_start=start,
            month_end=month_end,
            now=now,
            incidents=[timelines[i.pk] for i in touching],
            maintenance_windows=[_interval(w) for w in excluded],
        )
        made = production[tenant.pk]
        result.append(
            SlaMonth(
                tenant=tenant,
                month=f"{start:%Y-%m}",
                month_start=start,
                period_end=figures.period_end,
                is_month_to_date=figures.is_month_to_date,
                month_seconds=figures.month_seconds,
                maintenance_seconds=figures.maintenance_seconds,
                downtime_seconds=figures.downtime_seconds,
                uptime=figures.uptime,
                requests=made["requests"],
                compliant_requests=made["compliant_requests"],
                slo_attainment=(
                    Fraction(made["compliant_requests"], made["requests"])
                    if made["requests"]
                    else None
                ),
                std_gpu_seconds=made["std"],
                compliant_std_gpu_seconds=made["ok_std"],
                sla_delivery=made["ok_std"] / made["std"] if made["std"] else None,
                deployments_used=frozenset(tenant_used),
                incidents=touching,
                maintenance_windows=excluded,
            )
        )
    return result


def sla_month_get(
    *, tenant: Tenant, month_start: datetime, now: datetime | None = None
) -> SlaMonth:
    """SLA figures of one tenant and UTC month (see `sla_month_list`)."""
    return sla_month_list(month_start=month_start, tenants=[tenant], now=now)[0]


# ---------------------------------------------------------------- incidents, tenant-scoped


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


def incident_list(
    *,
    user: AbstractBaseUser | AnonymousUser,
    status: str | None = None,
    period: Period | None = None,
    tenant: str | None = None,
    now: datetime | None = None,
) -> QuerySet[Incident]:
    """Incidents the user may see, newest first: every one for operators and finance (those
    that touched `tenant` when given), those that touched their own tenant for members,
    none for other roles. `status` is a lifecycle status or `open`; `period` keeps those
    active during it. Another tenant's slug raises 404."""
    role = user_role(user)
    if role not in (Role.OPERATOR, Role.FINANCE, Role.TENANT):
        return Incident.objects.none()
    queryset = incident_queryset().order_by("-started_at", "-id")
    if period is not None:
        queryset = _overlapping(queryset, period.start, period.end)
    if status == "open":
        queryset = queryset.exclude(status=IncidentStatus.RESOLVED)
    elif status:
        queryset = queryset.filter(status=status)
    scope = tenant_get(user=user, slug=tenant) if tenant else None
    if role is Role.TENANT:
        scope = user_tenant(user)
    if scope is not None:
        touched = _touching_ids(list(queryset), scope, now or timezone.now())
        queryset = queryset.filter(pk__in=touched)
    return queryset


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
        queryset = _overlapping(queryset, period.start, period.end)
    if upcoming_at is not None:
        queryset = queryset.filter(ends_at__gt=upcoming_at)
    return queryset


# ---------------------------------------------------------------- public status page


@dataclass(frozen=True, kw_only=True)
class StatusDay:
    day: datetime
    uptime: Fraction | None  # None: the whole day was maintenance (or is to come)
    worst_impact: str  # "" when no incident touched the day
    has_maintenance: bool
    incidents: tuple[str, ...]  # titles


@dataclass(frozen=True, kw_only=True)
class ModelStatus:
    model: ServedModel
    status: str  # operational | maintenance | an impact value
    uptime: Fraction | None  # over the days shown
    days: tuple[StatusDay, ...]


def _concerns(scope: frozenset[str], deployments: set[str]) -> bool:
    return not scope or not scope.isdisjoint(deployments)


def status_overview(*, now: datetime | None = None, days: int = STATUS_DAYS) -> list[ModelStatus]:
    """Per served model: its current status and one uptime bar per UTC day over `days` days
    up to today. Every incident on one of its deployments counts, whoever it touched."""
    now = now or timezone.now()
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = today - timedelta(days=days - 1), today + timedelta(days=1)
    incidents = list(_overlapping(incident_queryset(), start, end))
    windows = list(_overlapping(maintenance_queryset(), start, end))
    scopes = {i.pk: deployment_slugs(i) for i in incidents}
    window_scopes = {w.pk: deployment_slugs(w) for w in windows}
    models = (
        ServedModel.objects.filter(deployments__isnull=False)
        .distinct()
        .prefetch_related("deployments")
    )
    day_starts = [start + timedelta(days=n) for n in range(days)]
    result = []
    for model in models.order_by("name"):
        slugs = {d.slug for d in model.deployments.all()}
        mine = [i for i in incidents if _concerns(scopes[i.pk], slugs)]
        maintenance = [w for w in windows if _concerns(window_scopes[w.pk], slugs)]
        timelines = [timeline_of(i) for i in mine]
        intervals = [_interval(w) for w in maintenance]
        pieces = [
            (a, b, impact, incident.title)
            for incident, timeline in zip(mine, timelines, strict=True)
            for a, b, impact in timeline.segments(until=now)
        ]
        bars = []
        for day, day_end in pairwise([*day_starts, end]):
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
        overall = uptime_compute(
            month_start=start,
            month_end=end,
            now=now,
            incidents=timelines,
            maintenance_windows=intervals,
        )
        open_impacts = [current_impact(i) for i in mine if i.resolved_at is None]
        if open_impacts:
            status = max(open_impacts, key=IMPACT_RANK.get)
        elif any(w.starts_at <= now < w.ends_at for w in maintenance):
            status = "maintenance"
        else:
            status = "operational"
        result.append(
            ModelStatus(model=model, status=status, uptime=overall.uptime, days=tuple(bars))
        )
    return result


def incident_history(*, now: datetime | None = None, days: int = STATUS_DAYS) -> list[Incident]:
    """Incidents open now or started within `days` days, newest first (public)."""
    now = now or timezone.now()
    since = now - timedelta(days=days)
    return list(
        incident_queryset()
        .filter(Q(resolved_at__isnull=True) | Q(started_at__gte=since))
        .order_by("-started_at", "-id")
    )
