"""The demo's last day at request level, partly shaped by the Azure LLM code trace."""

from datetime import datetime, timedelta

from metering.demo.parameters import (
    ERROR_RATE,
    EVENT_CHUNK,
    INPUT_PER_OUTPUT,
    LATENCY_MU,
    LATENCY_SIGMA,
    POOLS,
    TPOT_MISS_RATE,
    TPOT_OK_RANGE,
    TRACE,
    TTFT_MU,
    TTFT_SIGMA,
    hour_output,
    requests_for,
)
from metering.demo.progress import Progress
from metering.domain.usage.formats import trace_events
from metering.domain.usage.validation import validate_events
from metering.models import CapacitySample, Pool
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import rollup_pending
from portal import clock


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


def demo_last_day(rng, end, weights, stdout) -> None:
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
            output = hour_output(busy_by_hour[hour], r_ref)
            for tenant_slug, weight in weights.items():
                share = output * weight * rng.uniform(0.8, 1.2)
                n = requests_for(share)
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
    now = clock.now()
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
