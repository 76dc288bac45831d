"""Closed months (kpis.md, General rules): once the invoice run has issued a month's invoices,
no price, contract, promotion or deployment version may take effect inside it; late usage
for it is still accepted and billed as an adjustment."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.models import Contract, Invoice, Price, PromotionalCredit
from billing.selectors.rating.inputs import tenant_month_rate
from billing.services.close import close_run
from metering.models import DeploymentVersion, HourlyUsage, Incident, MaintenanceWindow, Pool
from portal.closing import month_closed_check
from portal.errors import FieldError
from portal.models import AuditEntry, ClosedMonth
from tests.billing.factories import (
    APRIL,
    MARCH,
    MARCH_USAGE,
    assert_refused,
    make_contract,
    make_march_invoice,
    make_priced_model,
    post_usage,
)

pytestmark = pytest.mark.both_backends
M = 1_000_000
IN_MARCH = "2026-03-16T00:00:00Z"  # inside the closed month
IN_APRIL = "2026-04-16T00:00:00Z"  # April is over but not invoiced: open

WRITES = {
    "price": (
        "/api/v1/prices",
        lambda at: {
            "model": "llama-70b",
            "token_class": "output",
            "per_million": "9.00",
            "currency": "USD",
            "effective_from": at,
        },
        Price,
    ),
    "contract": (
        "/api/v1/contracts",
        lambda at: {
            "tenant": "tenant-a",
            "kind": "paid",
            "discount_pct": "50",
            "effective_from": at,
        },
        Contract,
    ),
    "promotion": (
        "/api/v1/promotions",
        lambda at: {"tenant": "tenant-a", "amount": "5.00", "effective_from": at},
        PromotionalCredit,
    ),
    "deployment version": (
        "/api/v1/deployments/llama-70b@h100-a/versions",
        lambda at: {"effective_from": at, "r_ref": "2000", "w_in": "0.5", "slo_ttft_ms": 100},
        DeploymentVersion,
    ),
}


@pytest.fixture
def api(users, token_client):
    return token_client(users["operator"], scopes=["ingest", "read", "admin"])


@pytest.fixture
def march_closed(api, tenant_a):
    """March usage of tenant-a, invoiced by the run: March is closed."""
    return make_march_invoice(api, tenant_a, discount_pct=Decimal(10))


def _march_figures(tenant):
    rating = tenant_month_rate(tenant=tenant, month_start=MARCH)
    lines = [(line.kind, line.token_class, line.quantity, line.amount) for line in rating.lines]
    invoices = list(Invoice.objects.values_list("number", "status", "total"))
    return lines, invoices


def test_the_close_locks_its_month_once(march_closed):
    assert list(ClosedMonth.objects.values_list("month", flat=True)) == [MARCH]
    close_run(month_start=MARCH)  # a second run: still one record, one audit entry
    assert ClosedMonth.objects.count() == 1
    entry = AuditEntry.objects.get(action="month.close")
    assert (entry.object_type, entry.object_id) == ("closed_month", "2026-03")
    with pytest.raises(FieldError) as refused:
        month_closed_check(moment=datetime(2026, 3, 31, 23, tzinfo=UTC), field="time")
    assert refused.value.field == "time"
    month_closed_check(moment=APRIL, field="time")  # the next instant is in an open month


def test_a_close_that_could_not_rate_a_tenant_leaves_the_month_open(api, tenant_a):
    make_contract(tenant_a)
    make_priced_model(prices=("0.88", "0.44", "0.88"))
    Price.objects.filter(token_class="output").delete()  # nothing to rate output with
    post_usage(api, [{"id": "a1", **MARCH_USAGE}])

    run = close_run(month_start=MARCH)

    assert list(run.errors) == ["tenant-a"]
    assert ClosedMonth.objects.count() == 0  # a price may still be added to fix March


@pytest.mark.parametrize("kind", list(WRITES))
def test_version_inside_a_closed_month_is_refused_naming_effective_from(
    api, tenant_a, march_closed, kind
):
    path, body, model = WRITES[kind]
    before = (model.objects.count(), AuditEntry.objects.count(), _march_figures(tenant_a))

    response = api.post(path, body(IN_MARCH))

    assert_refused(
        response,
        400,
        "effective_from",
        "is before the end of the last closed month (2026-03): a version from then would be in "
        "force inside it; start it at 2026-04-01T00:00:00Z or later",
    )
    after = (model.objects.count(), AuditEntry.objects.count(), _march_figures(tenant_a))
    assert after == before


@pytest.mark.parametrize("kind", list(WRITES))
def test_version_inside_an_open_month_is_added(api, tenant_a, march_closed, kind):
    path, body, model = WRITES[kind]
    count = model.objects.count()

    response = api.post(path, body(IN_APRIL))

    assert response.status_code == 201, response.json()
    assert model.objects.count() == count + 1
    assert response.json()["effective_from"] == IN_APRIL


def test_late_usage_for_a_closed_month_is_still_accepted(api, tenant_a, march_closed):
    late = {"time": "2026-03-20T00:00:00Z", "input_tokens": M, "output_tokens": M}

    post_usage(api, [{"id": "late-1", **late}])

    assert HourlyUsage.objects.filter(hour__lt=APRIL).count() == 2
    assert Invoice.objects.get().total == march_closed.total  # billed on the next invoice


def test_maintenance_and_incidents_in_the_month_the_run_closed_are_refused(api, march_closed):
    window = {
        "title": "Driver upgrade",
        "starts_at": "2026-03-20T02:00:00Z",
        "ends_at": "2026-03-20T04:00:00Z",
        "announced_at": "2026-03-13T09:00:00Z",
    }
    incident = {
        "title": "Llama down",
        "severity": "sev1",
        "impact": "major_outage",
        "started_at": "2026-03-20T02:00:00Z",
        "resolved_at": "2026-03-20T04:00:00Z",
    }
    before = _march_figures(march_closed.tenant)

    refused = [
        api.post("/api/v1/maintenance", window),
        api.post("/api/v1/incidents", incident),
    ]

    assert [r.status_code for r in refused] == [400, 400]
    assert [e["field"] for r in refused for e in r.json()["errors"]] == ["starts_at", "started_at"]
    assert not MaintenanceWindow.objects.exists() and not Incident.objects.exists()
    assert _march_figures(march_closed.tenant) == before
    in_april = {"starts_at": "2026-04-20T02:00:00Z", "ends_at": "2026-04-20T04:00:00Z"}
    accepted = api.post("/api/v1/maintenance", {**window, **in_april})
    assert accepted.status_code == 201, accepted.json()


def _pools():
    return list(Pool.objects.values_list("slug", "gpu_count", "in_service_from", "retired_at"))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpu_count": 16}, "gpu_count"),  # its life overlaps March
        ({"in_service_from": "2026-02-01T00:00:00Z"}, "in_service_from"),  # earlier
        ({"in_service_from": "2026-04-02T00:00:00Z"}, "in_service_from"),  # out of March
        ({"retired_at": "2026-03-20T00:00:00Z"}, "retired_at"),
        ({"retired_at": "2026-04-01T00:00:00Z", "gpu_count": 4}, "gpu_count"),
    ],
)
def test_a_pool_change_reaching_into_a_closed_month_is_refused_naming_the_field(
    api, march_closed, change, field
):
    # The fold put h100-a in service at its first usage hour, 2026-03-03T00:00Z.
    before = (_pools(), AuditEntry.objects.count(), _march_figures(march_closed.tenant))

    response = api.patch("/api/v1/pools/h100-a", change)

    assert response.status_code == 400, response.json()
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert "2026-03 is closed" in response.json()["errors"][0]["message"]
    assert (_pools(), AuditEntry.objects.count(), _march_figures(march_closed.tenant)) == before


def test_a_pool_change_after_the_closed_month_is_accepted(api, march_closed):
    assert (
        api.patch("/api/v1/pools/h100-a", {"retired_at": "2026-04-01T00:00:00Z"}).json()[
            "retired_at"
        ]
        == "2026-04-01T00:00:00Z"
    )
    assert api.patch("/api/v1/pools/h100-a", {"retired_at": None}, format="json").status_code == 200
    assert api.patch("/api/v1/pools/h100-a", {"name": "Renamed"}).status_code == 200
    new = {"slug": "b200", "name": "B200", "gpu_type": "B200", "gpu_count": 8}
    refused = api.post("/api/v1/pools", {**new, "in_service_from": "2026-03-31T23:00:00Z"})
    assert [e["field"] for e in refused.json()["errors"]] == ["in_service_from"]
    created = api.post("/api/v1/pools", {**new, "in_service_from": "2026-04-01T00:00:00Z"})
    assert created.status_code == 201, created.json()
    assert api.patch("/api/v1/pools/b200", {"gpu_count": 16}).json()["gpu_count"] == 16


def test_a_referenced_slug_cannot_change(api, march_closed):
    renames = {
        "/api/v1/models/llama-70b": "deployments",
        "/api/v1/pools/h100-a": "deployments",
        "/api/v1/tenants/tenant-a": "memberships",
    }
    for path, holders in renames.items():
        response = api.patch(path, {"slug": "renamed"})
        assert response.status_code == 400, (path, response.json())
        [error] = response.json()["errors"]
        assert error["field"] == "slug" and holders in error["message"], (path, error)
    assert api.post(
        "/api/v1/pools", {"slug": "spare", "name": "S", "gpu_type": "L4", "gpu_count": 1}
    )
    assert api.patch("/api/v1/pools/spare", {"slug": "spare-l4"}).json()["slug"] == "spare-l4"
