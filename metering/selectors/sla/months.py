"""SLA figures per tenant and UTC month: uptime, SLO attainment and delivery rate σ."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Sum

from metering.domain.sla import (
    UptimeResult,
    incident_touches,
    maintenance_touches,
    uptime_compute,
)
from metering.domain.usage.production import production_tokens
from metering.models import DeploymentVersion, Incident, MaintenanceWindow
from metering.selectors.sla.incidents import (
    incident_queryset,
    maintenance_interval,
    outages_overlapping,
    timeline_of,
)
from metering.selectors.usage import rollups_within
from portal import clock
from portal.access import tenant_scoped
from portal.models import Tenant
from portal.periods import month_start, next_month


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
    # The deployments' SLO targets weighted by the tenant's requests on each (the target
    # its attainment is held to when its contract sets none), None without requests.
    deployment_slo_target: Fraction | None
    std_gpu_seconds: Fraction  # Σ std(e)
    compliant_std_gpu_seconds: Fraction  # Σ std(e) over compliant events
    sla_delivery: Fraction | None  # σ
    deployments_used: frozenset[str]
    incidents: tuple[Incident, ...]  # those that touched the tenant, by start
    maintenance_windows: tuple[MaintenanceWindow, ...]  # those excluded for the tenant


def _used_deployments(tenant_ids: list[int], start: datetime, end: datetime) -> dict[int, set[str]]:
    used: dict[int, set[str]] = defaultdict(set)
    for rows in rollups_within(start, end):
        found = rows.filter(tenant_id__in=tenant_ids, requests__gt=0)
        for tenant_id, slug in found.values_list("tenant_id", "deployment__slug").distinct():
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
    """Per tenant: requests, compliant requests, Σ std and compliant Σ std from the rollups
    (whole days from the daily ones: rollups_within); std = tok / R_ref of the version in force (metering.domain.usage.production);
    Σ requests × the version's slo_target."""
    totals: dict[int, dict] = defaultdict(
        lambda: {
            "requests": 0,
            "compliant_requests": 0,
            "std": Fraction(0),
            "ok_std": Fraction(0),
            "targeted": Fraction(0),  # Σ requests × the version's slo_target
        }
    )
    deployment_ids = {
        deployment_id
        for rows in rollups_within(start, end)
        for deployment_id in rows.filter(tenant_id__in=tenant_ids)
        .values_list("deployment_id", flat=True)
        .distinct()
    }
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
            target = Fraction(version.slo_target)
            sums = (
                s
                for rows in rollups_within(lo, hi)
                for s in rows.filter(tenant_id__in=tenant_ids, deployment_id=deployment_id)
                .values("tenant_id")
                .annotate(**{f"s_{name}": Sum(name) for name in _SUMS})
            )
            for s in sums:
                total = totals[s["tenant_id"]]
                total["requests"] += s["s_requests"]
                total["compliant_requests"] += s["s_compliant_requests"]
                total["targeted"] += s["s_requests"] * target
                made = production_tokens(
                    output_tokens=s["s_output_tokens"],
                    input_tokens=s["s_input_tokens"],
                    cached_tokens=s["s_cached_tokens"],
                    w_in=w_in,
                )
                within = production_tokens(
                    output_tokens=s["s_compliant_output_tokens"],
                    input_tokens=s["s_compliant_input_tokens"],
                    cached_tokens=s["s_compliant_cached_tokens"],
                    w_in=w_in,
                )
                total["std"] += made / r_ref
                total["ok_std"] += within / r_ref
    return totals


def _check_month_start(value: datetime) -> datetime:
    if value.tzinfo is None or value != month_start(value):
        raise ValueError(f"month_start must be midnight UTC on the 1st, got {value!r}")
    return value.astimezone(UTC)


@dataclass(frozen=True)
class TenantUptime:
    """A tenant's uptime of a month (month-to-date up to `now`) and what made it."""

    tenant: Tenant
    figures: UptimeResult
    deployments_used: frozenset[str]
    incidents: tuple[Incident, ...]  # those that touched the tenant, by start
    maintenance_windows: tuple[MaintenanceWindow, ...]  # those excluded for the tenant


def uptime_month_list(
    *, month_start: datetime, tenants: list[Tenant], now: datetime | None = None
) -> list[TenantUptime]:
    """Each tenant's uptime of a UTC month (kpis.md 3b) and the incidents and maintenance
    behind it, in a number of queries that does not grow with tenants: the deployments
    each used, the month's incidents and maintenance windows."""
    start = _check_month_start(month_start)
    month_end = next_month(start)
    now = now or clock.now()
    end = min(max(now, start), month_end)
    used = _used_deployments([t.pk for t in tenants], start, end)
    incidents, windows = outages_overlapping(
        incident_queryset().order_by("started_at", "id"), start, end
    )
    incident_tenants = {i.pk: {t.slug for t in i.tenants.all()} for i in incidents}
    timelines = {i.pk: timeline_of(i) for i in incidents}
    result = []
    for tenant in tenants:
        tenant_used = used.get(tenant.pk, set())
        touching = tuple(
            i
            for i in incidents
            if incident_touches(
                incident_tenants=incident_tenants[i.pk],
                incident_deployments=incidents[i],
                tenant=tenant.slug,
                deployments_used=tenant_used,
            )
        )
        excluded = tuple(
            w
            for w in windows
            if maintenance_interval(w).is_announced_in_advance
            and maintenance_touches(window_deployments=windows[w], deployments_used=tenant_used)
        )
        figures = uptime_compute(
            month_start=start,
            month_end=month_end,
            now=now,
            incidents=[timelines[i.pk] for i in touching],
            maintenance_windows=[maintenance_interval(w) for w in excluded],
        )
        result.append(TenantUptime(tenant, figures, frozenset(tenant_used), touching, excluded))
    return result


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
    now = now or clock.now()
    end = min(max(now, start), next_month(start))
    chosen = (
        Tenant.objects.all()
        if tenants is None
        else Tenant.objects.filter(pk__in=[t.pk for t in tenants])
    )
    if user is not None:
        chosen = tenant_scoped(chosen, user=user, field=None)
    tenant_list = list(chosen.order_by("slug"))
    production = _production([t.pk for t in tenant_list], start, end)
    result = []
    for up in uptime_month_list(month_start=start, tenants=tenant_list, now=now):
        figures, made = up.figures, production[up.tenant.pk]
        result.append(
            SlaMonth(
                tenant=up.tenant,
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
                deployment_slo_target=(
                    made["targeted"] / made["requests"] if made["requests"] else None
                ),
                std_gpu_seconds=made["std"],
                compliant_std_gpu_seconds=made["ok_std"],
                sla_delivery=made["ok_std"] / made["std"] if made["std"] else None,
                deployments_used=up.deployments_used,
                incidents=up.incidents,
                maintenance_windows=up.maintenance_windows,
            )
        )
    return result


def sla_month_get(
    *, tenant: Tenant, month_start: datetime, now: datetime | None = None
) -> SlaMonth:
    """SLA figures of one tenant and UTC month (see `sla_month_list`)."""
    return sla_month_list(month_start=month_start, tenants=[tenant], now=now)[0]
