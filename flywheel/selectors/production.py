"""What pools had and produced, read for the measurement and the flywheel's other reads:
capacity samples over a window (with the one carried into it), the part of a window a pool
is in service, production tokens under a deployment version, an hour's production and each
deployment's share of its pool's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from functools import reduce
from operator import or_

from django.db.models import Max, Model, Q

from flywheel.domain.kpis import KPI_CONTEXT, ZERO, CapacitySample
from metering.domain.usage.production import production_tokens
from metering.selectors.factory import DeploymentVersions, deployment_list
from metering.selectors.usage import (
    capacity_sample_list,
    deployment_hour_totals,
    hourly_usage_list,
)
from portal.periods import Period


def capacity_samples_read(*, start: datetime, end: datetime) -> dict[int, list[CapacitySample]]:
    """Each pool's capacity samples in [start, end), with the last before `start` (it holds
    into the window, kpis.md section 1), in time order: two queries however many pools."""
    carried = (
        capacity_sample_list().filter(time__lt=start).values("pool_id").annotate(last=Max("time"))
    )
    condition = Q(time__gte=start, time__lt=end)
    previous = [Q(pool_id=row["pool_id"], time=row["last"]) for row in carried]
    if previous:
        condition |= reduce(or_, previous)
    samples: dict[int, list[CapacitySample]] = defaultdict(list)
    for row in capacity_sample_list().filter(condition).order_by("pool_id", "time"):
        samples[row.pool_id].append(
            CapacitySample(
                time=row.time,
                interval_s=row.interval_s,
                installed=row.gpus_installed,
                healthy=row.gpus_healthy,
                busy=row.gpus_busy,
            )
        )
    return samples


def service_part(
    life: tuple[datetime | None, datetime | None], start: datetime, end: datetime
) -> Period | None:
    """The part of [start, end) a pool whose service life is `life` is in service (kpis.md
    section 0), or None."""
    since, until = life
    if since is None:
        return None
    clipped = Period(max(start, since), min(end, until) if until else end)
    return clipped if clipped.start < clipped.end else None


def production_of(version: Model, output: int, input_: int, cached: int) -> Decimal:
    """Production tokens of these counts under a deployment version (its w_in)."""
    return production_tokens(
        output_tokens=output, input_tokens=input_, cached_tokens=cached, w_in=version.w_in
    )


def deployment_shares(
    *, start: datetime, end: datetime, deployment_ids: Iterable[int]
) -> dict[int, Decimal]:
    """Each deployment's share of its pool's std GPU-seconds over [start, end), from the
    hourly rollups (what a lever scoped to it reaches); 0 when the pool produced nothing.
    One query, over the pools of the deployments named."""
    wanted = set(deployment_ids)
    if not wanted:
        return {}
    pool_of = {d.pk: d.pool_id for d in deployment_list()}
    pools = {pool_of[i] for i in wanted if i in pool_of}
    versions = DeploymentVersions()
    std: dict[int, Decimal] = defaultdict(Decimal)
    neighbours = [d for d, pool in pool_of.items() if pool in pools]
    rollups = hourly_usage_list().filter(
        hour__gte=start, hour__lt=end, deployment_id__in=neighbours
    )
    with localcontext(KPI_CONTEXT):
        for row in deployment_hour_totals(rollups, end=end):
            version = versions.at(row["deployment_id"], row["hour"].astimezone(UTC))
            if version is not None:
                std[row["deployment_id"]] += hour_production(row, version)[0] / version.r_ref
        totals: dict[int, Decimal] = defaultdict(Decimal)
        for deployment, seconds in std.items():
            totals[pool_of[deployment]] += seconds
        return {
            i: (std[i] / totals[pool_of[i]] if totals[pool_of[i]] else ZERO)
            for i in wanted
            if i in pool_of
        }


def hour_production(row: dict, version: Model) -> tuple[Decimal, Decimal]:
    """A `deployment_hour_sums` row's production tokens under `version` (its w_in): all of
    them and the SLO-compliant ones, in the caller's decimal context."""
    tok = production_of(version, row["o"], row["i"], row["c"])
    return tok, production_of(version, row["co"], row["ci"], row["cc"])
