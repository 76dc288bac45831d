"""Flywheel jobs (thin adapters over services)."""

import logging
from datetime import datetime

from flywheel.services.kpis import snapshots_update
from portal.celery import job_task
from portal.clock import parse_instant
from portal.formatting import rfc3339
from portal.pipeline import MEASURE, stage_begin, stages_run

log = logging.getLogger(__name__)


@job_task(MEASURE, time_limit=900)
def measure_task() -> None:
    """The measure stage: KPI snapshots of the days and months metering's and billing's
    change logs name, the open day and month to the read window's end, and the periods that
    ended (flywheel.services.kpis.snapshots_update), in one transaction with its cursors:
    a killed run measures them again. No retries: the beat runs it every 15 minutes."""
    stage_begin(MEASURE)
    written = snapshots_update()
    log.info("measure: %d snapshots", written)


@job_task("flywheel.cycle", time_limit=900)
def cycle_task(start: str | None = None, end: str | None = None) -> None:
    """Measure, diagnose, check the goal, propose levers for [start, end) (RFC 3339; default
    the last 7 whole UTC days), after running every stage of the pipeline in this process.
    Idempotent: the cycle is upserted on its period and a lever application is measured
    once. No retries: a failed run is retried by hand (manage.py flywheel) or by next
    week's beat."""
    from flywheel.services.loop.cycles import cycle_run

    stages_run()
    cycle = cycle_run(
        start=parse_instant(start) if start else None, end=parse_instant(end) if end else None
    )
    log.info(
        "flywheel: cycle %s: bottleneck %s, goal met %s",
        cycle,
        cycle.bottleneck or "none",
        cycle.is_goal_met,
    )


def cycle_queue(*, start: datetime, end: datetime) -> None:
    """Ask the cycle job for [start, end): how the API and the flywheel page run a cycle
    (requests never run one)."""
    cycle_task.apply_async(kwargs={"start": rfc3339(start), "end": rfc3339(end)})


@job_task("flywheel.forecast", time_limit=1800, soft_time_limit=1700)
def forecast_task() -> None:
    """Forecast every series with its backtest (kpis.md 6b) and store them, after running
    every stage of the pipeline in this process so the last closed day is folded, rated and
    measured; then the capacity plan from them (kpis.md 6c). Daily, after the day's
    snapshots; idempotent (each run replaces the forecasts and the latest plan in one
    transaction each). No retries: tomorrow's beat, or manage.py forecast, runs it again."""
    from flywheel.services.plan import capacity_plan_update, forecasts_update

    stages_run()
    rows = forecasts_update()
    capacity_plan_update()
    log.info("forecast: %d series, then the capacity plan", len(rows))
