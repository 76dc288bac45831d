"""Demo step: capacity samples and hourly usage rollups of two closed months and this one."""

import json
import math
import random
from datetime import timedelta
from decimal import Decimal

from django.db import connection, transaction

from metering.demo.database import analyze
from metering.demo.last_day import demo_last_day
from metering.demo.parameters import (
    AVAILABILITY,
    ERROR_RATE,
    INPUT_PER_OUTPUT,
    OCCUPANCY,
    POOLS,
    SEED,
    TIER_SEED,
    demo_tier,
    demo_token_classes,
    demo_window,
    hour_output,
    tenant_hour_shares,
)
from metering.demo.progress import Progress
from metering.demo.requests import LatencyModel, mean_output
from metering.domain.usage.compliance import LATENCY_FREE_TIERS
from metering.models import CapacitySample, HourlyUsage, IncompleteRawMonth, Pool
from metering.services.usage.changes import raw_months_incomplete_mark
from metering.services.usage.rollup import ROLLUP_COLUMNS, rollup_days
from portal import clock
from portal.bulk import rows_insert
from portal.demo import DEMO_TENANTS, demo_project_draw, demo_step
from portal.models import Project, Tenant
from portal.periods import month_start


def _diurnal(hour: int) -> float:
    """Demand relative to the daily mean: low at 04:00 UTC, high at 16:00 UTC."""
    return 1 + 0.35 * math.sin((hour - 10) / 24 * 2 * math.pi)


def _tenant_weights() -> dict[str, float]:
    """Each tenant's share of the traffic: a Zipf-like long tail, normalised to 1 (an
    hour's shares follow each tenant's own day: parameters.tenant_hour_shares)."""
    weights = {slug: 1 / (rank + 1) ** 0.9 for rank, (_, slug, _) in enumerate(DEMO_TENANTS)}
    total = sum(weights.values())
    return {slug: weight / total for slug, weight in weights.items()}


@demo_step("metering: capacity and usage from the first day of the month two months back")
def demo_usage(*, stdout) -> None:
    rng = random.Random(SEED)
    start, end = demo_window(clock.now())
    if HourlyUsage.objects.filter(is_demo=True, hour__gte=start).exists():
        stdout.write("  usage already loaded\n")
        return
    tenants = {t.slug: t for t in Tenant.objects.all()}
    weights = _tenant_weights()
    hours = int((end - start).total_seconds() // 3600)
    capacity, hourly = [], []
    projects = Projects(random.Random(f"{SEED}-projects"))  # apart: the rest draws as before
    for slug, *_rest in POOLS:
        _pool_hours(
            Pool.objects.get(slug=slug), start=start, hours=hours, tenants=tenants,
            weights=weights, rng=rng, capacity=capacity, hourly=hourly, projects=projects,
        )  # fmt: skip
    progress = Progress(
        stdout=stdout, label=f"{hours // 24 - 1} days of hourly rollups", total=len(hourly)
    )
    with transaction.atomic():
        CapacitySample.objects.bulk_create(capacity, batch_size=2000, ignore_conflicts=True)
        for chunk in range(0, len(hourly), 20_000):
            rows = hourly[chunk : chunk + 20_000]
            rows_insert(HourlyUsage._meta.db_table, HOURLY_COLUMNS_PROJECT, rows)
            progress.advance(len(rows))
    analyze(CapacitySample, HourlyUsage)  # committed: the folds below join these rows
    _demo_days()
    # The months hold rollups without their raw events: never folded again from events.
    raw_months_incomplete_mark(
        pools=Pool.objects.filter(slug__in=[slug for slug, *_ in POOLS]),
        months={month_start(start + timedelta(hours=h)) for h in range(0, hours, 24)},
        reason=IncompleteRawMonth.Reason.LOADED,
    )
    progress.finish(f"{len(capacity):,} capacity samples, {len(hourly):,} hourly rollups")
    demo_last_day(rng, end, weights, stdout, projects=projects)


class Projects:
    """The project each tenant-hour of demo usage is metered to (portal.demo's shares), as
    its id (0: none) for a rollup row or its slug for events, from a generator of its own."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ids = {
            (tenant, slug): pk
            for pk, tenant, slug in Project.objects.values_list("pk", "tenant__slug", "slug")
        }

    def slug(self, tenant_slug: str) -> str | None:
        return demo_project_draw(tenant_slug, self.rng)

    def id(self, tenant_slug: str) -> int:
        slug = self.slug(tenant_slug)
        return 0 if slug is None else self.ids[tenant_slug, slug]


def _pool_hours(pool, *, start, hours, tenants, weights, rng, capacity, hourly, projects) -> None:
    """A pool's hours: a capacity sample each (a 30-hour failure at a random hour), and
    each tenant's hourly rollup but for the last day's (it comes as request events);
    appended to `capacity` and `hourly`, drawing from `rng` in a fixed order."""
    deployment = pool.deployments.get()
    version = deployment.versions.get()
    r_ref = float(version.r_ref)
    model = deployment.model.slug
    failure_start = rng.randrange(hours - 48)
    tiers = random.Random(f"{TIER_SEED}-{pool.slug}")
    for h in range(hours):
        hour = start + timedelta(hours=h)
        stored_hour = connection.ops.adapt_datetimefield_value(hour)
        failed = 0.08 if failure_start <= h < failure_start + 30 else 0.0
        healthy = round(pool.gpu_count * (AVAILABILITY + 0.02 * rng.random() - failed))
        healthy = min(pool.gpu_count, healthy)
        busy = min(
            healthy, round(healthy * OCCUPANCY * _diurnal(hour.hour) * rng.uniform(0.9, 1.1))
        )
        capacity.append(
            CapacitySample(
                pool=pool,
                time=hour,
                gpus_installed=pool.gpu_count,
                gpus_healthy=healthy,
                gpus_busy=busy,
                power_w=Decimal(busy * 1000 + (healthy - busy) * 300),
            )
        )
        if h >= hours - 24:
            continue  # the last day comes as request-level events
        output = hour_output(hour, busy, r_ref)
        latency = LatencyModel.at(
            model_slug=model,
            slo_ttft_ms=version.slo_ttft_ms,
            slo_tpot_ms=version.slo_tpot_ms,
            load=busy / healthy if healthy else 1.0,
        )
        tiered: dict[str, LatencyModel] = {}  # the hour's latencies of each tier, worked out once
        for tenant_slug, weight in tenant_hour_shares(weights, hour.hour, model=model).items():
            share = output * weight * rng.uniform(0.8, 1.2)
            tier = demo_tier(tiers)
            if tier not in tiered:
                tiered[tier] = latency.for_tier(tier)
            row = _demo_rollup(
                tenants[tenant_slug], deployment, stored_hour, share, tiered[tier], rng, tier=tier
            )
            hourly.append((*row, projects.id(tenant_slug)))


# An hourly rollup row as portal.bulk.rows_insert writes it.
HOURLY_COLUMNS = ("tenant_id", "deployment_id", "service_tier", "hour", *ROLLUP_COLUMNS)
HOURLY_COLUMNS_PROJECT = (*HOURLY_COLUMNS, "project_id")


def _demo_rollup(
    tenant, deployment, stored_hour, output_tokens, latency: LatencyModel, rng, *, tier: str
) -> tuple:
    """An hour of a tenant at a service tier as the rollup of the requests the last day's
    events would draw: as many as the model's trace sizes them, counts rounded at random
    (unbiased), latency histogram and sums from the hour's latency model (a batch request
    is compliant when ok: no latency SLO). A row of HOURLY_COLUMNS; `stored_hour` is the
    hour as the database adapts it."""
    output = int(output_tokens)
    inputs = output * INPUT_PER_OUTPUT
    cached = inputs // 2
    requests = max(1, round(output / mean_output(latency.model_slug)))
    classes = demo_token_classes(
        model=latency.model_slug,
        tenant=tenant.slug,
        input_tokens=inputs,
        cached_tokens=cached,
        output_tokens=output,
    )
    written, reasoning = classes["cache_write_tokens"], classes["reasoning_tokens"]
    errors = min(requests, int(requests * ERROR_RATE + rng.random()))
    compliant = min(requests - errors, int(requests * latency.within_slo + rng.random()))
    if tier in LATENCY_FREE_TIERS:
        compliant = requests - errors
    ok_share, compliant_share = (requests - errors) / requests, compliant / requests
    # Systematic sampling of the histogram: one random offset, counts sum to `requests`.
    offset, previous, histogram = rng.random(), 0, []
    for cdf in [*latency.latency_cdf, 1.0]:
        reached = math.floor(requests * cdf + offset)
        histogram.append(reached - previous)
        previous = reached
    row = {
        "tenant_id": tenant.pk,
        "deployment_id": deployment.pk,
        "service_tier": tier,
        "hour": stored_hour,
        "requests": requests,
        "errors": errors,
        "input_tokens": inputs,
        "cached_tokens": cached,
        "cache_write_tokens": written,
        "output_tokens": output,
        "reasoning_tokens": reasoning,
        "ok_input_tokens": int(inputs * ok_share),
        "ok_cached_tokens": int(cached * ok_share),
        "ok_cache_write_tokens": int(written * ok_share),
        "ok_output_tokens": int(output * ok_share),
        "ok_reasoning_tokens": int(reasoning * ok_share),
        "compliant_requests": compliant,
        "compliant_input_tokens": int(inputs * compliant_share),
        "compliant_cached_tokens": int(cached * compliant_share),
        "compliant_output_tokens": int(output * compliant_share),
        "ttft_ms_sum": requests * latency.ttft_mean,
        "ttft_count": requests,
        "tpot_ms_sum": requests * latency.tpot_mean,
        "tpot_count": requests,
        "latency_ms_sum": requests * latency.latency_mean,
        "latency_count": requests,
        "latency_histogram": json.dumps(histogram),
        "is_demo": True,
    }
    return tuple(row[column] for column in HOURLY_COLUMNS)


def _demo_days() -> None:
    cells = set(
        HourlyUsage.objects.filter(is_demo=True)
        .values_list("tenant_id", "deployment_id", "hour")
        .distinct()
    )
    rollup_days({(t, d, h.date()) for t, d, h in cells})
