"""The billing events (architecture.md "Alerts and notifications"): an invoice issued or
overdue, a payment received, a credit note issued, each raised through the kernel in the
transaction that made it, addressed to the tenant and to the factory (finance). Payloads
hold ids, amounts as decimal strings and RFC 3339 times of that tenant alone."""

from __future__ import annotations

from datetime import datetime

from django.urls import reverse

from billing.models import CreditNote, Invoice
from portal.events import event_raise
from portal.formatting import money_text, rfc3339
from portal.models import Event
from portal.money import money_str


def _rfc3339(moment: datetime | None) -> str | None:
    return rfc3339(moment) if moment else None


def _invoice_data(invoice: Invoice) -> dict:
    return {
        "invoice_id": invoice.pk,
        "number": invoice.number,
        "tenant": invoice.tenant.slug,
        "kind": invoice.kind,
        "period_start": _rfc3339(invoice.period_start),
        "period_end": _rfc3339(invoice.period_end),
        "total": money_str(amount=invoice.total, currency=invoice.currency),
        "currency": invoice.currency,
        "status": invoice.status,
        "issued_at": _rfc3339(invoice.issued_at),
        "due_at": _rfc3339(invoice.due_at),
    }


def _link(invoice: Invoice) -> str:
    return reverse("invoice-page", args=[invoice.pk])


def invoice_issued_raise(invoice: Invoice) -> Event:
    total = money_text(amount=invoice.total, currency=invoice.currency)
    return event_raise(
        type="invoice.issued",
        summary=f"Invoice {invoice.number} issued: {total}",
        data=_invoice_data(invoice),
        tenant=invoice.tenant,
        link=_link(invoice),
        at=invoice.issued_at,
    )


def invoice_overdue_raise(invoice: Invoice, *, outstanding, at: datetime) -> Event:
    due = money_text(amount=outstanding, currency=invoice.currency)
    return event_raise(
        type="invoice.overdue",
        summary=f"Invoice {invoice.number} is overdue: {due} outstanding",
        data={
            **_invoice_data(invoice),
            "outstanding": money_str(amount=outstanding, currency=invoice.currency),
        },
        tenant=invoice.tenant,
        level=Event.Level.WARNING,
        link=_link(invoice),
        at=at,
    )


def payment_received_raise(invoice: Invoice) -> Event:
    paid = money_str(amount=invoice.paid_amount, currency=invoice.currency)
    text = money_text(amount=invoice.paid_amount, currency=invoice.currency)
    return event_raise(
        type="payment.received",
        summary=f"Payment of {text} received on {invoice.number}",
        data={**_invoice_data(invoice), "amount": paid, "paid_at": _rfc3339(invoice.paid_at)},
        tenant=invoice.tenant,
        link=_link(invoice),
        at=invoice.paid_at,
    )


def credit_note_issued_raise(note: CreditNote) -> Event:
    total = money_str(amount=note.total, currency=note.currency)
    return event_raise(
        type="credit_note.issued",
        summary=f"Credit note {note.number} issued: "
        f"{money_text(amount=note.total, currency=note.currency)}",
        data={
            "credit_note_id": note.pk,
            "number": note.number,
            "tenant": note.tenant.slug,
            "invoice": note.invoice.number if note.invoice_id else None,
            "reason": note.reason,
            "settle": note.settle,
            "total": total,
            "currency": note.currency,
            "issued_at": _rfc3339(note.issued_at),
        },
        tenant=note.tenant,
        link=reverse("credit-note-page", args=[note.pk]),
        at=note.issued_at,
    )
