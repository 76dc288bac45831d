"""Billing jobs (thin adapters over services)."""

import logging

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(
    name="billing.invoice_month",
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=3600,
    ignore_result=True,
)
def invoice_month_task() -> None:
    """Rate last month, post it to the ledger and issue invoices."""
    log.info("invoice: nothing implemented yet")
