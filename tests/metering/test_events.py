"""Metering's events: an incident opened, updated and resolved reaches the factory and each
tenant it touched (a tenant's payload names no other tenant); a refused usage batch reaches
the operators, once per source and path every 15 minutes."""

import json
from datetime import timedelta

import pytest

from metering.models import Pool
from metering.services.sla.incidents import incident_create, incident_update_add
from portal.events import inbox_list
from portal.models import Event
from tests.metering.factories import event, make_deployment, make_hourly_usage

pytestmark = pytest.mark.both_backends


@pytest.fixture
def served(db, now, tenant_a, tenant_b, make_user):
    """llama on h100-a used this month by tenant A only; qwen on h200-a by tenant B."""
    llama = make_deployment(model="llama-70b", pool="h100-a")
    qwen = make_deployment(model="qwen-32b", pool="h200-a")
    Pool.objects.update(in_service_from=now - timedelta(days=60))
    hour = now.replace(minute=0) - timedelta(hours=5)
    make_hourly_usage(tenant_a, llama, hour, requests=3, output_tokens=30)
    make_hourly_usage(tenant_b, qwen, hour, requests=5, output_tokens=50)
    return llama, qwen


def test_an_incident_reaches_the_factory_and_the_tenants_it_touched_only(
    served, users, tenant_a, now
):
    llama, _ = served
    incident = incident_create(
        title="Llama slow",
        severity="sev2",
        impact="degraded",
        started_at=now - timedelta(hours=1),
        deployments=[llama],
        message="Looking into it.",
        by=users["operator"],
    )
    incident_update_add(incident=incident, status="identified", message="A bad node", by=None)
    incident_update_add(incident=incident, status="resolved", message="Replaced", by=None)

    rows = list(Event.objects.order_by("pk").values_list("type", "tenant__slug", "level"))
    assert rows == [
        ("incident.opened", None, "warning"),
        ("incident.opened", "tenant-a", "warning"),
        ("incident.updated", None, "warning"),
        ("incident.updated", "tenant-a", "warning"),
        ("incident.resolved", None, "info"),
        ("incident.resolved", "tenant-a", "info"),
    ]
    factory, own = Event.objects.filter(type="incident.opened").order_by("pk")
    assert factory.data["tenants"] == ["tenant-a"] and "tenants" not in own.data
    assert own.data["deployments"] == ["llama-70b@h100-a"]
    assert own.data["message"] == "Looking into it." and own.for_factory is False
    assert factory.summary == "SEV2 incident opened: Llama slow"
    assert "tenant-b" not in json.dumps([e.data for e in Event.objects.filter(tenant=tenant_a)])
    assert [e.type for e in inbox_list(user=users["tenant"])] == [
        "incident.resolved",
        "incident.updated",
        "incident.opened",
    ]
    assert inbox_list(user=users["finance"]).count() == 0  # not a billing event


def test_a_refused_batch_is_one_event_per_source_and_path_every_15_minutes(
    users, token_client, served, now
):
    api = token_client(users["operator"], scopes=["ingest"])
    bad = [event(1, input_tokens=-1, source="gw-eu")]

    for _ in range(3):
        response = api.post("/api/v1/usage/events", bad, format="json")
        assert response.status_code == 400

    [raised] = Event.objects.filter(type="usage.batch_rejected")
    assert (raised.tenant, raised.for_factory, raised.level) == (None, True, "warning")
    assert raised.summary == "Usage ingestion: a batch of 1 refused (gw-eu)"
    assert raised.data["errors"] == [
        {"index": 0, "field": "input_tokens", "message": "must be a non-negative integer"}
    ]
    assert raised.link == "/metering/"
