"""Billing jobs (thin adapters over services)."""

import logging

from billing.services.close import close_run
from billing.services.invoices.collect import invoices_overdue_raise
from billing.services.rating import rated_usage_update
from portal import clock
from portal.celery import job_task
from portal.periods import last_month, month_parse
from portal.pipeline import RATE, stage_begin

log = logging.getLogger(__name__)


@job_task("billing.close", time_limit=3600)
def close_task(month: str | None = None) -> None:
    """The month-end close of last month (or `month`, YYYY-MM), or its resumption
    (billing.services.close): a redelivery after a killed worker resumes it at the step it
    was in."""
    start = month_parse(month) if month else last_month(clock.now())
    run = close_run(month_start=start)
    log.info(
        "close %s: steps %s, %d invoices issued, %d credit notes, %d errors %s",
        f"{start:%Y-%m}",
        ",".join(run.steps) or "none left",
        len(run.issued),
        len(run.credit_notes),
        len(run.errors),
        run.errors or "",
    )


@job_task(RATE, time_limit=900)
def rate_task() -> None:
    """The rate stage: rate again, from their first changed hour, the tenant-months
    metering's change log and billing's queue name
    (billing.services.rating.rated_usage_update), in one transaction with the
    cursor it advances: a killed run rates them again, never twice. No retries: the beat
    runs it every 5 minutes."""
    stage_begin(RATE)
    rated = rated_usage_update()
    if rated:
        log.info("rate: %d tenant-months", rated)


@job_task("billing.overdue", time_limit=600)
def overdue_task() -> None:
    """invoice.overdue for the invoices whose due day ended with something outstanding."""
    invoices_overdue_raise(now=clock.now())
