"""Demo step: 30 days of capacity samples and hourly usage rollups."""

import math
import random
from datetime import timedelta
from decimal import Decimal

from django.db import transaction

from metering.demo.last_day import demo_last_day
from metering.demo.parameters import (
    AVAILABILITY,
    ERROR_RATE,
    INPUT_PER_OUTPUT,
    LATENCY_MU,
    LATENCY_SIGMA,
    OCCUPANCY,
    POOLS,
    SEED,
    TPOT_MISS_RATE,
    TPOT_OK_RANGE,
    TTFT_MU,
    TTFT_SIGMA,
    demo_window,
    hour_output,
    requests_for,
)
from metering.demo.progress import Progress
from metering.models import (
    LATENCY_BUCKETS_MS,
    CapacitySample,
    HourlyUsage,
    Pool,
)
from portal import clock
from portal.demo import DEMO_TENANTS, demo_step
from portal.models import Tenant


def _lognormal_cdf(x: float, mu: float, sigma: float) -> float:
    return 0.5 * math.erfc(-(math.log(x) - mu) / (sigma * math.sqrt(2)))


def _lognormal_mean(mu: float, sigma: float) -> float:
    return math.exp(mu + sigma**2 / 2)


LATENCY_CDF = [_lognormal_cdf(edge, LATENCY_MU, LATENCY_SIGMA) for edge in LATENCY_BUCKETS_MS]
TPOT_MEAN_FACTOR = (1 - TPOT_MISS_RATE) * sum(TPOT_OK_RANGE) / 2 + TPOT_MISS_RATE * 1.275


def _diurnal(hour: int) -> float:
    """Demand relative to the daily mean: low at 04:00 UTC, high at 16:00 UTC."""
    return 1 + 0.35 * math.sin((hour - 10) / 24 * 2 * math.pi)


def _tenant_weights() -> dict[str, float]:
    """Each tenant's share of the traffic: a Zipf-like long tail, normalised to 1."""
    weights = {slug: 1 / (rank + 1) ** 0.9 for rank, (_, slug, _) in enumerate(DEMO_TENANTS)}
    total = sum(weights.values())
    return {slug: weight / total for slug, weight in weights.items()}


@demo_step("metering: capacity and usage from the first day of last month")
@transaction.atomic
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
    for slug, *_rest in POOLS:
        pool = Pool.objects.get(slug=slug)
        deployment = pool.deployments.get()
        version = deployment.versions.get()
        r_ref = float(version.r_ref)
        failure_start = rng.randrange(hours - 48)
        for h in range(hours):
            hour = start + timedelta(hours=h)
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
            output = hour_output(busy, r_ref)
            for tenant_slug, weight in weights.items():
                share = output * weight * rng.uniform(0.8, 1.2)
                hourly.append(
                    _demo_rollup(tenants[tenant_slug], deployment, version, hour, share, rng)
                )
    CapacitySample.objects.bulk_create(capacity, batch_size=2000, ignore_conflicts=True)
    progress = Progress(
        stdout=stdout, label=f"{hours // 24 - 1} days of hourly rollups", total=len(hourly)
    )
    for chunk in range(0, len(hourly), 5000):
        HourlyUsage.objects.bulk_create(hourly[chunk : chunk + 5000], batch_size=2000)
        progress.advance(len(hourly[chunk : chunk + 5000]))
    _demo_days()
    progress.finish(f"{len(capacity):,} capacity samples, {len(hourly):,} hourly rollups")
    demo_last_day(rng, end, weights, stdout)


def _demo_rollup(tenant, deployment, version, hour, output_tokens, rng) -> HourlyUsage:
    """An hour of a tenant as the rollup of requests drawn like the last day's events would
    be: counts rounded at random (unbiased), latency histogram from the same distribution."""
    output = int(output_tokens)
    inputs = output * INPUT_PER_OUTPUT
    cached = inputs // 2
    requests = requests_for(output)
    errors = min(requests, int(requests * ERROR_RATE + rng.random()))
    within_slo = (1 - ERROR_RATE) * (1 - TPOT_MISS_RATE)
    if version.slo_ttft_ms is not None:
        within_slo *= _lognormal_cdf(version.slo_ttft_ms, TTFT_MU, TTFT_SIGMA)
    compliant = min(requests - errors, int(requests * within_slo + rng.random()))
    ok_share, compliant_share = (requests - errors) / requests, compliant / requests
    # Systematic sampling of the histogram: one random offset, counts sum to `requests`.
    offset, previous, histogram = rng.random(), 0, []
    for cdf in [*LATENCY_CDF, 1.0]:
        reached = math.floor(requests * cdf + offset)
        histogram.append(reached - previous)
        previous = reached
    return HourlyUsage(
        tenant=tenant,
        deployment=deployment,
        hour=hour,
        requests=requests,
        errors=errors,
        input_tokens=inputs,
        cached_tokens=cached,
        output_tokens=output,
        ok_input_tokens=int(inputs * ok_share),
        ok_cached_tokens=int(cached * ok_share),
        ok_output_tokens=int(output * ok_share),
        compliant_requests=compliant,
        compliant_input_tokens=int(inputs * compliant_share),
        compliant_cached_tokens=int(cached * compliant_share),
        compliant_output_tokens=int(output * compliant_share),
        ttft_ms_sum=requests * _lognormal_mean(TTFT_MU, TTFT_SIGMA),
        ttft_count=requests,
        tpot_ms_sum=requests * (version.slo_tpot_ms or 50) * TPOT_MEAN_FACTOR,
        tpot_count=requests,
        latency_ms_sum=requests * _lognormal_mean(LATENCY_MU, LATENCY_SIGMA),
        latency_count=requests,
        latency_histogram=histogram,
        is_demo=True,
    )


def _demo_days() -> None:
    from metering.services.usage.rollup import rollup_days

    cells = set(
        HourlyUsage.objects.filter(is_demo=True)
        .values_list("tenant_id", "deployment_id", "hour")
        .distinct()
    )
    rollup_days({(t, d, h.date()) for t, d, h in cells})
