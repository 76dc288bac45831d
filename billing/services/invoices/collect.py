"""Collecting an invoice: its payment (what is outstanding comes in as cash), and
invoice.overdue once its due day has passed with something outstanding."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from billing.domain.invoices import InvoiceConflict
from billing.models import (
    Invoice,
    LedgerTransaction,
)
from billing.selectors.invoices import invoice_outstanding
from billing.services.events import (
    invoice_overdue_raise,
    payment_received_raise,
)
from billing.services.ledger import (
    Leg,
    account_named,
    account_receivable,
    ledger_post,
)
from portal import clock
from portal.periods import day_floor
from portal.services import audit_record


@transaction.atomic
def invoice_pay(*, invoice: Invoice, by=None, paid_at: datetime | None = None) -> Invoice:
    """Record the payment of an issued invoice: what is outstanding on it (its total less
    what credit notes reduced) comes in as cash and settles its receivable. A payment dated
    in a closed month is accounted on the first day of the next open one."""
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
    if invoice.status != Invoice.Status.ISSUED:
        raise InvoiceConflict(
            f"invoice {invoice} is {invoice.status}; only issued invoices are paid"
        )
    paid_at = paid_at or clock.now()
    amount = invoice_outstanding(invoice=invoice)
    if amount > 0:
        ledger_post(
            kind=LedgerTransaction.Kind.PAYMENT,
            memo=f"Payment of {invoice.number}",
            legs=[
                Leg(account_named("cash"), amount),
                Leg(account_receivable(tenant=invoice.tenant), -amount),
            ],
            currency=invoice.currency,
            tenant=invoice.tenant,
            period_start=invoice.period_start,
            occurred_at=paid_at,
            idempotency_key=f"payment:{invoice.pk}",
            by=by,
        )
    invoice.status = Invoice.Status.PAID
    invoice.paid_at = paid_at
    invoice.paid_amount = amount
    invoice.save(update_fields=["status", "paid_at", "paid_amount"])
    audit_record(actor=by, action="invoice.pay", object_type="invoice", object_id=invoice.number)
    payment_received_raise(invoice)
    return invoice


def invoices_overdue_raise(*, now: datetime) -> int:
    """invoice.overdue, once per invoice: on the first run after its due day (UTC) has
    ended while something is outstanding on it. Returns how many were raised."""
    raised = 0
    candidates = Invoice.objects.filter(
        status=Invoice.Status.ISSUED,
        due_at__lt=day_floor(now),  # its due day is over
        overdue_raised_at__isnull=True,
    ).select_related("tenant")
    for invoice in candidates:
        outstanding = invoice_outstanding(invoice=invoice)
        if outstanding <= 0:
            continue
        with transaction.atomic():
            if not Invoice.objects.filter(pk=invoice.pk, overdue_raised_at__isnull=True).update(
                overdue_raised_at=now
            ):
                continue  # another run took it
            invoice_overdue_raise(invoice, outstanding=outstanding, at=now)
        raised += 1
    return raised
