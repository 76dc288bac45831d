"""Budgets (kpis.md section 3c): a tenant's `budget` rule through the API, its read for
gateways (spent, projected and state by hand), `unknown` while rated usage lags the fold,
and the thresholds firing once a month through the `alerts` job as events.

The world: now is 16 December 2026 10:00 UTC; tenant-a used 10 M input and 10 M output
tokens on 3 December at 0.88 per million, 10% off: spent 15.84 USD. The month is 744 h, of
which 370 h have elapsed: projected = 15.84 × 744 / 370 = 31.8512… → 31.85."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from billing.selectors.budget import budget_days, budget_get
from billing.services.rating import rated_usage_update
from metering.services.usage.rollup import usage_fold
from portal import clock
from portal.alerts import alerts_evaluate
from portal.models import Alert, AlertRule, AuditEntry, Event, Tenant
from tests.billing.factories import MARCH_USAGE, M, make_contract, make_priced_model, post_usage

pytestmark = pytest.mark.both_backends


@pytest.fixture
def spent(admin_api, tenant_a, now):
    make_priced_model()
    make_contract(tenant_a, discount_pct=Decimal(10))
    post_usage(admin_api, [{"id": "d1", **MARCH_USAGE, "time": "2026-12-03T00:00:00Z"}])


@pytest.fixture
def member(users, token_client):
    return token_client(users["tenant"], scopes=["read", "notify"])


def _rule(client, **body):
    response = client.post("/api/v1/alert-rules", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _budget(client, slug="tenant-a"):
    response = client.get(f"/api/v1/tenants/{slug}/budget")
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_members_money_budget_reads_spent_projected_and_state_by_hand(spent, member):
    rule = _rule(member, kind="budget", params={"amount": "19.00"})

    assert (rule["tenant"], rule["params"]) == (
        "tenant-a",
        {"amount": "19.00", "thresholds": [50, 80, 100], "period": "month", "enforce": "soft"},
    )
    whole = {
        "state": "warning",  # 15.84 / 19.00 = 83.4 %: past 80, below 100
        "unit": "USD",
        "month": "2026-12",
        "period": "month",
        "period_start": "2026-12-01T00:00:00Z",
        "project": None,
        "enforce": "soft",
        "blocked": False,
        "budget": "19.00",
        "spent": "15.84",
        "remaining": "3.16",
        "projected": "31.85",
        "as_of": "2026-12-16T10:00:00Z",
        "thresholds": [50, 80, 100],
        "reached": [50, 80],
    }
    assert _budget(member) == {**whole, "blocked_by": None, "budgets": [whole]}
    assert AuditEntry.objects.filter(object_type="alert_rule", action="create").count() == 1
    # Its burn on the home page: spent by the end of 3 December, all of it.
    budget = budget_get(tenant=Tenant.objects.get(slug="tenant-a"))
    assert budget_days(budget) == [(datetime(2026, 12, 3, tzinfo=UTC), Decimal("15.84"))]


def test_a_token_budget_counts_input_and_output_tokens(spent, member):
    _rule(member, kind="budget", params={"tokens": 50 * M, "thresholds": [25, 90]})

    budget = _budget(member)

    # 20 M of 50 M: 40 %, past 25; projected 20 M × 744 / 370 = 40,216,216.2 → 40,216,216.
    assert (budget["state"], budget["unit"], budget["spent"], budget["projected"]) == (
        "ok",
        "tokens",
        20 * M,
        40_216_216,
    )
    assert (budget["remaining"], budget["reached"]) == (30 * M, [25])


def test_no_rule_reads_none_and_a_lagging_rating_reads_unknown(spent, member, now):
    assert _budget(member)["state"] == "none"
    _rule(member, kind="budget", params={"amount": "100.00"})
    assert _budget(member)["state"] == "ok"

    clock.clock_set(now + timedelta(minutes=16))
    usage_fold()  # metered until 10:16; rated until 10:00: 16 minutes behind
    lagging = _budget(member)
    assert (lagging["state"], lagging["spent"], lagging["as_of"]) == ("unknown", None, None)

    rated_usage_update()
    assert _budget(member)["state"] == "ok"


def test_with_no_worker_running_accepted_events_turn_the_budget_unknown(
    spent, member, admin_api, now
):
    """No stage runs in this test unless it calls one: events accepted meanwhile wait for a
    fold that never comes, as they do while the worker is stopped."""
    _rule(member, kind="budget", params={"amount": "100.00"})
    assert _budget(member)["state"] == "ok"  # rated until 10:00, nothing waiting

    def accept(event_id: str) -> None:
        event = {
            "id": event_id,
            "tenant": "tenant-a",
            "model": "llama-70b",
            "time": "2026-12-16T09:00:00Z",
            "input_tokens": M,
            "output_tokens": 0,
        }
        assert admin_api.post("/api/v1/usage/events", [event]).status_code == 200  # fmt: skip

    clock.clock_set(now + timedelta(minutes=1))
    accept("w1")  # accepted at 10:01, never folded
    assert _budget(member)["state"] == "ok"  # one minute behind: current enough
    clock.clock_set(now + timedelta(minutes=16, seconds=1))
    stale = _budget(member)  # 10:16:01: the 10:01 event has waited past 15 minutes
    assert (stale["state"], stale["spent"], stale["as_of"]) == ("unknown", None, None)

    # Under continuous ingestion too: rated until 10:00, an event accepted at 10:15:01.
    usage_fold()
    rated_usage_update()  # rated until 10:16:01
    clock.clock_set(now + timedelta(minutes=31, seconds=2))
    accept("w2")
    assert _budget(member)["state"] == "unknown"  # 15 min 1 s behind the newest accepted
    usage_fold()
    assert _budget(member)["state"] == "unknown"  # folded, not rated: behind the fold
    rated_usage_update()
    assert _budget(member)["state"] == "ok"


def test_thresholds_fire_once_a_month_as_events_and_resolve_with_the_month(
    spent, member, admin_api, now
):
    _rule(member, kind="budget", params={"amount": "19.00"})

    assert alerts_evaluate(now=now) == {"rules": 1, "fired": 2, "resolved": 0}
    assert alerts_evaluate(now=now) == {"rules": 1, "fired": 0, "resolved": 0}  # once
    reached = Event.objects.filter(type="budget.threshold_reached").order_by("pk")
    assert [e.data["threshold"] for e in reached] == ["50", "80"]
    event = reached[1]
    assert (event.tenant.slug, event.for_factory) == ("tenant-a", True)
    assert event.summary == (
        "Tenant A reached 80% of its December 2026 budget: 15.84 of 19.00 USD spent, "
        "31.85 projected"
    )
    assert event.data["figures"] == {
        "budget": "19.00",
        "spent": "15.84",
        "projected": "31.85",
        "as_of": "2026-12-16T10:00:00Z",
    }
    firing = member.get("/api/v1/alerts?state=firing").json()["results"]
    assert [(a["kind"], a["threshold"], a["value"], a["scope"]) for a in firing] == [
        ("budget", "80", "83.4%", {"tenant": "tenant-a"}),
        ("budget", "50", "83.4%", {"tenant": "tenant-a"}),
    ]
    refused = member.get("/api/v1/alerts?state=on")
    assert (refused.status_code, refused.json()["errors"][0]["field"]) == (400, "state")

    # 5 M more output at 0.88 less 10 %: 3.96; 19.80 of 19.00 crosses 100 % only.
    usage = {"time": "2026-12-15T00:00:00Z", "input_tokens": 0, "output_tokens": 5 * M}
    post_usage(admin_api, [{"id": "d2", **usage}])
    assert alerts_evaluate(now=now) == {"rules": 1, "fired": 1, "resolved": 0}
    assert _budget(member)["state"] == "exceeded"

    january = now.replace(year=2027, month=1, day=2)
    clock.clock_set(january)
    usage_fold()
    rated_usage_update()
    assert alerts_evaluate(now=january) == {"rules": 1, "fired": 0, "resolved": 3}
    assert Alert.objects.filter(state="resolved").count() == 3
    assert Event.objects.filter(type="alert.resolved").count() == 3


def test_who_may_hold_a_budget_and_what_it_takes(users, token_client, member, finance, tenant_b):
    investor = APIClient()
    investor.force_login(users["investor"])
    operator = token_client(users["operator"], scopes=["read", "notify"])
    cases = [
        (member, {"tenant": "tenant-b", "params": {"amount": "5.00"}}, 403, "tenant"),
        (investor, {"tenant": "tenant-a", "params": {"amount": "5.00"}}, 403, ""),
        (operator, {"params": {"amount": "5.00"}}, 400, "tenant"),
        (member, {"params": {"amount": "5.001"}}, 400, "params.amount"),
        (member, {"params": {"amount": "5.00", "tokens": 5}}, 400, "params.amount"),
        (member, {"params": {"tokens": 0}}, 400, "params.tokens"),
        (member, {"params": {"amount": "5", "thresholds": [0]}}, 400, "params.thresholds"),
        (member, {"params": {"amount": "5", "every": 1}}, 400, "params.every"),
        (member, {"params": {"amount": "5"}, "scope": {"pool": "p"}}, 400, "scope.pool"),
        (member, {"kind": "nonsense", "params": {}}, 400, "kind"),
    ]
    for client, body, status, field in cases:
        response = client.post("/api/v1/alert-rules", {"kind": "budget", **body}, format="json")
        assert response.status_code == status, (body, response.json())
        if field:
            assert response.json()["errors"][0]["field"] == field, (body, response.json())

    _rule(finance, kind="budget", tenant="tenant-b", params={"amount": "5.00"})
    second = finance.post(
        "/api/v1/alert-rules",
        {"kind": "budget", "tenant": "tenant-b", "params": {"amount": "9.00"}},
        format="json",
    )
    assert (second.status_code, second.json()["errors"][0]["field"]) == (409, "tenant")
    assert member.get("/api/v1/tenants/tenant-b/budget").status_code == 404
    assert _budget(finance, "tenant-b")["budget"] == "5.00"
    assert member.get("/api/v1/alert-rules").json()["count"] == 0  # tenant-b's is not its own
    assert AlertRule.objects.count() == 1


def test_a_member_sets_its_budget_on_its_home_and_reads_its_alerts(
    spent, users, session_client, now
):
    client = session_client(users["tenant"])
    home = client.get("/").content.decode()
    assert "No budget" in home and "Set budget" in home
    assert 'id="budget-chart"' not in home

    refused = client.post("/billing/budget/", {"amount": "19.00", "thresholds": "50, eighty"})
    assert refused.status_code == 400
    assert "whole percents" in refused.content.decode()
    budget = {"amount": "19.00", "thresholds": "50, 80, 100"}
    assert client.post("/billing/budget/", budget).status_code == 302
    home = client.get("/").content.decode()
    for shown in ("15.84", "19.00 USD", "31.85", "3.16", "warning", "reached 50%, 80%"):
        assert shown in home, shown
    assert 'id="budget-chart"' in home  # its burn: spent by day, the budget, the projection

    alerts_evaluate(now=now)
    page = client.get("/alerts/").content.decode().replace("<wbr>", "")  # break points
    assert "Tenant A reached 80% of its December 2026 budget" in page
    assert "as of 2026-12-16 10:00 UTC" in page and "T10:00" not in page
    rule = AlertRule.objects.get()
    assert client.post(f"/alerts/rules/{rule.pk}/", {"action": "disable"}).status_code == 302
    rule.refresh_from_db()
    assert rule.enabled is False
    assert "No budget" in client.get("/").content.decode()  # a disabled budget watches nothing


def test_only_a_member_sets_a_budget_from_the_home_page(users, session_client):
    for role in ("operator", "finance", "investor"):
        client = session_client(users[role])
        response = client.post("/billing/budget/", {"amount": "5.00", "thresholds": "50"})
        assert response.status_code == 403, role
    assert not AlertRule.objects.exists()


def test_evaluating_budgets_reads_as_many_queries_for_30_tenants_as_for_3(spent, now):
    """The alerts job reads read models in a query count flat in tenants (and in events:
    the tenant-months' rated totals, never raw usage)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from portal.models import Tenant

    def evaluated(count: int) -> int:
        AlertRule.objects.all().delete()
        for n in range(count):
            tenant, _ = Tenant.objects.get_or_create(slug=f"t{n}", defaults={"name": f"T{n}"})
            params = {"amount": "5.00"} if n % 2 else {"tokens": 10 * M}
            params["thresholds"] = [50]
            AlertRule.objects.create(kind="budget", tenant=tenant, params=params)
        with CaptureQueriesContext(connection) as queries:
            alerts_evaluate(now=now)
        return len(queries)

    assert evaluated(3) == evaluated(30)


def test_a_rules_tenant_is_read_from_scope_as_the_contract_writes_it(users, token_client):
    operator = token_client(users["operator"], scopes=["read", "notify"])
    rule = _rule(operator, kind="budget", scope={"tenant": "tenant-a"}, params={"amount": "50.00"})
    assert (rule["tenant"], rule["scope"]) == ("tenant-a", {"tenant": "tenant-a"})
    assert operator.get(f"/api/v1/alert-rules/{rule['id']}").json()["scope"] == {
        "tenant": "tenant-a"
    }
    other = operator.post(
        "/api/v1/alert-rules",
        {"kind": "uptime_below_tier", "tenant": "tenant-a", "scope": {"tenant": "tenant-b"}},
        format="json",
    )
    assert other.status_code == 400
    assert other.json()["errors"][0]["field"] == "scope.tenant"
    # Beside it, as before: `tenant` alone still names it.
    beside = _rule(operator, kind="uptime_below_tier", tenant="tenant-a")
    assert (beside["tenant"], beside["scope"]) == ("tenant-a", {"tenant": "tenant-a"})
