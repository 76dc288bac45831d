"""Demo step: engine telemetry of the last day, two deployment-hours off tolerance."""

import random
from datetime import timedelta

from django.db import transaction
from django.db.models import Sum

from metering.demo.parameters import SEED, demo_window
from metering.models import EngineHourly, HourlyUsage
from portal import clock
from portal.demo import demo_step

# Deployment-hours of the last day where engine and gateway disagree (hour, factor): a gateway
# that dropped events for a while (engine higher) and a replica restart between two scrapes,
# whose counts since the previous scrape are lost (engine lower). Every other hour is within
# ±0.2%, inside the reconciliation tolerance.
ENGINE_MISMATCHES = {"deepseek-r1@b200-a": (15, 1.06), "qwen3-235b-a22b@h200-a": (7, 0.97)}


@demo_step("metering: engine telemetry of the last day")
@transaction.atomic
def demo_engine_telemetry(*, stdout) -> None:
    rng = random.Random(SEED + 1)
    _, end = demo_window(clock.now())
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
