"""Base-app tasks."""

from celery import shared_task

from portal.alerts import alerts_evaluate
from portal.delivery import deliveries_send
from portal.models import Tenant
from portal.pipeline import DELIVER, stage_begin


@shared_task(name="portal.ping", acks_late=True, reject_on_worker_lost=True, time_limit=30)
def ping_task() -> dict:
    """Health check for workers: answers with the tenant count it reads from the database."""
    return {"pong": True, "tenants": Tenant.objects.count()}


@shared_task(name=DELIVER, acks_late=True, reject_on_worker_lost=True, time_limit=120)
def deliver_task() -> dict:
    """Send the due webhook and email deliveries (portal.delivery)."""
    stage_begin(DELIVER)
    return {"claimed": deliveries_send()}


@shared_task(name="portal.alerts", acks_late=True, time_limit=120, expires=120)
def alerts_task() -> dict:
    """Evaluate every enabled alert rule; fire and resolve alerts (portal.alerts)."""
    return alerts_evaluate()
