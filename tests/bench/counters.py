"""Goal 24's factory (tests/bench/run.py, `metrics`): 1,000 tenants over 13 months, for the
cost of GET /metrics and of the measure stage's counters.

Every tenant uses two of nine deployments on three pools. Its past days are loaded as rollups
(an hour of usage a day on each deployment, summed into the daily rollups as the fold does),
today's whole hours in full, as the demo loads its past (metering.demo.usage); then every
month is rated and measured as the stages would (`snapshots_measure` keeps the counters).
On the real clock: the web server runs with production settings, which have no other.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from decimal import Decimal

from django.db import connection

from billing.models import Contract, Price, RatingPending
from billing.services.rating import rated_usage_update
from flywheel.models import CounterValue, KpiSnapshot
from flywheel.services.counters import counters_measure, counters_store
from flywheel.services.kpis import snapshots_measure
from metering.domain.usage.rollup import HISTOGRAM_SIZE
from metering.models import CapacitySample, Pool, ServedModel
from metering.services.factory import VersionSpec, deployment_create, pools_in_service_store
from metering.services.usage.rollup import ROLLUP_COLUMNS, fold_mark_store, rollup_days
from portal import clock
from portal.bulk import rows_insert
from portal.models import Role, Tenant
from portal.periods import day_floor, hour_floor, months_before
from portal.services import token_create, user_ensure

POOLS = (("h100-a", "H100", 512), ("h200-a", "H200", 256), ("b200-a", "B200", 128))
# model, its pools, R_ref (tok/s per GPU), list prices per million (input, output)
MODELS = (
    ("llama-70b", ("h100-a", "h200-a"), "1200", ("0.60", "0.80")),
    ("qwen-32b", ("h100-a", "h200-a"), "2600", ("0.20", "0.40")),
    ("deepseek-v3", ("h200-a", "b200-a"), "900", ("0.90", "2.20")),
    ("mistral-24b", ("b200-a",), "3100", ("0.10", "0.30")),
    ("gemma-27b", ("h200-a",), "2800", ("0.10", "0.20")),
    ("qwen3-235b", ("b200-a",), "700", ("0.70", "2.80")),
)
COLUMNS = ["tenant_id", "deployment_id", "service_tier", "hour", *ROLLUP_COLUMNS]


def factory_build(*, tenants: int, months: int) -> dict:
    """The factory and its usage up to the last whole hour; rated and measured. Returns
    the operator's read token, the sizes and how long the stages took."""
    now = clock.now()
    first = months_before(now, months - 1)
    for slug, gpu_type, gpus in POOLS:
        pool = Pool.objects.create(slug=slug, name=slug, gpu_type=gpu_type, gpu_count=gpus)
        CapacitySample.objects.bulk_create(
            CapacitySample(pool=pool, time=first + timedelta(days=day), gpus_installed=gpus,
                           gpus_healthy=gpus - 1 - day % 3, gpus_busy=gpus * 3 // 5 + day % 7)
            for day in range((now - first).days + 1)
        )  # fmt: skip
    pools = {pool.slug: pool for pool in Pool.objects.all()}
    deployments = []
    for slug, on, r_ref, prices in MODELS:
        model = ServedModel.objects.create(slug=slug, name=slug)
        for pool in on:
            deployments.append(
                deployment_create(slug=f"{slug}@{pool}", model=model, pool=pools[pool], by=None,
                                  spec=VersionSpec(r_ref=Decimal(r_ref), slo_ttft_ms=1500))
            )  # fmt: skip
        Price.objects.bulk_create(
            Price(model=model, token_class=token_class, per_million=Decimal(price),
                  currency="USD", effective_from=first)
            for token_class, price in zip(("input", "output"), prices, strict=True)
        )  # fmt: skip
    Tenant.objects.bulk_create(
        Tenant(slug=f"t{rank:04d}", name=f"T{rank}") for rank in range(tenants)
    )
    by_rank = sorted(Tenant.objects.all(), key=lambda tenant: tenant.slug)
    Contract.objects.bulk_create(
        Contract(tenant=tenant, kind="trial" if rank % 10 == 7 else "paid",
                 discount_pct=Decimal(rank % 4 * 5), currency="USD", effective_from=first)
        for rank, tenant in enumerate(by_rank) if rank % 10 != 9
    )  # fmt: skip
    hours, today = [], day_floor(now)
    for rank, tenant in enumerate(by_rank):
        for deployment in (deployments[rank % 9], deployments[(rank + 1 + rank % 8) % 9]):
            day = day_floor(first)
            while day < today:  # an hour of usage a day
                hours.append((tenant.pk, deployment.pk, day + timedelta(hours=rank % 24), rank))
                day += timedelta(days=1)
            hour = today
            while hour < hour_floor(now):  # today: every whole hour
                hours.append((tenant.pk, deployment.pk, hour, rank))
                hour += timedelta(hours=1)
    rows_insert("metering_hourlyusage", COLUMNS, (_row(*cell) for cell in hours))
    rollup_days({(tenant, deployment, hour.date()) for tenant, deployment, hour, _ in hours})
    pools_in_service_store()  # what the fold does after adding usage
    fold_mark_store()
    started = time.perf_counter()
    RatingPending.objects.create(tenant=None, start=first)
    rated_usage_update()
    rated = time.perf_counter() - started
    started = time.perf_counter()
    snapshots_measure(start=first, end=now)
    measured = time.perf_counter() - started
    operator = user_ensure(username="bench-metrics", role=Role.OPERATOR, password="bench-pw-123")
    _, token = token_create(user=operator, name="prometheus", scopes=["read"])
    return {
        "token": token,
        "tenants": tenants,
        "months": months,
        "hourly_rows": len(hours),
        "series": CounterValue.objects.count(),
        "rate_seconds": rated,
        "measure_seconds": measured,
    }


def _row(tenant_id: int, deployment_id: int, hour, rank: int) -> tuple:
    requests = 20 + rank % 80
    inputs, cached, output = requests * 1100, requests * 400, requests * 250
    compliant = requests - requests // 25
    share = compliant / requests
    row = {
        "tenant_id": tenant_id,
        "deployment_id": deployment_id,
        "hour": connection.ops.adapt_datetimefield_value(hour),
        "requests": requests,
        "errors": requests // 50,
        "input_tokens": inputs,
        "cached_tokens": cached,
        "cache_write_tokens": 0,
        "output_tokens": output,
        "reasoning_tokens": 0,
        "ok_input_tokens": inputs,
        "ok_cached_tokens": cached,
        "ok_cache_write_tokens": 0,
        "ok_output_tokens": output,
        "ok_reasoning_tokens": 0,
        "compliant_requests": compliant,
        "compliant_input_tokens": int(inputs * share),
        "compliant_cached_tokens": int(cached * share),
        "compliant_output_tokens": int(output * share),
        "ttft_ms_sum": requests * 400.0,
        "ttft_count": requests,
        "tpot_ms_sum": requests * 30.0,
        "tpot_count": requests,
        "latency_ms_sum": requests * 8000.0,
        "latency_count": requests,
        "latency_histogram": json.dumps([requests, *[0] * (HISTOGRAM_SIZE - 1)]),
        "is_demo": False,
        "service_tier": "standard",
    }
    return tuple(row[column] for column in COLUMNS)


def counters_step_timed() -> dict:
    """The counters' part of one measure run as the stage makes it every time the read
    window moves: this month's part measured again and every series raised (seconds)."""
    month = KpiSnapshot.objects.filter(scope="factory", period_kind="month").latest("period_start")
    started = time.perf_counter()
    measured = counters_measure(snapshots=[month], now=clock.now())
    counters_store(measured)
    return {"seconds": time.perf_counter() - started}
