"""Reads of the factory's configuration: pools, served models, deployments and their versions.

The lists are QuerySets for the caller to refine (values, annotate, select_related)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db.models import Min, QuerySet

from metering.models import (
    CapacitySample,
    Deployment,
    DeploymentVersion,
    HourlyUsage,
    Pool,
    ServedModel,
)
from portal.effective import InForce, in_force_by
from portal.periods import filter_within, hour_floor


def pool_list() -> QuerySet[Pool]:
    """Every pool of the factory, by slug."""
    return Pool.objects.all()


def served_model_list() -> QuerySet[ServedModel]:
    """Every served model, by slug."""
    return ServedModel.objects.all()


def served_model_get(*, slug: str) -> ServedModel | None:
    """The served model named `slug`, or None when there is none."""
    return ServedModel.objects.filter(slug=slug).first()


def deployment_list() -> QuerySet[Deployment]:
    """Every deployment (a served model on a pool), by slug."""
    return Deployment.objects.all()


def deployment_version_list(
    *, start: datetime | None = None, end: datetime | None = None
) -> QuerySet[DeploymentVersion]:
    """Deployment versions taking effect in [start, end) (either bound optional)."""
    return filter_within(
        queryset=DeploymentVersion.objects.all(), field="effective_from", start=start, end=end
    )


def pool_first_signs_of_life(*, pool_ids: list[int]) -> dict[int, datetime]:
    """Per pool, the start of the UTC hour of its first sign of life: its earliest capacity
    sample or hourly rollup row (pools with neither are left out)."""
    firsts: dict[int, datetime] = {}
    rows = [
        *CapacitySample.objects.filter(pool_id__in=pool_ids)
        .values("pool_id")
        .annotate(first=Min("time"))
        .values_list("pool_id", "first"),
        *HourlyUsage.objects.filter(deployment__pool_id__in=pool_ids)
        .values("deployment__pool_id")
        .annotate(first=Min("hour"))
        .values_list("deployment__pool_id", "first"),
    ]
    for pool_id, first in rows:
        hour = hour_floor(first)
        firsts[pool_id] = min(firsts.get(pool_id, hour), hour)
    return firsts


def pool_service_lives(*, pools: list[Pool]) -> dict[int, tuple[datetime | None, datetime | None]]:
    """Per pool, [in service from, retired at) (kpis.md section 0): the stored start, else
    its first sign of life; a pool with neither is not in service (None, None)."""
    unset = [p.pk for p in pools if p.in_service_from is None]
    derived = pool_first_signs_of_life(pool_ids=unset) if unset else {}
    lives = {}
    for pool in pools:
        start = pool.in_service_from or derived.get(pool.pk)
        lives[pool.pk] = (start, pool.retired_at) if start else (None, None)
    return lives


def factory_in_service_from() -> datetime | None:
    """The first instant any pool is in service: nothing earlier has figures (kpis.md
    section 0), so no page offers a period before it."""
    starts = [since for since, _ in pool_service_lives(pools=list(pool_list())).values() if since]
    return min(starts, default=None)


class DeploymentVersions:
    """Every deployment version, loaded once: the one in force at an instant (R_ref, w_in,
    SLO) for any deployment, in one query however many are asked (portal.effective)."""

    def __init__(self) -> None:
        self._series = in_force_by(DeploymentVersion.objects.all(), series=_deployment_of)

    def at(self, deployment_id: int, when: datetime) -> DeploymentVersion | None:
        """The version of the deployment in force at `when`, or None before its first."""
        series = self._series.get(deployment_id)
        return series.at(when) if series is not None else None

    def series(self, deployment_id: int) -> InForce[DeploymentVersion]:
        """The deployment's versions in order (none: an empty series)."""
        return self._series.get(deployment_id) or InForce([])

    def latest_r_refs(self, deployment_ids) -> tuple[Decimal, ...]:
        """The R_ref of each deployment's latest version (deployments with one)."""
        latest = (self.series(d).latest() for d in deployment_ids)
        return tuple(version.r_ref for version in latest if version is not None)


def _deployment_of(version: DeploymentVersion) -> int:
    return version.deployment_id
