"""Billing jobs (thin adapters over services)."""

import logging
from datetime import UTC, datetime, timedelta

from celery import shared_task

from billing.services.invoices import invoice_run
from billing.services.rated import rated_months_refresh
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


@shared_task(
    name="billing.rate_months",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=900,
    ignore_result=True,
)
def rate_months_task() -> None:
    """Bring billing's rated usage up to date after the fold: every tenant-month whose usage,
    pricing or invoices changed is rated again. Idempotent: a tenant-month whose inputs did
    not change is not rated again. A run that finds another refreshing returns at once, so
    runs longer than the beat interval never queue up."""
    rollup_pending()
    months = rated_months_refresh(wait=False)
    if months is None:
        log.info("rate: skipped, another refresh is running (the next run rates the rest)")
    else:
        log.info("rate: %d tenant-months up to date", months)
