"""Metering jobs (thin adapters over services)."""

import logging

from celery import shared_task

from metering.services.telemetry.scrape import scrape_all
from portal import clock

log = logging.getLogger(__name__)


@shared_task(
    name="metering.scrape_targets",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=25,
    time_limit=28,
    max_retries=0,
    ignore_result=True,
)
def scrape_targets_task() -> None:
    """Scrape every enabled Prometheus target once (metering.telemetry.scrape_all).

    No retries: the next beat, 30 s later, is the retry, and a failing target is recorded
    on the target, not raised. Running twice only adds the increase since the last run."""
    outcomes = scrape_all(now=clock.now())
    failed = [outcome.url for outcome in outcomes if not outcome.is_ok]
    log.info("scrape: %d targets, %d failed %s", len(outcomes), len(failed), failed or "")


@shared_task(
    name="metering.rollup_pending",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=300,
    ignore_result=True,
)
def rollup_pending_task() -> None:
    """Fold pending usage events into the hourly and daily rollups (claim and recompute in one
    transaction: a killed run leaves the queue as it was)."""
    from metering.services.usage.rollup import rollup_pending

    cells = rollup_pending()
    if cells:
        log.info("rollup: %d hour cells recomputed", cells)
