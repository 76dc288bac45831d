"""Email through Django's backend to a real SMTP server (aiosmtpd on loopback): a user who
opted in to a type receives its events as a readable message, with the level and scope in
the subject and a link back to the page; a user who did not, or may not see it, none."""

from __future__ import annotations

import email
import socket
from email.policy import default

import pytest
from aiosmtpd.controller import Controller
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from portal.delivery import deliveries_send
from portal.events import email_subscriptions_set, event_raise
from portal.models import Delivery

pytestmark = pytest.mark.django_db(transaction=True)


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=default)
        self.messages.append((envelope.rcpt_tos, message))
        return "250 OK"


@pytest.fixture
def smtp(settings):
    inbox = Inbox()
    with socket.socket() as probe:  # a free port (aiosmtpd checks it is up by connecting)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.PORTAL_URL = "https://portal.example.com"
    yield inbox
    controller.stop()


def test_an_opted_in_user_gets_a_readable_email(smtp, users, make_user, tenant_a, tenant_b, now):
    finance, member = users["finance"], users["tenant"]
    member_b = make_user("tenant", tenant=tenant_b)
    for user, address in ((finance, "fin@example.com"), (member, "ops@tenant-a.example"),
                          (member_b, "ops@tenant-b.example"), (users["operator"], "op@example.com")):  # fmt: skip
        user.email = address
        user.save()
    email_subscriptions_set(user=finance, event_types=["invoice.issued", "flywheel.proposal"])
    email_subscriptions_set(user=member, event_types=["invoice.issued"])
    email_subscriptions_set(user=member_b, event_types=["invoice.issued"])

    with transaction.atomic():
        event_raise(
            type="invoice.issued",
            summary="Invoice INV-2026-000007 issued: 12.50 USD",
            data={
                "number": "INV-2026-000007",
                "total": "12.50",
                "due_at": "2026-04-30T00:00:00Z",
                "models": ["llama-70b", "qwen-7b"],
                "credit_note": None,
                "is_paid": False,
            },
            tenant=tenant_a,
            link="/billing/invoices/7/",
        )
    deliveries_send(wait_s=20)

    assert sorted(to for to, _ in smtp.messages) == [["fin@example.com"], ["ops@tenant-a.example"]]
    _, message = smtp.messages[0]
    assert message["Subject"] == "[Info] Tenant A: Invoice INV-2026-000007 issued: 12.50 USD"
    body = message.get_content()
    assert "Invoice INV-2026-000007 issued: 12.50 USD" in body
    # The event's data in words: its fields named in words, no Python reprs (None, ['…']),
    # instants as the header's; in the database's order of its keys (PostgreSQL's jsonb
    # sorts them).
    summary_and_header, data = body.split("Open it in the portal")[0].split(" UTC", 1)
    assert summary_and_header.endswith(f"{now:%Y-%m-%d %H:%M}")
    assert sorted(line for line in data.splitlines() if line) == sorted(
        [
            "Number: INV-2026-000007",
            "Total: 12.50",
            "Due at: 2026-04-30 00:00 UTC",
            "Models: llama-70b, qwen-7b",
            "Credit note: —",
            "Is paid: no",
        ]
    )
    assert "https://portal.example.com/billing/invoices/7/" in body
    assert "https://portal.example.com/notifications/" in body
    assert set(Delivery.objects.values_list("channel", "state")) == {("email", "delivered")}
    assert email_subscriptions_set(user=finance, event_types=["usage.batch_rejected"]) == []


def test_an_events_email_recipients_are_read_in_queries_that_do_not_grow(make_user, tenant_a,
                                                                          tenant_b):  # fmt: skip
    """The close raises an event per tenant: who of the subscribers may see it is decided
    from the subscribers as read, in the same queries for 3 of them as for 15."""
    subscribed: set[str] = set()
    counts = []
    for size in (1, 4):
        for n in range(size):
            for role, tenant, name in (("tenant", tenant_a, "a"), ("tenant", tenant_b, "b"),
                                       ("finance", None, "f")):  # fmt: skip
                user = make_user(role, tenant=tenant, username=f"{name}{size}-{n}")
                user.email = f"{user.username}@example.com"
                user.save()
                email_subscriptions_set(user=user, event_types=["invoice.issued"])
                subscribed |= {user.username} if name != "b" else set()
        with transaction.atomic(), CaptureQueriesContext(connection) as captured:
            event = event_raise(type="invoice.issued", summary="Invoice issued", data={},
                                tenant=tenant_a)  # fmt: skip
        counts.append(len(captured))
        reached = Delivery.objects.filter(event=event).values_list("user__username", flat=True)
        assert set(reached) == subscribed
    assert len(subscribed) == 10  # tenant A's members and finance, never tenant B's
    assert counts[0] == counts[1]
