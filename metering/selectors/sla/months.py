"""SLA figures per tenant and UTC month: uptime, SLO attainment and delivery rate σ."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from math import lcm

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import EmptyResultSet
from django.db.models import Sum

from metering.domain.sla import (
    UptimeResult,
    incident_touches,
    maintenance_touches,
    uptime_compute,
)
from metering.domain.usage.production import production_weights
from metering.models import Deployment, DeploymentVersion, Incident, MaintenanceWindow
from metering.selectors.sla.incidents import (
    incident_queryset,
    maintenance_interval,
    outages_overlapping,
    timeline_of,
)
from metering.selectors.usage import rollups_within, usage_stamp
from portal import clock
from portal.access import tenant_scoped
from portal.kept import kept
from portal.models import Tenant
from portal.periods import hour_ceil, month_start, next_month


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
    # The same figures per service tier it sent requests at (each judged by its own SLO:
    # priority against the priority thresholds, flex and batch against none).
    by_tier: dict[str, TierSla] = field(default_factory=dict)


@dataclass(frozen=True)
class TierSla:
    """A tenant's requests at one service tier in a month: attainment and σ."""

    requests: int
    compliant_requests: int
    slo_attainment: Fraction | None
    sla_delivery: Fraction | None

    @classmethod
    def of(cls, made: dict) -> TierSla:
        return cls(
            requests=made["requests"],
            compliant_requests=made["compliant_requests"],
            slo_attainment=(
                Fraction(made["compliant_requests"], made["requests"]) if made["requests"] else None
            ),
            sla_delivery=made["ok_std"] / made["std"] if made["std"] else None,
        )


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


def _production(
    tenant_ids: list[int],
    start: datetime,
    end: datetime,
    sums: dict[tuple[int, int], dict],
    *,
    service_tier: str | None = None,
) -> dict[int, dict]:
    """Per tenant: requests, compliant requests, Σ std and compliant Σ std from the rollups
    (whole days from the daily ones: rollups_within); std = tok / R_ref of the version in
    force (metering.domain.usage.production); Σ requests × the version's slo_target. Summed
    per tenant and deployment over the whole period in one query a rollup table; only a
    deployment whose version changes within the period is summed again span by span
    (`sums`: _sums over the whole period, of one `service_tier` when given)."""
    spans = _version_spans(start, end)
    weights = _Weights(version for in_force in spans.values() for version, _, _ in in_force)
    totals: dict[int, dict] = defaultdict(lambda: dict.fromkeys(_TOTALS, 0))
    split: set[int] = set()
    for (tenant_id, deployment_id), total in sums.items():
        in_force = spans.get(deployment_id, [])
        if len(in_force) == 1 and in_force[0][1:] == (start, end):
            weights.add(totals[tenant_id], total, in_force[0][0])
        else:
            split.add(deployment_id)
    for deployment_id in split:
        for version, lo, hi in spans.get(deployment_id, []):
            parts = _sums(tenant_ids, lo, hi, deployment_id, service_tier=service_tier)
            for (tenant_id, _), part in parts.items():
                weights.add(totals[tenant_id], part, version)
    exact: dict[int, dict] = defaultdict(lambda: weights.exact(dict.fromkeys(_TOTALS, 0)))
    exact.update((tenant_id, weights.exact(total)) for tenant_id, total in totals.items())
    return exact


_TOTALS = ("requests", "compliant_requests", "std", "ok_std", "targeted")


class _Weights:
    """The std and SLO-target weights of deployment versions as integers over one shared
    denominator each, so that a tenant's sums add as integers and divide once, exactly:
    std × `std_denominator` = output × a + input × b + cached × c (production_weights / R_ref)
    and Σ requests × slo_target × `target_denominator`."""

    def __init__(self, versions: Iterable[DeploymentVersion]) -> None:
        per_std: dict[int, list[Fraction]] = {}
        targets: dict[int, Fraction] = {}
        for version in versions:
            r_ref = Fraction(version.r_ref)
            made = production_weights(w_in=Fraction(version.w_in))
            per_std[version.pk] = [weight / r_ref for weight in made]
            targets[version.pk] = Fraction(version.slo_target)
        self.std_denominator = lcm(1, *(w.denominator for ws in per_std.values() for w in ws))
        self.target_denominator = lcm(1, *(t.denominator for t in targets.values()))
        self.std = {
            pk: tuple(int(w * self.std_denominator) for w in ws) for pk, ws in per_std.items()
        }
        self.target = {pk: int(t * self.target_denominator) for pk, t in targets.items()}

    def add(self, total: dict, sums: dict, version: DeploymentVersion) -> None:
        """Add a tenant's sums on one deployment version to its totals (integers)."""
        per_output, per_input, per_cached = self.std[version.pk]
        total["requests"] += sums["requests"]
        total["compliant_requests"] += sums["compliant_requests"]
        total["targeted"] += sums["requests"] * self.target[version.pk]
        total["std"] += (
            sums["output_tokens"] * per_output
            + sums["input_tokens"] * per_input
            + sums["cached_tokens"] * per_cached
        )
        total["ok_std"] += (
            sums["compliant_output_tokens"] * per_output
            + sums["compliant_input_tokens"] * per_input
            + sums["compliant_cached_tokens"] * per_cached
        )

    def exact(self, total: dict) -> dict:
        """A tenant's integer totals as the exact figures they stand for."""
        return {
            **total,
            "std": Fraction(total["std"], self.std_denominator),
            "ok_std": Fraction(total["ok_std"], self.std_denominator),
            "targeted": Fraction(total["targeted"], self.target_denominator),
        }


def _version_spans(start: datetime, end: datetime) -> dict[int, list[tuple]]:
    """Per deployment, (version, from, until) of each version in force within [start, end)."""
    versions: dict[int, list[DeploymentVersion]] = defaultdict(list)
    for version in DeploymentVersion.objects.order_by("effective_from"):
        versions[version.deployment_id].append(version)
    far = datetime.max.replace(tzinfo=UTC)
    spans: dict[int, list[tuple]] = defaultdict(list)
    for deployment_id, series in versions.items():
        untils = [*(v.effective_from for v in series[1:]), far]
        for version, until in zip(series, untils, strict=True):
            lo, hi = max(start, version.effective_from), min(end, until)
            if lo < hi:
                spans[deployment_id].append((version, lo, hi))
    return spans


def _sums(
    tenant_ids: list[int],
    start: datetime,
    end: datetime,
    deployment_id: int | None = None,
    *,
    service_tier: str | None = None,
    tiers: dict[str, dict[tuple[int, int], dict]] | None = None,
) -> dict[tuple[int, int], dict]:
    """_SUMS per (tenant, deployment) over the rollups of [start, end), of one deployment
    when `deployment_id` is given, of one tier when `service_tier` is; each tier's apart in
    `tiers` when given (the same query). The rows summed per (tenant, deployment, tier) are
    kept in the shared cache (portal.kept) under usage_stamp and their queries, which name
    the tenants, the hours, the deployment and the tier: a month of daily rollups, whose
    rows grow with the tenants' projects, is summed once a fold, not once a page."""
    rows_of: dict = {} if deployment_id is None else {"deployment_id": deployment_id}
    if service_tier is not None:
        rows_of["service_tier"] = service_tier
    queries = [
        rows.filter(tenant_id__in=tenant_ids, **rows_of)
        .values("tenant_id", "deployment_id", "service_tier")
        .annotate(**{f"s_{name}": Sum(name) for name in _SUMS})
        .order_by()
        # an end inside an hour reads that hour's rollup whole: the same rows to its end
        for rows in rollups_within(start, hour_ceil(end))
    ]
    try:
        named = tuple(query.query.sql_with_params() for query in queries)
    except EmptyResultSet:  # no tenant
        return {}
    grouped = kept(
        ("metering.sla_sums", named, usage_stamp()), lambda: [list(query) for query in queries]
    )
    sums: dict[tuple[int, int], dict] = {}
    for row in (row for rows in grouped for row in rows):
        key = (row["tenant_id"], row["deployment_id"])
        totals = [sums.setdefault(key, dict.fromkeys(_SUMS, 0))]
        if tiers is not None:
            by_key = tiers.setdefault(row["service_tier"], {})
            totals.append(by_key.setdefault(key, dict.fromkeys(_SUMS, 0)))
        for total in totals:
            for name in _SUMS:
                total[name] += row[f"s_{name}"]
    return sums


def _used_of(sums: dict[tuple[int, int], dict]) -> dict[int, set[str]]:
    """The deployments each tenant used (slugs by tenant id): those it sent requests to, from
    the period's sums per (tenant, deployment)."""
    slugs = dict(Deployment.objects.values_list("pk", "slug"))
    used: dict[int, set[str]] = defaultdict(set)
    for (tenant_id, deployment_id), total in sums.items():
        if total["requests"] > 0:
            used[tenant_id].add(slugs[deployment_id])
    return used


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
    now = now or clock.now()
    end = min(max(now, start), next_month(start))
    used = _used_of(_sums([t.pk for t in tenants], start, end))
    return _uptimes(start=start, end=end, now=now, tenants=tenants, used=used)


def _uptimes(
    *, start: datetime, end: datetime, now: datetime, tenants: list[Tenant], used: dict
) -> list[TenantUptime]:
    """uptime_month_list told the deployments each tenant used (slugs by tenant id)."""
    month_end = next_month(start)
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
    tenant_ids = [t.pk for t in tenant_list]
    tiers: dict[str, dict[tuple[int, int], dict]] = {}
    # read once: the production (of each tier too) and the deployments used
    sums = _sums(tenant_ids, start, end, tiers=tiers)
    production = _production(tenant_ids, start, end, sums)
    by_tier = {
        tier: _production(tenant_ids, start, end, tier_sums, service_tier=tier)
        for tier, tier_sums in sorted(tiers.items())
    }
    result = []
    used = _used_of(sums)
    for up in _uptimes(start=start, end=end, now=now, tenants=tenant_list, used=used):
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
                by_tier={
                    tier: TierSla.of(made)
                    for tier, tenants in by_tier.items()
                    if (made := tenants.get(up.tenant.pk)) and made["requests"]
                },
            )
        )
    return result


def sla_month_get(
    *, tenant: Tenant, month_start: datetime, now: datetime | None = None
) -> SlaMonth:
    """SLA figures of one tenant and UTC month (see `sla_month_list`)."""
    return sla_month_list(month_start=month_start, tenants=[tenant], now=now)[0]
