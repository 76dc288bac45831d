"""The notification pages: the inbox with its unread count in the navigation, webhook
endpoints made, rotated, disabled and deleted in the browser (each secret shown once), the
delivery log with its attempts and a replay, email opt-ins."""

import re

import pytest

from portal import clock
from portal.events import event_raise, inbox_unread_count
from portal.models import Delivery, DeliveryAttempt, EmailSubscription, WebhookEndpoint

pytestmark = pytest.mark.both_backends


def _raise(tenant, n=1):
    return event_raise(
        type="invoice.issued",
        summary=f"Invoice INV-2026-00000{n} issued: 12.50 USD",
        data={"number": f"INV-2026-00000{n}"},
        tenant=tenant,
        link="/billing/invoices/",
    )


def test_the_inbox_counts_unread_events_in_the_navigation(users, session_client, tenant_a):
    client = session_client(users["tenant"])
    for n in (1, 2):
        _raise(tenant_a, n)

    page = client.get("/inbox/").content.decode()

    assert '<span class="count" aria-label="2 unread">2</span>' in page
    assert page.count('class="unread"') == 2
    assert "Invoice INV-2026-000002 issued: 12.50 USD" in page
    event = _raise(tenant_a, 3)
    opened = client.get(f"/inbox/{event.pk}/open/")
    assert (opened.status_code, opened["Location"]) == (302, "/billing/invoices/")
    assert 'aria-label="2 unread"' in client.get("/inbox/").content.decode()
    client.post("/inbox/")
    assert 'class="count"' not in client.get("/inbox/").content.decode()


def test_the_unread_count_stops_at_99_plus(
    users, session_client, tenant_a, django_assert_max_num_queries
):
    """Counted up to 100, in one query, however many events a burst raised."""
    client = session_client(users["tenant"])
    for n in range(99):
        _raise(tenant_a, n)
    assert 'aria-label="99 unread">99</span>' in client.get("/billing/invoices/").content.decode()
    _raise(tenant_a, 100)

    page = client.get("/billing/invoices/").content.decode()

    assert '<span class="count" aria-label="more than 99 unread">99+</span>' in page
    assert inbox_unread_count(user=users["tenant"]) == 100
    for n in range(150):
        _raise(tenant_a, 200 + n)
    assert inbox_unread_count(user=users["tenant"]) == 100


def test_an_endpoint_is_made_in_the_browser_and_its_secret_shown_once(users, session_client):
    client = session_client(users["operator"])

    made = client.post(
        "/notifications/",
        {"form": "endpoint", "url": "https://hooks.example.com/portal",
         "event_types": ["invoice.issued", "incident.opened"]},
    )  # fmt: skip

    endpoint = WebhookEndpoint.objects.get()
    text = made.content.decode()
    assert made.status_code == 200 and endpoint.secret in text
    assert endpoint.tenant is None and endpoint.event_types == ["invoice.issued", "incident.opened"]
    assert endpoint.secret not in client.get("/notifications/").content.decode()
    refused = client.post("/notifications/", {"form": "endpoint", "url": "http://example.com/x"})
    assert refused.status_code == 400 and "must be an https URL" in refused.content.decode()

    rotated = client.post(f"/notifications/endpoints/{endpoint.pk}/", {"action": "rotate"})
    endpoint.refresh_from_db()
    assert endpoint.secret in rotated.content.decode() and endpoint.previous_secret
    client.post(f"/notifications/endpoints/{endpoint.pk}/", {"action": "disable"})
    endpoint.refresh_from_db()
    assert endpoint.enabled is False
    client.post(f"/notifications/endpoints/{endpoint.pk}/", {"action": "delete"})
    assert not WebhookEndpoint.objects.exists()


def test_the_delivery_log_shows_each_attempt_and_replays(users, session_client, tenant_a):
    client = session_client(users["tenant"])
    client.post("/notifications/", {"form": "endpoint", "url": "https://hooks.example.com/a"})
    endpoint = WebhookEndpoint.objects.get()
    event = _raise(tenant_a)
    delivery = Delivery.objects.get(endpoint=endpoint)
    DeliveryAttempt.objects.create(
        delivery=delivery, at=clock.now(), status_code=503, latency_ms=41, response="busy"
    )
    Delivery.objects.filter(pk=delivery.pk).update(state="failed", attempts=14)

    log = client.get(f"/notifications/endpoints/{endpoint.pk}/").content.decode()
    replayed = client.post(f"/notifications/deliveries/{delivery.pk}/replay/")

    assert endpoint.tenant == tenant_a  # a member's endpoint is its tenant's
    assert event.webhook_id in log and "503" in log and "41 ms" in log and "busy" in log
    # The endpoint's URL breaks after its separators, on its log and in the list.
    url = "https://<wbr>hooks.<wbr>example.<wbr>com/<wbr>a"
    assert f"To <code>{url}</code>" in log
    assert f"<code>{url}</code>" in client.get("/notifications/").content.decode()
    assert replayed.status_code == 302
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("pending", 0)


def test_email_opt_ins_offer_the_types_a_role_may_receive(users, session_client):
    client = session_client(users["finance"])

    page = client.get("/notifications/").content.decode()
    client.post("/notifications/", {"form": "email", "event_types": ["invoice.overdue"]})

    offered = set(re.findall(r'name="event_types" value="([a-z_.]+)"', page))
    assert offered == {
        "invoice.issued",
        "invoice.overdue",
        "payment.received",
        "credit_note.issued",
        "budget.threshold_reached",
    }
    assert list(EmailSubscription.objects.values_list("event_type", flat=True)) == [
        "invoice.overdue"
    ]
    assert "has no email address" in page
