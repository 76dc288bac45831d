"""Flywheel jobs (thin adapters over services)."""

import logging

from celery import shared_task

from flywheel.services.kpis import snapshots_update
from metering.services.usage.rollup import rollup_pending

log = logging.getLogger(__name__)


@shared_task(
    name="flywheel.measure",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=900,
    ignore_result=True,
)
def measure_task() -> None:
    """KPI snapshots for the current day and month; closes the periods that ended.
    Idempotent: every row is an upsert on its key, so a redelivered run rewrites the same
    figures. No retries: the next beat run (15 min) measures again."""
    folded = rollup_pending()
    reopened, written = snapshots_update()
    log.info(
        "measure: reopened %d snapshots, folded %d rollup cells, wrote %d snapshots",
        reopened,
        folded,
        written,
    )


@shared_task(
    name="flywheel.cycle",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=900,
    ignore_result=True,
)
def cycle_task() -> None:
    """Measure, diagnose, check the goal, propose levers.
    Idempotent: the cycle is upserted on its period (the last 7 whole UTC days) and a lever
    application is measured once. No retries: a failed run is retried by hand (manage.py
    flywheel) or by next week's beat."""
    from flywheel.services.loop.cycles import cycle_run

    rollup_pending()
    cycle = cycle_run()
    log.info(
        "flywheel: cycle %s: bottleneck %s, goal met %s",
        cycle,
        cycle.bottleneck or "none",
        cycle.is_goal_met,
    )
