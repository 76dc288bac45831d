"""The `uptime_below_tier` alert (kpis.md 3c): a tenant's month-to-date uptime (3b) below
its contract's highest credit threshold, once a month.

Now is 16 December 2026 10:00 UTC: December so far is 370 h = 1,332,000 s. Both tenants'
contracts have the default tiers, the highest 0.999. Tenant A used m1, which was down (major
outage) for 30 minutes: uptime 1 − 1,800 / 1,332,000 = 0.99864864… < 0.999, it fires. Tenant
B used m2, down 10 minutes: 1 − 600 / 1,332,000 = 0.99954954… ≥ 0.999, quiet."""

from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from metering.models import Deployment
from metering.services.sla.incidents import incident_create
from portal.alerts import alerts_evaluate
from portal.events import inbox_list
from portal.models import Alert, Event
from tests.billing.factories import make_contract, make_priced_model, post_usage

pytestmark = pytest.mark.both_backends
NOW = datetime(2026, 12, 16, 10, tzinfo=UTC)


def _outage(deployment: str, seconds: int) -> None:
    start = datetime(2026, 12, 10, 12, tzinfo=UTC)
    incident_create(
        title=f"{deployment} down",
        severity="sev1",
        impact="major_outage",
        started_at=start,
        resolved_at=start + timedelta(seconds=seconds),
        deployments=[Deployment.objects.get(slug=deployment)],
        by=None,
    )


@pytest.fixture
def december(admin_api, tenant_a, tenant_b, now):
    make_priced_model(model="m1")
    make_priced_model(model="m2")
    for tenant, model in ((tenant_a, "m1"), (tenant_b, "m2")):
        make_contract(tenant)
        usage = {
            "id": f"{model}-1",
            "time": "2026-12-03T00:00:00Z",
            "input_tokens": 10,
            "output_tokens": 5,
        }
        post_usage(admin_api, [usage], tenant=tenant.slug, model=model)
    _outage("m1@h100-a", 1800)
    _outage("m2@h100-a", 600)


def _rule(client, status=201, **body):
    response = client.post(
        "/api/v1/alert-rules", {"kind": "uptime_below_tier", **body}, format="json"
    )
    assert response.status_code == status, response.json()
    return response.json()


def test_uptime_below_the_tier_fires_once_a_month(december, finance, users):
    _rule(finance, tenant="tenant-a")
    _rule(finance, tenant="tenant-b")

    assert alerts_evaluate(now=NOW) == {"rules": 2, "fired": 1, "resolved": 0}
    assert alerts_evaluate(now=NOW)["fired"] == 0  # firing twice sends once

    alert = Alert.objects.get()
    assert (alert.rule.tenant.slug, alert.threshold, alert.value) == (
        "tenant-a",
        "0.999",
        "99.865%",
    )
    assert alert.window_start == datetime(2026, 12, 1, tzinfo=UTC)
    assert alert.figures["uptime"] == "0.9986486486"
    assert alert.figures["downtime_seconds"] == "1800"
    assert alert.summary == (
        "Tenant A's December 2026 uptime so far, 99.865%, is below its 99.900% tier"
    )
    [event] = Event.objects.filter(type="alert.fired")
    assert event.tenant.slug == "tenant-a"
    # Finance holds these rules: their alerts reach its inbox (a burn alert would not).
    assert list(inbox_list(user=users["finance"])) == [event]


def test_members_hold_their_own_finance_any_tenants_and_params_are_refused(
    december, users, token_client, finance
):
    member = token_client(users["tenant"], scopes=["read", "notify"])
    assert _rule(member)["tenant"] == "tenant-a"
    _rule(member, status=403, tenant="tenant-b")
    _rule(finance, tenant="tenant-b")
    errors = _rule(finance, status=400, tenant="tenant-b", params={"below": 0.99})["errors"]
    assert [e["field"] for e in errors] == ["params.below"]
    investor = APIClient()
    investor.force_login(users["investor"])
    refused = investor.post("/api/v1/alert-rules", {"kind": "uptime_below_tier"}, format="json")
    assert refused.status_code == 403
