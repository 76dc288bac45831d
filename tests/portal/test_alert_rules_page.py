"""The alerts page's new-rule form: each role is offered the kinds it may hold, the chosen
kind's scope and params become the rule (audited, as through the API), and a bad value
re-shows the form naming its field, creating nothing."""

import pytest

from portal.models import AlertRule, AuditEntry
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends


def _offered(body: str) -> list[str]:
    return [k for k in ("budget", "gpu_waste", "kpi_below_band", "reconciliation_drift",
                        "reservation_overage", "reservation_underused", "scrape_down",
                        "slo_burn", "source_silent", "uptime_below_tier")
            if f'<option value="{k}" data-tenant' in body]  # fmt: skip


def test_each_role_is_offered_the_kinds_it_may_hold(users, session_client):
    offered = {
        role: _offered(session_client(users[role]).get("/alerts/").content.decode())
        for role in ("operator", "finance", "tenant")
    }
    assert offered == {
        "operator": ["budget", "gpu_waste", "kpi_below_band", "reconciliation_drift",
                     "reservation_overage", "reservation_underused", "scrape_down", "slo_burn",
                     "source_silent", "uptime_below_tier"],
        "finance": ["budget", "reservation_overage", "reservation_underused",
                    "uptime_below_tier"],
        "tenant": ["budget", "reservation_overage", "reservation_underused", "slo_burn",
                   "uptime_below_tier"],
    }  # fmt: skip


def test_an_operator_adds_a_pool_rule_with_its_params(users, session_client):
    make_deployment(model="m1", pool="h100-a")
    client = session_client(users["operator"])
    body = client.get("/alerts/").content.decode()
    assert '<option value="h100-a">h100-a (h100-a)</option>' in body

    response = client.post(
        "/alerts/rules/",
        {"kind": "gpu_waste", "tenant": "tenant-a", "level": "critical",
         "gpu_waste:scope": "h100-a", "gpu_waste:params.window_hours": "6",
         "gpu_waste:params.threshold_pct": "12.5",
         # another kind's fields are not this rule's
         "slo_burn:params.min_requests": "5"},
    )  # fmt: skip

    assert response.status_code == 302
    rule = AlertRule.objects.get()
    assert (rule.kind, rule.tenant, rule.scope, rule.params, rule.level) == (
        "gpu_waste",
        None,  # a factory kind names no tenant: the form's tenant is not sent for it
        {"pool": "h100-a"},
        {"window_hours": 6, "threshold_pct": "12.5"},
        "critical",
    )
    assert AuditEntry.objects.filter(object_type="alert_rule", action="create").count() == 1


def test_a_member_adds_a_burn_rule_on_its_own_tenant(users, session_client):
    make_deployment(model="m1")
    client = session_client(users["tenant"])

    client.post(
        "/alerts/rules/",
        {"kind": "slo_burn", "tenant": "tenant-b", "slo_burn:scope": "m1@h100-a",
         "slo_burn:params.target": "0.995"},
    )  # fmt: skip

    rule = AlertRule.objects.get()
    assert (rule.tenant.slug, rule.scope, rule.params) == (
        "tenant-a",
        {"deployment": "m1@h100-a"},
        {"target": "0.995", "min_requests": 100},
    )


def test_a_bad_value_names_its_field_and_creates_nothing(users, session_client):
    client = session_client(users["operator"])
    cases = [
        ({"kind": "scrape_down", "scrape_down:params.failures": "four"}, "params.failures",
         "a whole number"),
        ({"kind": "kpi_below_band", "kpi_below_band:params.kpi": "tef"}, "params.threshold", ""),
        ({"kind": "budget"}, "tenant", "name it"),
        ({"kind": "nope"}, "kind", "choose a kind"),
    ]  # fmt: skip
    for data, field, message in cases:
        response = client.post("/alerts/rules/", data)
        body = response.content.decode()
        assert response.status_code == 400, data
        assert f"<code>{field}</code>: " in body and message in body, data
    finance = session_client(users["finance"])
    refused = finance.post("/alerts/rules/", {"kind": "gpu_waste"})
    assert (
        refused.status_code == 400
        and "choose a kind of rule you may hold" in refused.content.decode()
    )
    assert not AlertRule.objects.exists()


def test_finance_sees_the_rules_it_may_not_change_read_only(users, session_client):
    make_deployment(model="m1")
    operator = session_client(users["operator"])
    operator.post("/alerts/rules/", {"kind": "scrape_down"})
    operator.post(
        "/alerts/rules/", {"kind": "budget", "tenant": "tenant-a", "budget:params.amount": "10"}
    )
    scrape, budget = AlertRule.objects.order_by("kind")[1], AlertRule.objects.order_by("kind")[0]

    page = session_client(users["finance"]).get("/alerts/").content.decode()

    assert f'action="/alerts/rules/{budget.pk}/"' in page
    assert f'action="/alerts/rules/{scrape.pk}/"' not in page and "read only" in page
