"""A Celery worker killed with SIGKILL while it sends a webhook (the receiver has the
request and has not answered): after a restart the event is delivered, and the repeat
carries the same webhook-id (architecture.md "Alerts and notifications": a durable outbox,
a claim that lapses)."""

import os
import signal
import time
from pathlib import Path

import pytest
from django.db import transaction

from portal.events import event_raise
from portal.models import Delivery
from tests.conftest import broker_mode, celery_worker
from tests.portal.test_webhooks import _hanging

pytestmark = [pytest.mark.integration, pytest.mark.postgres_only]
LEASE = "3"  # seconds: a claim lapses this soon here (60 in production)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(child) for child in text]
    return found


def _wait(predicate, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_a_worker_killed_mid_delivery_delivers_after_restart_with_the_same_webhook_id(
    transactional_db, now, settings, users, tenant_a
):
    settings.WEBHOOK_ALLOW_LOOPBACK = True
    receiver = _hanging(hold=60)  # holds the first request; answers later ones at once
    env = {"WEBHOOK_ALLOW_LOOPBACK": "1", "WEBHOOK_LEASE_SECONDS": LEASE}
    try:
        from portal.webhooks import endpoint_create

        endpoint = endpoint_create(url=receiver.url, by=users["operator"])
        with celery_worker(now, "test-delivery-worker", env=env) as (app, process, _):
            with broker_mode(os.environ["TEST_BROKER_URL"]), transaction.atomic():
                event = event_raise(
                    type="invoice.issued",
                    summary="Invoice INV-2026-000001 issued: 1.00 USD",
                    data={"number": "INV-2026-000001"},
                    tenant=tenant_a,
                )
            _wait(lambda: receiver.arrived, timeout=60, what="the first request")
            for pid in [*_children(process.pid), process.pid]:
                os.kill(pid, signal.SIGKILL)  # the pool child holds the request
            process.wait(timeout=20)
        delivery = Delivery.objects.get(endpoint=endpoint)
        assert (delivery.state, delivery.attempts) == ("pending", 0)  # claimed, never recorded
        receiver.hold = 0  # up again: answers at once

        with celery_worker(now, "test-delivery-worker", env=env) as (app, _, _):
            time.sleep(float(LEASE))  # the dead worker's claim lapses
            app.send_task("portal.deliver").get(timeout=60)
            delivery.refresh_from_db()

        assert (delivery.state, delivery.attempts) == ("delivered", 1)
        assert receiver.arrived == [event.webhook_id, event.webhook_id]
        assert len(receiver.requests) == 1  # answered: the repeat (the first never was)
    finally:
        receiver.close()
