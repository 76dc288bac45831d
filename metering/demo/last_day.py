"""The demo's last day at request level: each event stands for REQUEST_SCALE requests whose
size is drawn from its model's real trace and whose latencies from the hour's load."""

import random
from datetime import timedelta

from django.db import transaction

from metering.demo.database import analyze
from metering.demo.parameters import (
    DEGRADED,
    EVENT_CHUNK,
    INPUT_PER_OUTPUT,
    POOLS,
    REQUEST_SCALE,
    SEED,
    TIER_SEED,
    demo_tier,
    demo_token_classes,
    hour_output,
    tenant_hour_shares,
)
from metering.demo.progress import Progress
from metering.demo.requests import LatencyModel, mean_output, trace_requests
from metering.domain.usage.validation import validate_events
from metering.models import CapacitySample, Pool, UsageEvent
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal import clock


def demo_last_day(rng, end, weights, stdout, *, projects) -> None:
    """Per pool, hour and tenant, the same share of the pool's output as the rollup days,
    as events of REQUEST_SCALE requests each, sized and timed by the model's trace; a
    tenant-hour's events name the project `projects` draws for it (as the rollup days')."""
    day = end - timedelta(days=1)
    items = []
    late = random.Random(SEED + 1)  # the degraded stretch draws apart: the rest is unchanged
    tiers = random.Random(f"{TIER_SEED}-last-day")  # as do the service tiers
    for slug, *_rest, r_ref, slo_ttft, slo_tpot in POOLS:
        pool = Pool.objects.get(slug=slug)
        model = pool.deployments.get().model.slug
        trace, per_event = trace_requests(model), REQUEST_SCALE * mean_output(model)
        capacity = {
            time: (healthy, busy)
            for time, healthy, busy in CapacitySample.objects.filter(
                pool=pool, time__gte=day, time__lt=end
            ).values_list("time", "gpus_healthy", "gpus_busy")
        }
        for h in range(24):
            hour = day + timedelta(hours=h)
            healthy, busy = capacity[hour]
            output = hour_output(hour, busy, r_ref)
            latency = LatencyModel.at(
                model_slug=model,
                slo_ttft_ms=slo_ttft,
                slo_tpot_ms=slo_tpot,
                load=busy / healthy if healthy else 1.0,
            )
            for tenant_slug, weight in tenant_hour_shares(weights, hour.hour, model=model).items():
                share = output * weight * rng.uniform(0.8, 1.2)
                key = f"{day:%Y%m%d}-{slug}-{tenant_slug}-{h:02d}"
                degrade = {"slug": slug, "day": day, "slo_ttft_ms": slo_ttft, "rng": late}
                tier = demo_tier(tiers)
                hour_items = _requests(
                    share, trace=trace, per_event=per_event, hour=hour, key=key,
                    tenant=tenant_slug, model=model, latency=latency.for_tier(tier), rng=rng,
                    degrade=degrade, tier=tier,
                )  # fmt: skip
                if project := projects.slug(tenant_slug):  # the hour's, as the rollups'
                    for item in hour_items:
                        item["project"] = project
                items += hour_items
    progress = Progress(stdout=stdout, label=f"{day:%Y-%m-%d} request by request", total=len(items))
    now = clock.now()
    with transaction.atomic():  # the day whole or not at all, folded once
        for chunk in range(0, len(items), EVENT_CHUNK):
            events, errors = validate_events(items=items[chunk : chunk + EVENT_CHUNK], now=now)
            if errors:
                raise RuntimeError(f"demo events invalid: {errors[:3]}")
            usage_ingest(events=events, received_at=now)  # queued for the fold
            progress.advance(len(events))
        analyze(UsageEvent)
        usage_fold()
    progress.finish(f"{len(items):,} request-level events")


def _requests(share, *, trace, per_event, hour, key, tenant, model, latency, rng, degrade, tier):
    """One tenant's hour as request events of one service tier drawn from the model's
    trace, sized in the trace's proportions and scaled so that the hour's output is
    `share`; the degraded stretch's come late (`_degrade`)."""
    n = max(1, round(share / per_event))
    drawn = rng.sample(trace, n) if n <= len(trace) else rng.choices(trace, k=n)
    output_unit = share / sum(r.output_tokens for r in drawn)
    input_unit = share * INPUT_PER_OUTPUT / sum(r.input_tokens + 1 for r in drawn)
    items = []
    for k, request in enumerate(drawn):
        each_output = request.output_tokens * output_unit / REQUEST_SCALE
        inputs = int((request.input_tokens + 1) * input_unit)
        tokens = {
            "input_tokens": inputs,
            "cached_tokens": inputs // 2,
            "output_tokens": int(request.output_tokens * output_unit),
        }
        items.append(
            {
                "id": f"{key}-{k}",
                "source": "demo",
                "time": hour + timedelta(seconds=request.offset_s),
                "tenant": tenant,
                "model": model,
                "requests": REQUEST_SCALE,
                "service_tier": tier,
                **tokens,
                **demo_token_classes(model=model, tenant=tenant, **tokens),
                **latency.draw(rng, each_output),
            }
        )
        _degrade(items[-1], **degrade)
    return items


def _degrade(item: dict, *, slug: str, day, slo_ttft_ms: int, rng) -> None:
    """A request of the DEGRADED stretch comes late on its first token at that stretch's
    share: 1.5 to 3 times the TTFT threshold, its latency with it."""
    pool, since, length, share = DEGRADED
    start = day + since
    if slug != pool or not start <= item["time"] < start + length or rng.random() >= share:
        return
    late = slo_ttft_ms * rng.uniform(1.5, 3)
    item["latency_ms"] += late - item["ttft_ms"]
    item["ttft_ms"] = late
