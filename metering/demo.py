"""Demo factory, metering part: pools, models, deployments, capacity and a month of usage.

Grounded in shared/design/demo-factory.md: R_ref from the TensorRT-LLM perf overview with
MLPerf server/offline derates; SLO tiers from MLPerf Inference server limits; traffic 3:1
input:output with half of the input served from the prefix cache. Past days are written as
hourly rollups (marked `is_demo`); the last day is request-level events drawn from the same
per-request distributions, so the two meet without a step; one tenant's arrivals and request
sizes follow the real Azure LLM code trace (Splitwise, CC-BY-4.0). The last day also gets
engine telemetry with two deployment-hours off tolerance, for the reconciliation view.
Fixed seed: reproducible.
"""

import math
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from django.core.management.base import OutputWrapper
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from metering.ingest.formats import trace_events
from metering.ingest.validation import validate_events
from metering.models import (
    LATENCY_BUCKETS_MS,
    CapacitySample,
    Deployment,
    EngineHourly,
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
AVAILABILITY, OCCUPANCY, EFFICIENCY = 0.97, 0.55, 0.80
TRACE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "samples"
    / "traces"
    / "azure_llm_2023_code.csv"
)

# Volume. A factory this size serves ~10^8 requests a day, far more than a demo should store
# as events. So one demo request stands for REQUEST_SCALE real ones and carries their tokens:
# its token counts are scaled up by REQUEST_SCALE (about 1.8 M output tokens per demo request
# instead of ~900). The past days' rollups use the same scale, so the request-level last day
# (about 110,000 events) has the requests, tokens and tokens per request of the days before.
REQUEST_SCALE = 2_000
OUTPUT_TOKENS_PER_REQUEST = 900 * REQUEST_SCALE  # mean, per demo request
INPUT_PER_OUTPUT = 3  # input:output tokens ≈ 3:1, half of the input from the prefix cache

# Per-request distributions, shared by the events and the synthetic rollups (ms).
ERROR_RATE = 0.004
TTFT_MU, TTFT_SIGMA = 6.0, 0.6  # log-normal: median 403 ms, mean 483 ms
LATENCY_MU, LATENCY_SIGMA = 8.3, 0.5  # log-normal end to end: median 4.0 s
TPOT_OK_RANGE = (0.2, 0.95)  # x the TPOT SLO, uniform
TPOT_MISS_RATE = 0.012  # requests above the TPOT SLO, at 1.05-1.5 x it
# With the 2,000 ms TTFT SLO: ≈ 98.0% of requests ok and within SLO (σ ≈ 0.98).

EVENT_CHUNK = 5_000  # events per validate + ingest + fold round
BAR_WIDTH = 30


class Progress:
    """A progress bar on plain stdout (`\r  label [#####     ]  50%`), redrawn only when it
    moves; `finish` ends the line."""

    def __init__(self, *, stdout, label: str, total: int) -> None:
        self.stdout, self.label, self.total = stdout, label, max(1, total)
        self.count = 0
        self._shown: tuple[int, int] | None = None
        self._draw()

    def advance(self, count: int = 1) -> None:
        self.count = min(self.total, self.count + count)
        self._draw()

    def finish(self, note: str = "") -> None:
        self.count = self.total
        self._draw()
        self._write(f"  {note}\n" if note else "\n")

    def _draw(self) -> None:
        filled = BAR_WIDTH * self.count // self.total
        percent = 100 * self.count // self.total
        if self._shown == (filled, percent):
            return
        self._shown = (filled, percent)
        bar = "#" * filled + " " * (BAR_WIDTH - filled)
        self._write(f"\r  {self.label} [{bar}] {percent:3d}%")

    def _write(self, text: str) -> None:
        if isinstance(self.stdout, OutputWrapper):
            self.stdout.write(text, ending="")  # it would end every redraw with a newline
        else:
            self.stdout.write(text)
        self.stdout.flush()


def _lognormal_cdf(x: float, mu: float, sigma: float) -> float:
    return 0.5 * math.erfc(-(math.log(x) - mu) / (sigma * math.sqrt(2)))


def _lognormal_mean(mu: float, sigma: float) -> float:
    return math.exp(mu + sigma**2 / 2)


LATENCY_CDF = [_lognormal_cdf(edge, LATENCY_MU, LATENCY_SIGMA) for edge in LATENCY_BUCKETS_MS]
TPOT_MEAN_FACTOR = (1 - TPOT_MISS_RATE) * sum(TPOT_OK_RANGE) / 2 + TPOT_MISS_RATE * 1.275


def _diurnal(hour: int) -> float:
    """Demand relative to the daily mean: low at 04:00 UTC, high at 16:00 UTC."""
    return 1 + 0.35 * math.sin((hour - 10) / 24 * 2 * math.pi)


def _window(now: datetime) -> tuple[datetime, datetime]:
    end = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return end - timedelta(days=DAYS), end


def _tenant_weights() -> dict[str, float]:
    """Each tenant's share of the traffic: a Zipf-like long tail, normalised to 1."""
    weights = {slug: 1 / (rank + 1) ** 0.9 for rank, (_, slug, _) in enumerate(DEMO_TENANTS)}
    total = sum(weights.values())
    return {slug: weight / total for slug, weight in weights.items()}


def _hour_output(busy_gpus: int, r_ref: float) -> float:
    """Output tokens a pool produces in an hour with this many busy GPUs (η = EFFICIENCY)."""
    return busy_gpus * 3600 * r_ref * EFFICIENCY


def _requests_for(output_tokens: float) -> int:
    return max(1, round(output_tokens / OUTPUT_TOKENS_PER_REQUEST))


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
            output = _hour_output(busy, r_ref)
            for tenant_slug, weight in weights.items():
                share = output * weight * rng.uniform(0.8, 1.2)
                hourly.append(
                    _demo_rollup(tenants[tenant_slug], deployment, version, hour, share, rng)
                )
    CapacitySample.objects.bulk_create(capacity, batch_size=2000, ignore_conflicts=True)
    progress = Progress(
        stdout=stdout, label=f"{DAYS - 1} days of hourly rollups", total=len(hourly)
    )
    for chunk in range(0, len(hourly), 5000):
        HourlyUsage.objects.bulk_create(hourly[chunk : chunk + 5000], batch_size=2000)
        progress.advance(len(hourly[chunk : chunk + 5000]))
    _demo_days()
    progress.finish(f"{len(capacity):,} capacity samples, {len(hourly):,} hourly rollups")
    _demo_last_day(rng, end, weights, stdout)


def _demo_rollup(tenant, deployment, version, hour, output_tokens, rng) -> HourlyUsage:
    """An hour of a tenant as the rollup of requests drawn like the last day's events would
    be: counts rounded at random (unbiased), latency histogram from the same distribution."""
    output = int(output_tokens)
    inputs = output * INPUT_PER_OUTPUT
    cached = inputs // 2
    requests = _requests_for(output)
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
    from metering.services.rollup import rollup_days

    cells = set(
        HourlyUsage.objects.filter(is_demo=True)
        .values_list("tenant_id", "deployment_id", "hour")
        .distinct()
    )
    rollup_days({(t, d, h.date()) for t, d, h in cells})


def _trace_shape() -> list[tuple[float, int, int]]:
    """(seconds into the hour, context tokens, generated tokens) of every trace request."""
    if not TRACE.exists():
        return []
    rows = [
        (item["time"], item["input_tokens"], item["output_tokens"])
        for item in trace_events(path=TRACE, tenant="initech", model="llama-3.3-70b")
    ]
    first = datetime.fromisoformat(rows[0][0])
    return [((datetime.fromisoformat(t) - first).total_seconds() % 3600, i, o) for t, i, o in rows]


def _demo_last_day(rng, end, weights, stdout) -> None:
    """The last day at request level: per pool, hour and tenant, the same share of the pool's
    output as the rollup days, split into demo requests (tokens scaled, see REQUEST_SCALE).
    Initech on Llama takes arrival times and request sizes from the Azure code trace."""
    day = end - timedelta(days=1)
    trace = _trace_shape()
    items = []
    for slug, *_rest, r_ref, slo_ttft, slo_tpot in POOLS:
        pool = Pool.objects.get(slug=slug)
        model_slug = pool.deployments.get().model.slug
        busy_by_hour = dict(
            CapacitySample.objects.filter(pool=pool, time__gte=day, time__lt=end).values_list(
                "time", "gpus_busy"
            )
        )
        for h in range(24):
            hour = day + timedelta(hours=h)
            output = _hour_output(busy_by_hour[hour], r_ref)
            for tenant_slug, weight in weights.items():
                share = output * weight * rng.uniform(0.8, 1.2)
                n = _requests_for(share)
                if trace and tenant_slug == "initech" and model_slug == "llama-3.3-70b":
                    shape = rng.sample(trace, n) if n <= len(trace) else rng.choices(trace, k=n)
                    offsets = [s for s, _, _ in shape]
                    output_weights = [o + 1 for _, _, o in shape]
                    input_weights = [i + 1 for _, i, _ in shape]
                else:
                    offsets = [rng.random() * 3600 for _ in range(n)]
                    output_weights = [rng.lognormvariate(0, 0.8) for _ in range(n)]
                    input_weights = output_weights
                output_unit = share / sum(output_weights)
                input_unit = share * INPUT_PER_OUTPUT / sum(input_weights)
                for k in range(n):
                    inputs = int(input_weights[k] * input_unit)
                    items.append(
                        {
                            "id": f"{day:%Y%m%d}-{slug}-{tenant_slug}-{h:02d}-{k}",
                            "source": "demo",
                            "time": hour + timedelta(seconds=offsets[k]),
                            "tenant": tenant_slug,
                            "model": model_slug,
                            "input_tokens": inputs,
                            "cached_tokens": inputs // 2,
                            "output_tokens": int(output_weights[k] * output_unit),
                            **_request_outcome(rng, slo_ttft_ms=slo_ttft, slo_tpot_ms=slo_tpot),
                        }
                    )
    progress = Progress(stdout=stdout, label=f"{day:%Y-%m-%d} request by request", total=len(items))
    now = timezone.now()
    for chunk in range(0, len(items), EVENT_CHUNK):
        events, errors = validate_events(items=items[chunk : chunk + EVENT_CHUNK], now=now)
        if errors:
            raise RuntimeError(f"demo events invalid: {errors[:3]}")
        usage_ingest(events=events, received_at=now)
        rollup_pending()  # fold as we go: the events come in hour order, cells rarely repeat
        progress.advance(len(events))
    progress.finish(f"{len(items):,} request-level events")


def _request_outcome(rng, *, slo_ttft_ms: int, slo_tpot_ms: int) -> dict:
    """Latencies (ms) and status of one demo request, by the distributions above."""
    if rng.random() < TPOT_MISS_RATE:
        tpot = slo_tpot_ms * rng.uniform(1.05, 1.5)
    else:
        tpot = slo_tpot_ms * rng.uniform(*TPOT_OK_RANGE)
    return {
        "ttft_ms": rng.lognormvariate(TTFT_MU, TTFT_SIGMA),
        "tpot_ms": tpot,
        "latency_ms": rng.lognormvariate(LATENCY_MU, LATENCY_SIGMA),
        "status": "error" if rng.random() < ERROR_RATE else "ok",
    }


# Deployment-hours of the last day where engine and gateway disagree (hour, factor): a gateway
# that dropped events for a while (engine higher) and a replica restart between two scrapes,
# whose counts since the previous scrape are lost (engine lower). Every other hour is within
# ±0.2%, inside the reconciliation tolerance.
ENGINE_MISMATCHES = {"deepseek-r1@b200-a": (15, 1.06), "qwen3-235b-a22b@h200-a": (7, 0.97)}


@demo_step(40, "metering: engine telemetry of the last day")
@transaction.atomic
def demo_engine_telemetry(*, stdout) -> None:
    rng = random.Random(SEED + 1)
    _, end = _window(timezone.now())
    day = end - timedelta(days=1)
    if EngineHourly.objects.filter(hour__gte=day, hour__lt=end).exists():
        stdout.write("  engine telemetry already loaded\n")
        return
    metered = (
        HourlyUsage.objects.filter(hour__gte=day, hour__lt=end)
        .values("deployment_id", "deployment__slug", "hour")
        .annotate(
            output=Sum("output_tokens"),
            input=Sum("input_tokens"),
            cached=Sum("cached_tokens"),
            requests=Sum("requests"),
            errors=Sum("errors"),
        )
        .order_by("deployment_id", "hour")
    )
    rows = []
    for row in metered:
        hour_and_factor = ENGINE_MISMATCHES.get(row["deployment__slug"])
        if hour_and_factor and row["hour"] == day + timedelta(hours=hour_and_factor[0]):
            factor = hour_and_factor[1]
        else:
            factor = 1 + rng.uniform(-0.002, 0.002)
        rows.append(
            EngineHourly(
                deployment_id=row["deployment_id"],
                hour=row["hour"],
                intervals=120,  # every 30 s scrape of the hour
                prompt_tokens=round(row["input"] * factor),
                generation_tokens=round(row["output"] * factor),
                cached_prompt_tokens=round(row["cached"] * factor),
                requests=round(row["requests"] * factor),
                aborted_requests=row["errors"],
                last_observed_at=row["hour"] + timedelta(minutes=59, seconds=30),
            )
        )
    EngineHourly.objects.bulk_create(rows, ignore_conflicts=True)
    stdout.write(f"  {len(rows):,} engine deployment-hours on {day:%Y-%m-%d}\n")


from . import demo_incidents  # noqa: E402, F401  (registers the incidents demo step)
