"""Base-app tasks."""

from celery import shared_task

from portal.models import Tenant


@shared_task(name="portal.ping", acks_late=True, reject_on_worker_lost=True, time_limit=30)
def ping_task() -> dict:
    """Health check for workers: answers with the tenant count it reads from the database."""
    return {"pong": True, "tenants": Tenant.objects.count()}
