"""Webhooks end to end: endpoints made through the API, events raised in a transaction,
the deliver job posting to a real HTTP receiver on loopback that verifies every request
with `standardwebhooks` on the real clock (whatever the test clock says): retries while it
is down, one success, the same webhook-id on a replay, 410 disabling the endpoint, both
signatures during a rotation's overlap; who may hold which endpoint."""

from __future__ import annotations

import json
import random
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from portal.delivery import MAX_ATTEMPTS, deliveries_send, retry_delay
from portal.events import event_raise
from portal.models import Delivery, DeliveryAttempt, Event, WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """An HTTP server on a free loopback port answering each POST with the next status of
    `answers` (then the last one for ever), keeping every request (and the client port it
    came from) and whether it verified against each of `secrets`. `protocol` HTTP/1.1 keeps
    connections open; `drop_idle` then closes each after its answer without saying so (as
    a server whose idle timeout expired)."""

    def __init__(self, answers: list[int], *, protocol="HTTP/1.0", drop_idle=False):
        self.answers = list(answers)
        self.requests: list[dict] = []
        self.secrets: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = protocol

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                verified = []
                for secret in receiver.secrets:
                    try:
                        Webhook(secret).verify(body, headers)  # the real clock
                        verified.append(True)
                    except WebhookVerificationError:
                        verified.append(False)
                receiver.requests.append(
                    {
                        "headers": headers,
                        "body": json.loads(body),
                        "verified": verified,
                        "port": self.client_address[1],
                    }
                )
                status = (
                    receiver.answers.pop(0) if len(receiver.answers) > 1 else receiver.answers[0]
                )
                answer = b"" if status == 204 else f"answered {status}".encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                if drop_idle:
                    self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks?x=1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_of():
    made = []

    def make(answers, **options):
        made.append(Receiver(answers, **options))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


@pytest.fixture(autouse=True)
def loopback(settings):
    settings.WEBHOOK_ALLOW_LOOPBACK = True
    settings.WEBHOOK_TIMEOUT_SECONDS = 5


def _create(client, **body):
    response = client.post("/api/v1/webhook-endpoints", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _raise(tenant=None, *, type="invoice.issued", number="INV-2026-000001", for_factory=True):
    with transaction.atomic():  # committed: the deliveries are due, the job asked for
        return event_raise(
            type=type,
            summary=f"Invoice {number} issued",
            data={"invoice": number, "total": "12.50"},
            tenant=tenant,
            for_factory=for_factory,
            link="/billing/invoices/1/",
        )


def _run_due():
    """Make every pending delivery due now (the retry's wait, skipped) and run the job."""
    Delivery.objects.filter(state=Delivery.State.PENDING).update(next_attempt_at=timezone.now())
    deliveries_send(wait_s=20)


def test_an_event_is_retried_while_the_receiver_fails_then_delivered_once(
    users, token_client, tenant_a, receiver_of
):
    receiver = receiver_of([503, 503, 204])
    operator = token_client(users["operator"], scopes=["notify"])
    created = _create(operator, url=receiver.url, event_types=["invoice.issued"])
    receiver.secrets = [created["secret"]]
    assert created["secret"].startswith("whsec_")
    assert "secret" not in operator.get(f"/api/v1/webhook-endpoints/{created['id']}").json()

    event = _raise(tenant_a)  # the job runs on commit: the first attempt, a 503
    for _ in range(2):
        _run_due()

    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("delivered", 3)
    assert [r["verified"] for r in receiver.requests] == [[True]] * 3
    assert {r["headers"]["webhook-id"] for r in receiver.requests} == {event.webhook_id}
    body = receiver.requests[0]["body"]
    assert body["type"] == "invoice.issued"
    assert body["timestamp"] == event.occurred_at.isoformat().replace("+00:00", "Z")
    assert body["data"]["invoice"] == "INV-2026-000001" and body["data"]["total"] == "12.50"
    assert body["data"]["link"].endswith("/billing/invoices/1/")
    log = operator.get(f"/api/v1/webhook-endpoints/{created['id']}/deliveries").json()
    [row] = log["results"]
    assert (row["webhook_id"], row["state"]) == (event.webhook_id, "delivered")
    assert [a["status_code"] for a in row["attempts"]] == [503, 503, 204]
    assert row["attempts"][0]["response"] == "answered 503"
    _run_due()
    assert len(receiver.requests) == 3  # delivered: never sent again by the job

    replayed = operator.post(f"/api/v1/deliveries/{delivery.pk}/replay")

    assert replayed.status_code == 202, replayed.json()
    assert len(receiver.requests) == 4  # sent at once, on commit
    assert receiver.requests[-1]["headers"]["webhook-id"] == event.webhook_id


def _raise_several(count: int) -> list[Event]:
    with transaction.atomic():  # one commit: one run of the job, one lane
        return [_raise(number=f"INV-2026-{n:06d}") for n in range(1, count + 1)]


@pytest.mark.parametrize("drop_idle, connections", [(False, 1), (True, 5)])
def test_a_lane_keeps_its_connection_open_while_the_endpoint_does(
    users, token_client, receiver_of, drop_idle, connections
):
    """An endpoint's deliveries go out over one connection; one that drops each connection
    after its answer without saying so (an idle timeout) gets each next request anew on a
    new connection: delivered once each, every attempt a success."""
    receiver = receiver_of([204], protocol="HTTP/1.1", drop_idle=drop_idle)
    operator = token_client(users["operator"], scopes=["notify"])
    _create(operator, url=receiver.url)

    events = _raise_several(5)

    assert [r["headers"]["webhook-id"] for r in receiver.requests] == [e.webhook_id for e in events]
    assert len({r["port"] for r in receiver.requests}) == connections
    attempts = DeliveryAttempt.objects.order_by("pk")
    assert [(a.status_code, a.error) for a in attempts] == [(204, "")] * 5


def test_no_answer_is_retried_and_a_dead_receiver_runs_out_of_attempts(
    users, token_client, tenant_a
):
    operator = token_client(users["operator"], scopes=["notify"])
    _create(operator, url="http://127.0.0.1:9/nobody")  # nothing listens on port 9
    _raise(tenant_a)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("pending", 1)
    assert delivery.attempt_log.get().status_code is None
    assert "could not connect" in delivery.attempt_log.get().error
    for _ in range(MAX_ATTEMPTS - 1):
        _run_due()
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.next_attempt_at) == ("failed", 14, None)


def test_retries_wait_30_s_doubling_with_jitter_about_3_days_in_all():
    rng = random.Random(7)
    waits = [retry_delay(n, rng=rng).total_seconds() for n in range(1, MAX_ATTEMPTS)]
    bases = [30 * 2 ** (n - 1) for n in range(1, MAX_ATTEMPTS)]
    assert all(0.8 * b <= w <= 1.2 * b for w, b in zip(waits, bases, strict=True))
    assert sum(bases) == 245_730  # 2.84 days
    assert len(set(waits)) == len(waits)  # jittered


def test_410_disables_the_endpoint(users, token_client, tenant_a, receiver_of):
    gone, kept = receiver_of([410]), receiver_of([200])
    operator = token_client(users["operator"], scopes=["notify"])
    first = _create(operator, url=gone.url)
    _create(operator, url=kept.url)

    _raise(tenant_a)
    endpoint = WebhookEndpoint.objects.get(pk=first["id"])
    _raise(tenant_a, number="INV-2026-000002")

    assert (endpoint.enabled, endpoint.disabled_reason) == (False, "it answered 410 Gone")
    assert len(gone.requests) == 1 and len(kept.requests) == 2
    assert Delivery.objects.filter(endpoint=endpoint).get().state == "failed"
    listed = operator.get(f"/api/v1/webhook-endpoints/{first['id']}").json()
    assert (listed["enabled"], listed["disabled_reason"]) == (False, "it answered 410 Gone")


def test_after_a_rotation_both_secrets_sign_for_24_hours(
    users, token_client, tenant_a, receiver_of
):
    receiver = receiver_of([200])
    operator = token_client(users["operator"], scopes=["notify"])
    created = _create(operator, url=receiver.url)

    rotated = operator.post(f"/api/v1/webhook-endpoints/{created['id']}/rotate").json()
    receiver.secrets = [created["secret"], rotated["secret"]]
    _raise(tenant_a)
    WebhookEndpoint.objects.filter(pk=created["id"]).update(
        previous_secret_until=timezone.now() - timedelta(seconds=1)  # the 24 h are over
    )
    _raise(tenant_a, number="INV-2026-000002")

    assert rotated["secret"] != created["secret"]
    assert [r["verified"] for r in receiver.requests] == [[True, True], [False, True]]
    assert len(receiver.requests[0]["headers"]["webhook-signature"].split(" ")) == 2


def test_an_event_reaches_its_tenants_endpoints_and_the_factorys_only(
    users, make_user, token_client, tenant_a, tenant_b, receiver_of
):
    factory, own, other = receiver_of([200]), receiver_of([200]), receiver_of([200])
    member_b = make_user("tenant", tenant=tenant_b)
    _create(token_client(users["operator"], scopes=["notify"]), url=factory.url)
    made = _create(token_client(users["tenant"], scopes=["notify"]), url=own.url)
    _create(token_client(member_b, scopes=["notify"]), url=other.url)

    _raise(tenant_a)
    _raise(tenant_b, number="INV-2026-000002", for_factory=False)  # to tenant B alone

    assert made["tenant"] == "tenant-a"  # a member's endpoint is its tenant's
    assert [r["body"]["data"]["invoice"] for r in own.requests] == ["INV-2026-000001"]
    assert [r["body"]["data"]["invoice"] for r in other.requests] == ["INV-2026-000002"]
    assert [r["body"]["data"]["invoice"] for r in factory.requests] == ["INV-2026-000001"]
    assert Event.objects.count() == 2


def test_who_may_hold_which_endpoint(users, token_client, tenant_a, tenant_b):
    url = "https://hooks.example.com/portal"
    member = token_client(users["tenant"], scopes=["notify"])
    finance = token_client(users["finance"], scopes=["notify"])
    investor = APIClient()
    investor.force_login(users["investor"])  # investors hold no tokens

    answers = {
        "member for another tenant": member.post(
            "/api/v1/webhook-endpoints", {"url": url, "tenant": "tenant-b"}, format="json"
        ),
        "member's read token": token_client(users["tenant"], scopes=["read"]).post(
            "/api/v1/webhook-endpoints", {"url": url}, format="json"
        ),
        "investor": investor.post("/api/v1/webhook-endpoints", {"url": url}, format="json"),
        "finance, every factory event": finance.post(
            "/api/v1/webhook-endpoints", {"url": url}, format="json"
        ),
        "http to another host": token_client(users["operator"], scopes=["notify"]).post(
            "/api/v1/webhook-endpoints", {"url": "http://hooks.example.com/x"}, format="json"
        ),
    }

    statuses = {
        case: (r.status_code, r.json()["errors"][0]["field"]) for case, r in answers.items()
    }
    assert statuses == {
        "member for another tenant": (403, "tenant"),
        "member's read token": (403, ""),
        "investor": (403, ""),
        "finance, every factory event": (403, "event_types"),
        "http to another host": (400, "url"),
    }
    assert not WebhookEndpoint.objects.exists()
    billing = {"url": url, "event_types": ["invoice.issued", "payment.received"]}
    assert finance.post("/api/v1/webhook-endpoints", billing, format="json").status_code == 201
    assert (
        finance.post(
            "/api/v1/webhook-endpoints", {"url": url, "tenant": "tenant-b"}, format="json"
        ).status_code
        == 201
    )
    own = member.post("/api/v1/webhook-endpoints", {"url": url}, format="json")
    assert own.status_code == 201
    listed = member.get("/api/v1/webhook-endpoints").json()["results"]
    assert [e["tenant"] for e in listed] == ["tenant-a"]  # its own only
    assert investor.get("/api/v1/webhook-endpoints").status_code == 403


class Hanging(Receiver):
    """A receiver that answers nothing for `hold` seconds (then 200), or until released;
    `arrived` lists the webhook-id of every request as it arrives (`requests`, as it is
    answered)."""

    def __init__(self, hold: float):
        self.released = threading.Event()
        self.hold = hold
        self.arrived: list[str] = []
        super().__init__([200])

    def close(self):
        self.released.set()
        super().close()


def _hanging(hold: float) -> Hanging:
    receiver = Hanging(hold)
    handler = receiver.server.RequestHandlerClass
    answer = handler.do_POST

    def do_post(self):
        receiver.arrived.append(self.headers["webhook-id"])
        receiver.released.wait(receiver.hold)
        answer(self)

    handler.do_POST = do_post
    return receiver


def test_an_endpoint_that_never_answers_delays_no_other(
    users, token_client, tenant_a, receiver_of, settings
):
    """The hanging endpoint holds its own lane for the timeout (10 s here); the other
    endpoint's deliveries of two events raised meanwhile arrive at once."""
    settings.WEBHOOK_TIMEOUT_SECONDS = 10
    dead = _hanging(hold=30)
    fast = receiver_of([200])
    operator = token_client(users["operator"], scopes=["notify"])
    _create(operator, url=dead.url)
    _create(operator, url=fast.url)
    started = time.monotonic()
    try:
        _raise(tenant_a)  # the job runs on commit, waits 2 s at most, returns
        _raise(tenant_a, number="INV-2026-000002")  # the dead lane is busy: skipped
        elapsed = time.monotonic() - started

        assert [r["body"]["data"]["invoice"] for r in fast.requests] == [
            "INV-2026-000001",
            "INV-2026-000002",
        ]
        assert elapsed < 8  # two runs, neither waiting for the 10 s timeout
        assert len(dead.arrived) == 1  # one attempt in flight, the second not started
    finally:
        dead.close()
