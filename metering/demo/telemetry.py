"""Demo step: engine telemetry of the last day, two deployment-hours off tolerance."""

import random
from datetime import timedelta

from django.db import transaction

from metering.demo.parameters import SEED, demo_window
from metering.models import Deployment, EngineHourly
from metering.selectors.usage import deployment_hour_sums, hourly_usage_list
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
    slugs = dict(Deployment.objects.values_list("pk", "slug"))
    metered = deployment_hour_sums(hourly_usage_list(start=day, end=end)).order_by(
        "deployment_id", "hour"
    )
    rows = []
    for row in metered:
        hour_and_factor = ENGINE_MISMATCHES.get(slugs[row["deployment_id"]])
        if hour_and_factor and row["hour"] == day + timedelta(hours=hour_and_factor[0]):
            factor = hour_and_factor[1]
        else:
            factor = 1 + rng.uniform(-0.002, 0.002)
        rows.append(
            EngineHourly(
                deployment_id=row["deployment_id"],
                hour=row["hour"],
                intervals=120,  # every 30 s scrape of the hour
                prompt_tokens=round(row["i"] * factor),
                generation_tokens=round(row["o"] * factor),
                cached_prompt_tokens=round(row["c"] * factor),
                requests=round(row["n"] * factor),
                aborted_requests=row["err"],
                last_observed_at=row["hour"] + timedelta(minutes=59, seconds=30),
            )
        )
    EngineHourly.objects.bulk_create(rows, ignore_conflicts=True)
    stdout.write(f"  {len(rows):,} engine deployment-hours on {day:%Y-%m-%d}\n")
