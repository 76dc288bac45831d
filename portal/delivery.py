"""The `deliver` job: send the due deliveries of raised events (portal.events) to webhook
endpoints and email recipients, on the real clock, each attempt logged.

A run claims the due deliveries (a lease of WEBHOOK_LEASE_SECONDS, above the timeout: a
worker killed while sending leaves them due again, and the retry carries the same
webhook-id) and sends each lane's (an endpoint's, the mail server's) in a thread of its
own, over one connection kept open; a lane then claims its next due deliveries until none
is left. An endpoint that does not answer holds only its own thread, for at most the
timeout, and the run waits `RUN_WAIT` for the others before it returns, so a dead endpoint
never delays another's deliveries nor the next run. Outcomes: a 2xx is delivered;
a 410 disables the endpoint; anything else, or no answer within WEBHOOK_TIMEOUT_SECONDS, is
retried 30 s later, doubling, with jitter, `MAX_ATTEMPTS` times in all (about 3 days)."""

from __future__ import annotations

import http.client
import logging
import random
import socket
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import EmailMessage, get_connection
from django.db import connections, transaction
from django.db.models import F, QuerySet
from django.template.loader import render_to_string
from django.utils import timezone

from portal.models import Delivery, DeliveryAttempt, Event, WebhookEndpoint
from portal.pipeline import DELIVER, stage_schedule
from portal.webhooks import (
    DestinationRefused,
    destination_check,
    endpoint_access_check,
    endpoint_disable,
    event_body,
    signed_headers,
)

log = logging.getLogger(__name__)

FIRST_RETRY = 30  # seconds; doubles at each failure
MAX_ATTEMPTS = 14  # 30 s × (2^13 − 1) ≈ 2.8 days of retries
JITTER = 0.2  # ± share of each delay
RUN_WAIT = 2.0  # seconds a run waits for its sends before it returns
BATCH = 2000  # deliveries claimed per run
LANE_BATCH = 500  # deliveries a lane claims at a time once its first are sent
EXCERPT = 1024  # bytes of an answer kept
RECORD_EVERY, RECORD_SECONDS = 200, 1.0  # a lane records its attempts in batches this size
DISABLED = "the endpoint is disabled"

_pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="deliver")
EMAIL = "email"  # the mail server's lane (an endpoint's is its id)
_in_flight: set[int | str] = set()  # the lanes this process is sending to
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
    claimed. Lanes already being sent to by this process are left to the thread sending them."""
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


def _lane(delivery: Delivery) -> int | str:
    """A delivery's lane: its endpoint's id, or EMAIL (the mail server)."""
    if delivery.channel == Delivery.Channel.EMAIL:
        return EMAIL
    return delivery.endpoint_id


def _lane_filter(delivery: Delivery) -> dict:
    if delivery.channel == Delivery.Channel.EMAIL:
        return {"channel": Delivery.Channel.EMAIL}
    return {"endpoint_id": delivery.endpoint_id}


def _claim(*, busy: set[int | str] = frozenset(), limit: int = BATCH, **lane) -> list[Delivery]:
    """Lease up to `limit` due deliveries (of one lane, when `lane` filters), skipping those
    another run holds and those of the lanes in `busy`."""
    now = timezone.now()
    due = Delivery.objects.filter(state=Delivery.State.PENDING, next_attempt_at__lte=now, **lane)
    if EMAIL in busy:
        due = due.exclude(channel=Delivery.Channel.EMAIL)
    if endpoints := [key for key in busy if key != EMAIL]:
        due = due.exclude(endpoint_id__in=endpoints)
    with transaction.atomic():
        claimed = list(
            due.select_for_update(skip_locked=True, of=("self",))
            .select_related("event", "endpoint", "user")
            .order_by("next_attempt_at", "pk")[:limit]
        )
        lease = timedelta(seconds=settings.WEBHOOK_LEASE_SECONDS)
        Delivery.objects.filter(pk__in=[d.pk for d in claimed]).update(next_attempt_at=now + lease)
    return claimed


def _send_lane(lane: int | str, deliveries: list[Delivery]) -> None:
    """Send a lane's deliveries in order over one connection (kept open between requests),
    then claim the lane's next due ones, until none is due or an attempt fails: the rest
    then wait for the retry (the endpoint is down: no point sending them now). Runs in a
    pool thread."""
    first = deliveries[0]
    sender = _Mail() if first.channel == Delivery.Channel.EMAIL else _Webhooks(first.endpoint)
    drained = False
    try:
        while deliveries and _send_all(sender, deliveries):
            deliveries = _claim(limit=LANE_BATCH, **_lane_filter(first))
        drained = not deliveries
    except Exception:
        log.exception("deliveries of lane %s failed", lane)
    finally:
        sender.close()
        with _in_flight_lock:
            _in_flight.discard(lane)
        try:
            # Due while this lane was still in flight (a run skipped it): ask for a run.
            if drained and _due(**_lane_filter(first)).exists():
                stage_schedule(DELIVER)
        finally:
            connections.close_all()  # this thread's: a pool thread may idle for long


def _due(**lane) -> QuerySet[Delivery]:
    return Delivery.objects.filter(
        state=Delivery.State.PENDING, next_attempt_at__lte=timezone.now(), **lane
    )


def _send_all(sender: _Webhooks | _Mail, deliveries: list[Delivery]) -> bool:
    """Send `deliveries` in order, recording them in batches (RECORD_EVERY, or every
    RECORD_SECONDS); the lease of the rest is renewed when half of it has passed (a slow
    endpoint). False after a failure, the rest then due at the first retry."""
    lease = timedelta(seconds=settings.WEBHOOK_LEASE_SECONDS)
    renew_at = timezone.now() + lease / 2
    sent: list[tuple[Delivery, Outcome]] = []
    flushed = time.monotonic()
    for index, delivery in enumerate(deliveries):
        outcome = sender.send(delivery)
        sent.append((delivery, outcome))
        if not outcome.is_delivered:
            later = timezone.now() + timedelta(seconds=FIRST_RETRY)
            _record(sent, rest=_pks(deliveries[index + 1 :]), rest_due=later)
            return False
        if len(sent) >= RECORD_EVERY or time.monotonic() - flushed > RECORD_SECONDS:
            now = timezone.now()
            if now < renew_at:
                _record(sent)
            else:
                _record(sent, rest=_pks(deliveries[index + 1 :]), rest_due=now + lease)
                renew_at = now + lease / 2
            sent, flushed = [], time.monotonic()
            sender.refresh()  # a rotation or a disabling, seen within a batch
    _record(sent)
    return True


def _pks(deliveries: list[Delivery]) -> list[int]:
    return [d.pk for d in deliveries]


class _Webhooks:
    """Posts to one endpoint over one HTTP connection, kept open while the endpoint keeps
    it open, following no redirect."""

    def __init__(self, endpoint: WebhookEndpoint) -> None:
        self.endpoint: WebhookEndpoint | None = endpoint
        self.http: http.client.HTTPConnection | None = None

    def refresh(self) -> None:
        if self.endpoint is not None:
            self.endpoint = WebhookEndpoint.objects.filter(pk=self.endpoint.pk).first()

    def send(self, delivery: Delivery) -> Outcome:
        at = timezone.now()
        endpoint = self.endpoint
        if endpoint is None or not endpoint.enabled:
            return Outcome(None, 0, error=DISABLED, at=at)
        body = event_body(delivery.event)
        headers = signed_headers(endpoint=endpoint, event=delivery.event, body=body, at=at)
        return replace(self._post(endpoint.url, body, headers), at=at)

    def _post(self, url: str, body: bytes, headers: dict) -> Outcome:
        """POST once: the answer's status and first KiB. A connection the endpoint closed
        while idle (it had no answer to give) is opened again and the request sent anew."""
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for reused in (self.http is not None, False):
            if self.http is None:
                https = parts.scheme == "https"
                opener = http.client.HTTPSConnection if https else http.client.HTTPConnection
                self.http = opener(
                    parts.hostname, parts.port, timeout=settings.WEBHOOK_TIMEOUT_SECONDS
                )
                self.http._create_connection = _checked_connection  # type: ignore[attr-defined]
            started = time.monotonic()
            try:
                self.http.request("POST", target, body=body, headers=headers)
                response = self.http.getresponse()
                excerpt = response.read(EXCERPT).decode("utf-8", "replace")
                if not response.isclosed():  # more than we keep: not reusable
                    self.close()
                return Outcome(response.status, _ms(started), response=excerpt)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as error:
                self.close()
                if not reused:
                    return Outcome(None, _ms(started), error=f"connection lost: {error}"[:300])
            except TimeoutError:
                self.close()
                return Outcome(None, _ms(started), error="no answer within the timeout")
            except DestinationRefused as error:
                self.close()
                return Outcome(None, 0, error=f"refused: {error.message}"[:300])
            except OSError as error:
                self.close()
                return Outcome(None, _ms(started), error=f"could not connect: {error}"[:300])
            except http.client.HTTPException as error:
                self.close()
                return Outcome(None, _ms(started), error=f"bad answer: {error!r}"[:300])
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None


def email_of(event: Event, *, user: User) -> tuple[str, str]:
    """The subject and plain-text body of the email telling `user` of `event`."""
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
    return subject, body


class _Mail:
    """Sends through Django's email backend over one connection to the mail server."""

    def __init__(self) -> None:
        self.connection = get_connection()

    def refresh(self) -> None:
        pass

    def send(self, delivery: Delivery) -> Outcome:
        at = timezone.now()
        subject, body = email_of(delivery.event, user=delivery.user)
        user = delivery.user
        started = time.monotonic()
        try:
            self.connection.open()
            message = EmailMessage(subject=subject[:200], body=body, to=[user.email])
            message.connection = self.connection
            message.send()
        except Exception as error:
            self.close()
            return Outcome(None, _ms(started), error=f"mail server: {error!r}"[:300], at=at)
        return Outcome(250, _ms(started), response="accepted by the mail server", at=at)

    def close(self) -> None:
        try:
            self.connection.close()
        except Exception:
            log.warning("closing the mail connection failed", exc_info=True)


def _checked_connection(address, timeout, source_address=None) -> socket.socket:
    """Connect to the addresses the host resolves to now, once they are checked again
    (DNS rebinding: a name that resolved to a public address when the endpoint was saved
    may not resolve to an inside one now); raises DestinationRefused, no connection made."""
    host, port = address
    error: OSError = OSError(f"{host} does not resolve")
    for ip in destination_check(host, port):
        try:
            return socket.create_connection((ip, port), timeout, source_address)
        except OSError as failed:
            error = failed
    raise error


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _record(
    sent: list[tuple[Delivery, Outcome]],
    *,
    rest: list[int] = (),
    rest_due: datetime | None = None,
) -> None:
    """Log each attempt and move each delivery on, in one transaction: delivered, failed
    for good (410 disables its endpoint; attempts exhausted), or due again after the wait;
    the lane's `rest` (claimed, not yet sent) due at `rest_due`."""
    if not sent and not rest:
        return
    now = timezone.now()
    with transaction.atomic():
        if rest:
            Delivery.objects.filter(pk__in=rest).update(next_attempt_at=rest_due)
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
