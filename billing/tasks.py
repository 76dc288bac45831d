"""Billing jobs (thin adapters over services)."""

import logging
from datetime import UTC, datetime, timedelta

from celery import shared_task

from billing.services.invoices import invoice_run
from metering.services.usage.rollup import rollup_pending
from portal import clock
from portal.periods import month_start

log = logging.getLogger(__name__)


@shared_task(
    name="billing.invoice_month",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=3600,
    ignore_result=True,
)
def invoice_month_task(month: str | None = None) -> None:
    """Rate last month (or `month`, YYYY-MM), post it to the ledger and issue invoices.
    Idempotent: a tenant-month already invoiced is skipped, so a redelivery issues nothing."""
    start = (
        datetime.strptime(month, "%Y-%m").replace(tzinfo=UTC)
        if month
        else month_start(month_start(clock.now()) - timedelta(days=1))
    )
    rollup_pending()
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
