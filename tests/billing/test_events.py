"""Billing's events (architecture.md "Alerts and notifications"): an invoice issued, its
payment, a credit note and invoice.overdue once after the due day, each addressed to the
tenant and the factory with its figures as decimal strings and RFC 3339 times; who sees
them in the inbox."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.services.credit_notes import credit_note_issue
from billing.services.invoices.collect import invoice_pay, invoices_overdue_raise
from portal.events import inbox_list, inbox_mark_read, inbox_unread_count
from portal.models import Event
from tests.billing.factories import make_march_invoice

pytestmark = pytest.mark.both_backends


def _rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@pytest.fixture
def issued(admin_api, tenant_a, now):
    """tenant-a's March, 10 M in + 10 M out at 0.88, 10% off: total 15.84, issued now."""
    return make_march_invoice(admin_api, tenant_a, discount_pct=Decimal(10))


def test_an_issued_invoice_is_an_event_for_its_tenant_and_the_factory(issued, tenant_a, now):
    event = Event.objects.get(type="invoice.issued")

    assert (event.tenant, event.for_factory, event.level) == (tenant_a, True, "info")
    assert event.summary == f"Invoice {issued.number} issued: 15.84 USD"
    assert event.link == f"/billing/invoices/{issued.pk}/"
    assert event.occurred_at == now
    assert event.data == {
        "invoice_id": issued.pk,
        "number": issued.number,
        "tenant": "tenant-a",
        "kind": "usage",
        "period_start": "2026-03-01T00:00:00Z",
        "period_end": "2026-04-01T00:00:00Z",
        "total": "15.84",
        "currency": "USD",
        "status": "issued",
        "issued_at": _rfc3339(now),
        "due_at": _rfc3339(now + timedelta(days=30)),
    }


def test_overdue_is_raised_once_after_the_due_day_while_something_is_outstanding(issued, now):
    due = issued.due_at
    day_after = datetime(due.year, due.month, due.day, tzinfo=UTC) + timedelta(days=1)

    on_the_due_day = invoices_overdue_raise(now=day_after - timedelta(microseconds=1))
    credit_note_issue(invoice=issued, reason="goodwill", settle="balance", amount="5.00")
    first = invoices_overdue_raise(now=day_after)
    again = invoices_overdue_raise(now=day_after + timedelta(days=3))

    assert (on_the_due_day, first, again) == (0, 1, 0)
    event = Event.objects.get(type="invoice.overdue")
    assert event.level == "warning"
    assert event.data["outstanding"] == "10.84"  # 15.84 less the 5.00 credit note
    assert event.summary == f"Invoice {issued.number} is overdue: 10.84 USD outstanding"


def test_a_paid_invoice_is_never_overdue_and_its_payment_is_an_event(issued, now):
    note = credit_note_issue(invoice=issued, reason="goodwill", settle="balance", amount="5.00")
    invoice_pay(invoice=issued, paid_at=now)

    assert invoices_overdue_raise(now=now + timedelta(days=60)) == 0
    credited = Event.objects.get(type="credit_note.issued")
    paid = Event.objects.get(type="payment.received")
    assert credited.data["number"] == note.number and credited.data["total"] == "5.00"
    assert credited.data["invoice"] == issued.number
    assert paid.data["amount"] == "10.84" and paid.data["paid_at"] == _rfc3339(now)
    assert paid.summary == f"Payment of 10.84 USD received on {issued.number}"


def test_the_inbox_shows_each_role_the_events_it_may_see(issued, users, make_user, tenant_b):
    member_b = make_user("tenant", tenant=tenant_b)
    seen = {
        role: [e.type for e in inbox_list(user=user)]
        for role, user in {**users, "member of b": member_b}.items()
    }

    assert seen == {
        "operator": ["invoice.issued"],
        "finance": ["invoice.issued"],
        "investor": [],
        "tenant": ["invoice.issued"],
        "member of b": [],
    }
    assert inbox_unread_count(user=users["finance"]) == 1
    assert inbox_mark_read(user=users["finance"]) == 1
    assert inbox_unread_count(user=users["finance"]) == 0
    assert inbox_unread_count(user=users["tenant"]) == 1  # read by finance only
