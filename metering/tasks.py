"""Metering jobs (thin adapters over services)."""

import logging

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(
    name="metering.scrape_targets",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=25,
    ignore_result=True,
)
def scrape_targets_task() -> None:
    """Scrape every enabled Prometheus target once."""
    log.info("scrape: no scrape targets implemented yet")


@shared_task(
    name="metering.rollup_pending",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=300,
    ignore_result=True,
)
def rollup_pending_task() -> None:
    """Fold pending usage events into the hourly and daily rollups."""
    log.info("rollup: nothing implemented yet")
