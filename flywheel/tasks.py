"""Flywheel jobs (thin adapters over services)."""

import logging

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(
    name="flywheel.measure",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=900,
    ignore_result=True,
)
def measure_task() -> None:
    """KPI snapshots for the current day and month."""
    log.info("measure: nothing implemented yet")


@shared_task(
    name="flywheel.cycle",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=900,
    ignore_result=True,
)
def cycle_task() -> None:
    """Measure, diagnose, check the goal, propose levers."""
    log.info("flywheel: nothing implemented yet")
