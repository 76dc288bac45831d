"""Demo factory, metering part: pools, models, deployments, capacity and a month of usage.

Grounded in shared/design/demo-factory.md: R_ref from the TensorRT-LLM perf overview with
MLPerf server/offline derates; SLO tiers from MLPerf Inference server limits; traffic 3:1
input:output with half of the input served from the prefix cache. Past days are written as
hourly rollups (marked `is_demo`); the last day is request-level events, one tenant's shape
taken from the real Azure LLM code trace (Splitwise, CC-BY-4.0). Fixed seed: reproducible.
"""

import math
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from metering.ingest.events import validate_events
from metering.ingest.formats import trace_events
from metering.models import (
    LATENCY_BUCKETS_MS,
    CapacitySample,
    Deployment,
    HourlyUsage,
    Pool,
    ServedModel,
)
from metering.services.factory import VersionSpec, deployment_create, served_model_aliases_set
from metering.services.ingest import usage_ingest
from metering.services.rollup import rollup_pending
from portal.demo import DEMO_TENANTS, demo_step
from portal.models import Tenant

DAYS = 30
SEED = 20261130
# slug, name, GPU type, GPUs, model slug, model name, alias, R_ref, SLO TTFT ms, SLO TPOT ms
POOLS = [
    (
        "h100-a",
        "H100 SXM hall A",
        "H100",
        512,
        "llama-3.3-70b",
        "Llama-3.3-70B (FP8)",
        "meta-llama/Llama-3.3-70B-Instruct",
        2100,
        2000,
        200,
    ),
    (
        "h200-a",
        "H200 hall A",
        "H200",
        256,
        "qwen3-235b-a22b",
        "Qwen3-235B-A22B (FP8)",
        "Qwen/Qwen3-235B-A22B",
        2790,
        2000,
        80,
    ),
    (
        "b200-a",
        "B200 hall B",
        "B200",
        1000,
        "deepseek-r1",
        "DeepSeek-R1-0528 (NVFP4)",
        "deepseek-ai/DeepSeek-R1-0528",
        3550,
        2000,
        80,
    ),
]
AVAILABILITY, OCCUPANCY, EFFICIENCY, COMPLIANT = 0.97, 0.55, 0.80, 0.98
TRACE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "samples"
    / "traces"
    / "azure_llm_2023_code.csv"
)


def _diurnal(hour: int) -> float:
    """Demand relative to the daily mean: low at 04:00 UTC, high at 16:00 UTC."""
    return 1 + 0.35 * math.sin((hour - 10) / 24 * 2 * math.pi)


def _window(now: datetime) -> tuple[datetime, datetime]:
    end = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return end - timedelta(days=DAYS), end


@demo_step(20, "metering: pools, models, deployments")
def demo_factory(*, stdout) -> None:
    for slug, name, gpu_type, gpus, model_slug, model_name, alias, r_ref, ttft, tpot in POOLS:
        pool, _ = Pool.objects.update_or_create(
            slug=slug,
            defaults={"name": name, "gpu_type": gpu_type, "gpu_count": gpus, "site": "demo"},
        )
        model, _ = ServedModel.objects.update_or_create(
            slug=model_slug, defaults={"name": model_name}
        )
        served_model_aliases_set(model=model, aliases=[alias], by=None)
        if not Deployment.objects.filter(model=model, pool=pool).exists():
            deployment_create(
                slug=f"{model_slug}@{slug}",
                model=model,
                pool=pool,
                by=None,
                spec=VersionSpec(r_ref=Decimal(r_ref), slo_ttft_ms=ttft, slo_tpot_ms=tpot),
            )


@demo_step(30, "metering: 30 days of capacity and usage")
@transaction.atomic
def demo_usage(*, stdout) -> None:
    rng = random.Random(SEED)
    start, end = _window(timezone.now())
    if HourlyUsage.objects.filter(is_demo=True, hour__gte=start).exists():
        stdout.write("  usage already loaded\n")
        return
    tenants = {t.slug: t for t in Tenant.objects.all()}
    weights = {slug: 1 / (rank + 1) ** 0.9 for rank, (_, slug, _) in enumerate(DEMO_TENANTS)}
    total_weight = sum(weights.values())
    hours = int((end - start).total_seconds() // 3600)
    capacity, hourly = [], []
    for slug, *_rest in POOLS:
        pool = Pool.objects.get(slug=slug)
        deployment = pool.deployments.get()
        r_ref = float(deployment.versions.get().r_ref)
        tpot_slo = deployment.versions.get().slo_tpot_ms
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
            output = busy * 3600 * r_ref * EFFICIENCY
            for tenant_slug, weight in weights.items():
                share = output * weight / total_weight * rng.uniform(0.8, 1.2)
                hourly.append(
                    _demo_rollup(tenants[tenant_slug], deployment, hour, share, rng, tpot_slo)
                )
    CapacitySample.objects.bulk_create(capacity, batch_size=2000, ignore_conflicts=True)
    HourlyUsage.objects.bulk_create(hourly, batch_size=2000)
    _demo_days()
    stdout.write(f"  {len(capacity):,} capacity samples, {len(hourly):,} hourly rollups\n")
    _demo_last_day(rng, end, weights, total_weight, stdout)


def _demo_rollup(tenant, deployment, hour, output_tokens, rng, tpot_slo) -> HourlyUsage:
    output = int(output_tokens)
    inputs = output * 3
    cached = inputs // 2
    requests = max(1, output // 900)
    errors = int(requests * 0.004)
    compliant = COMPLIANT
    histogram = [0] * (len(LATENCY_BUCKETS_MS) + 1)
    for _ in range(20):
        histogram[min(len(histogram) - 1, int(rng.lognormvariate(1.6, 0.5)))] += requests // 20
    return HourlyUsage(
        tenant=tenant,
        deployment=deployment,
        hour=hour,
        requests=requests,
        errors=errors,
        input_tokens=inputs,
        cached_tokens=cached,
        output_tokens=output,
        ok_input_tokens=int(inputs * 0.996),
        ok_cached_tokens=int(cached * 0.996),
        ok_output_tokens=int(output * 0.996),
        compliant_requests=int(requests * compliant),
        compliant_input_tokens=int(inputs * compliant),
        compliant_cached_tokens=int(cached * compliant),
        compliant_output_tokens=int(output * compliant),
        ttft_ms_sum=requests * 420.0,
        ttft_count=requests,
        tpot_ms_sum=requests * tpot_slo * 0.45,
        tpot_count=requests,
        latency_ms_sum=float(sum(histogram)) * 4200,
        latency_count=sum(histogram),
        latency_histogram=histogram,
        is_demo=True,
    )


def _demo_days() -> None:
    from metering.services.rollup import _rollup_days

    cells = set(
        HourlyUsage.objects.filter(is_demo=True)
        .values_list("tenant_id", "deployment_id", "hour")
        .distinct()
    )
    _rollup_days({(t, d, h.date()) for t, d, h in cells})


def _demo_last_day(rng, end, weights, total_weight, stdout) -> None:
    """The last day at request level: each event stands for a slice of a tenant's traffic
    (tokens scaled so the day's totals keep the month's factors)."""
    day = end - timedelta(days=1)
    items = []
    for slug, *_rest, r_ref, _ttft_slo, tpot_slo in POOLS:
        pool = Pool.objects.get(slug=slug)
        model_slug = pool.deployments.get().model.slug
        for h in range(24):
            hour = day + timedelta(hours=h)
            sample = CapacitySample.objects.get(pool=pool, time=hour)
            output = sample.gpus_busy * 3600 * r_ref * EFFICIENCY
            for tenant_slug, weight in weights.items():
                n = 6
                per_event = int(output * weight / total_weight / n)
                for k in range(n):
                    out = int(per_event * rng.uniform(0.7, 1.3))
                    items.append(
                        {
                            "id": f"demo-{slug}-{tenant_slug}-{h}-{k}",
                            "source": "demo",
                            "time": (hour + timedelta(seconds=rng.randrange(3600))).isoformat(),
                            "tenant": tenant_slug,
                            "model": model_slug,
                            "input_tokens": out * 3,
                            "cached_tokens": out * 3 // 2,
                            "output_tokens": out,
                            "ttft_ms": rng.lognormvariate(6.0, 0.6),
                            "tpot_ms": tpot_slo * rng.uniform(0.2, 1.05),
                            "latency_ms": rng.lognormvariate(8.3, 0.5),
                            "status": "error" if rng.random() < 0.004 else "ok",
                        }
                    )
    if TRACE.exists():
        trace = list(trace_events(path=TRACE, tenant="initech", model="llama-3.3-70b"))
        shift = day + timedelta(hours=9) - datetime.fromisoformat(trace[0]["time"])
        for item in trace:
            item["time"] = (datetime.fromisoformat(item["time"]) + shift).isoformat()
            item["source"] = "demo-trace"
        items += trace
    now = timezone.now()
    for chunk in range(0, len(items), 10_000):
        events, errors = validate_events(items=items[chunk : chunk + 10_000], now=now)
        if errors:
            raise RuntimeError(f"demo events invalid: {errors[:3]}")
        usage_ingest(events=events, received_at=now)
    rollup_pending()
    stdout.write(f"  {len(items):,} request-level events on {day:%Y-%m-%d}\n")
