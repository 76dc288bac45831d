"""The `deliver` job: send the due deliveries of raised events (portal.events) to webhook
endpoints and email recipients, on the real clock, each attempt logged.

A run claims the due deliveries (a lease of WEBHOOK_LEASE_SECONDS, above the timeout: a
worker killed while sending leaves them due again, and the retry carries the same webhook-id) and sends each endpoint's in a
thread of its own; an endpoint that does not answer holds only its own thread, for at most
the timeout, and the run waits `RUN_WAIT` for the others before it returns, so a dead
endpoint never delays another's deliveries nor the next run. Outcomes: a 2xx is delivered;
a 410 disables the endpoint; anything else, or no answer within WEBHOOK_TIMEOUT_SECONDS, is
retried 30 s later, doubling, with jitter, `MAX_ATTEMPTS` times in all (about 3 days)."""

from __future__ import annotations

import http.client
import logging
import random
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import connections, transaction
from django.db.models import F
from django.template.loader import render_to_string
from django.utils import timezone

from portal.models import Delivery, DeliveryAttempt, Event, WebhookEndpoint
from portal.pipeline import DELIVER, stage_schedule
from portal.webhooks import endpoint_access_check, endpoint_disable, event_body, signed_headers

log = logging.getLogger(__name__)

FIRST_RETRY = 30  # seconds; doubles at each failure
MAX_ATTEMPTS = 14  # 30 s × (2^13 − 1) ≈ 2.8 days of retries
JITTER = 0.2  # ± share of each delay
RUN_WAIT = 2.0  # seconds a run waits for its sends before it returns
BATCH = 2000  # deliveries claimed per run
EXCERPT = 1024  # bytes of an answer kept
RECORD_EVERY, RECORD_SECONDS = 50, 0.5  # a lane records its attempts in batches this size
DISABLED = "the endpoint is disabled"

_pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="deliver")
_in_flight: set[str] = set()  # lanes (an endpoint, the mail server) this process is sending to
_in_flight_lock = threading.Lock()


def retry_delay(attempts: int, *, rng: random.Random | None = None) -> timedelta:
    """The wait after the `attempts`-th failed attempt: 30 s × 2^(attempts − 1), ± 20 %."""
    base = FIRST_RETRY * 2 ** (attempts - 1)
    return timedelta(seconds=base * (1 + (rng or random).uniform(-JITTER, JITTER)))


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    latency_ms: int
    response: str = ""
    error: str = ""
    at: datetime | None = None  # when the attempt began

    @property
    def is_delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def deliveries_send(*, wait_s: float = RUN_WAIT) -> int:
    """Claim the due deliveries and send them, one thread per lane; returns how many were
    claimed. Lanes already being sent to by this process are left for a later run."""
    with _in_flight_lock:
        busy = set(_in_flight)
    claimed = _claim(busy=busy)
    lanes: dict[str, list[Delivery]] = defaultdict(list)
    for delivery in claimed:
        lanes[_lane(delivery)].append(delivery)
    futures = []
    for lane, deliveries in lanes.items():
        with _in_flight_lock:
            _in_flight.add(lane)
        futures.append(_pool.submit(_send_lane, lane, deliveries))
    wait(futures, timeout=wait_s)
    return len(claimed)


def _lane(delivery: Delivery) -> str:
    if delivery.channel == Delivery.Channel.EMAIL:
        return "email"
    return f"endpoint:{delivery.endpoint_id}"


def _lane_filter(delivery: Delivery) -> dict:
    if delivery.channel == Delivery.Channel.EMAIL:
        return {"channel": Delivery.Channel.EMAIL}
    return {"endpoint_id": delivery.endpoint_id}


def _claim(*, busy: set[str]) -> list[Delivery]:
    now = timezone.now()
    with transaction.atomic():
        due = (
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(state=Delivery.State.PENDING, next_attempt_at__lte=now)
            .select_related("event", "endpoint", "user")
            .order_by("next_attempt_at", "pk")
        )
        claimed = [d for d in due[:BATCH] if _lane(d) not in busy]
        lease = timedelta(seconds=settings.WEBHOOK_LEASE_SECONDS)
        Delivery.objects.filter(pk__in=[d.pk for d in claimed]).update(next_attempt_at=now + lease)
    return claimed


def _send_lane(lane: str, deliveries: list[Delivery]) -> None:
    """Send a lane's deliveries in order, recording them in batches (RECORD_EVERY, or every
    RECORD_SECONDS); after a failure the rest wait for the retry (the endpoint is down: no
    point sending them now). Runs in a pool thread."""
    sent: list[tuple[Delivery, Outcome]] = []
    flushed = time.monotonic()
    try:
        for index, delivery in enumerate(deliveries):
            outcome = _attempt(delivery)
            sent.append((delivery, outcome))
            if not outcome.is_delivered:
                _record(sent)
                later = timezone.now() + timedelta(seconds=FIRST_RETRY)
                rest = [d.pk for d in deliveries[index + 1 :]]
                Delivery.objects.filter(pk__in=rest).update(next_attempt_at=later)
                return
            if len(sent) >= RECORD_EVERY or time.monotonic() - flushed > RECORD_SECONDS:
                _record(sent)
                sent, flushed = [], time.monotonic()
        _record(sent)
        # The lane answers: more of it due now is sent by the next run, at once.
        due = Delivery.objects.filter(
            state=Delivery.State.PENDING,
            next_attempt_at__lte=timezone.now(),
            **_lane_filter(deliveries[0]),
        )
        if due.exists():
            stage_schedule(DELIVER)
    except Exception:
        log.exception("deliveries of %s failed", lane)
    finally:
        with _in_flight_lock:
            _in_flight.discard(lane)
        connections.close_all()  # this thread's: a pool thread may idle for long


def _attempt(delivery: Delivery) -> Outcome:
    at = timezone.now()
    if delivery.channel == Delivery.Channel.EMAIL:
        return replace(_email(delivery), at=at)
    endpoint = WebhookEndpoint.objects.filter(pk=delivery.endpoint_id).first()
    if endpoint is None or not endpoint.enabled:
        return Outcome(None, 0, error=DISABLED, at=at)
    return replace(_post(endpoint, delivery.event), at=at)


def _post(endpoint: WebhookEndpoint, event: Event) -> Outcome:
    """POST the event once, following no redirect; the answer's status and first KiB."""
    body = event_body(event)
    at = timezone.now()
    headers = signed_headers(endpoint=endpoint, event=event, body=body, at=at)
    parts = urlsplit(endpoint.url)
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    started = time.monotonic()
    connection = connection_class(
        parts.hostname, parts.port, timeout=settings.WEBHOOK_TIMEOUT_SECONDS
    )
    try:
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        excerpt = response.read(EXCERPT).decode("utf-8", "replace")
        return Outcome(response.status, _ms(started), response=excerpt)
    except TimeoutError:
        return Outcome(None, _ms(started), error="no answer within the timeout")
    except OSError as error:
        return Outcome(None, _ms(started), error=f"could not connect: {error}"[:300])
    except http.client.HTTPException as error:
        return Outcome(None, _ms(started), error=f"bad answer: {error!r}"[:300])
    finally:
        connection.close()


def _email(delivery: Delivery) -> Outcome:
    event, user = delivery.event, delivery.user
    link = settings.PORTAL_URL.rstrip("/") + event.link if event.link else settings.PORTAL_URL
    scope = event.tenant.name if event.tenant_id else settings.FACTORY_NAME
    subject = f"[{event.get_level_display()}] {scope}: {event.summary}"
    body = render_to_string(
        "portal/notify/email.txt",
        {
            "event": event,
            "user": user,
            "link": link,
            "scope": scope,
            "settings_link": settings.PORTAL_URL.rstrip("/") + "/notifications/",
        },
    )
    started = time.monotonic()
    try:
        EmailMessage(subject=subject[:200], body=body, to=[user.email]).send()
    except Exception as error:
        return Outcome(None, _ms(started), error=f"mail server: {error!r}"[:300])
    return Outcome(250, _ms(started), response="accepted by the mail server")


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _record(sent: list[tuple[Delivery, Outcome]]) -> None:
    """Log each attempt and move each delivery on, in one transaction: delivered, failed
    for good (410 disables its endpoint; attempts exhausted), or due again after the wait."""
    if not sent:
        return
    now = timezone.now()
    with transaction.atomic():
        DeliveryAttempt.objects.bulk_create(
            DeliveryAttempt(
                delivery=delivery,
                at=outcome.at or now,
                status_code=outcome.status_code,
                latency_ms=outcome.latency_ms,
                response=outcome.response[:EXCERPT],
                error=outcome.error,
            )
            for delivery, outcome in sent
        )
        delivered = [d.pk for d, outcome in sent if outcome.is_delivered]
        Delivery.objects.filter(pk__in=delivered).update(
            state=Delivery.State.DELIVERED,
            delivered_at=now,
            next_attempt_at=None,
            attempts=F("attempts") + 1,
        )
        for delivery, outcome in sent:
            if not outcome.is_delivered:
                _record_failure(delivery, outcome, now=now)


def _record_failure(delivery: Delivery, outcome: Outcome, *, now: datetime) -> None:
    attempts = delivery.attempts + 1
    fields: dict = {"attempts": attempts}
    if outcome.status_code == 410:
        endpoint_disable(endpoint=delivery.endpoint, reason="it answered 410 Gone")
        fields |= {"state": Delivery.State.FAILED, "next_attempt_at": None}
    elif outcome.error == DISABLED or attempts >= MAX_ATTEMPTS:
        fields |= {"state": Delivery.State.FAILED, "next_attempt_at": None}
    else:
        fields["next_attempt_at"] = now + retry_delay(attempts)
    Delivery.objects.filter(pk=delivery.pk).update(**fields)


@transaction.atomic
def delivery_replay(*, delivery: Delivery, by, at: datetime | None = None) -> Delivery:
    """Send again, with the same webhook-id, as soon as the job runs (retries anew); by a
    user who may hold its endpoint."""
    endpoint = delivery.endpoint
    if endpoint is not None:
        endpoint_access_check(user=by, tenant=endpoint.tenant, event_types=endpoint.event_types)
    Delivery.objects.filter(pk=delivery.pk).update(
        state=Delivery.State.PENDING, attempts=0, next_attempt_at=at or timezone.now()
    )
    stage_schedule(DELIVER)
    delivery.refresh_from_db()
    return delivery
