"""Billing jobs (thin adapters over services)."""

import logging
from datetime import UTC, datetime, timedelta

from celery import shared_task

from billing.services.invoices import invoice_run
from billing.services.rated import rated_usage_update
from portal import clock
from portal.periods import month_start
from portal.pipeline import MEASURE, RATE, stage_begin, stages_run

log = logging.getLogger(__name__)


@shared_task(
    name="billing.invoice_month",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=3600,
    max_retries=0,
    ignore_result=True,
)
def invoice_month_task(month: str | None = None) -> None:
    """Rate last month (or `month`, YYYY-MM), post it to the ledger and issue invoices, after
    running the stages before the measurement (the fold and the rating) in this process.
    Idempotent: a tenant-month already invoiced is skipped, so a redelivery issues nothing."""
    start = (
        datetime.strptime(month, "%Y-%m").replace(tzinfo=UTC)
        if month
        else month_start(month_start(clock.now()) - timedelta(days=1))
    )
    stages_run(before=MEASURE)
    run = invoice_run(month_start=start)
    log.info(
        "invoice %s: %d issued, %d existing, %d nothing due, %d errors %s",
        f"{start:%Y-%m}",
        len(run.issued),
        len(run.existing),
        len(run.nothing_due),
        len(run.errors),
        run.errors or "",
    )


@shared_task(
    name=RATE,
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=900,
    max_retries=0,
    ignore_result=True,
)
def rate_task() -> None:
    """The rate stage: rate again, from their first changed hour, the tenant-months
    metering's change log and billing's queue name
    (billing.services.rated.rated_usage_update), in one transaction with the
    cursor it advances: a killed run rates them again, never twice. No retries: the beat
    runs it every 5 minutes."""
    stage_begin(RATE)
    rated = rated_usage_update()
    if rated:
        log.info("rate: %d tenant-months", rated)
