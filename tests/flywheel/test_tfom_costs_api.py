"""Cost models and factory costs: effective-dated, create-only once in force, audited."""

from datetime import timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from billing.services.close import close_run
from flywheel.models import CostModel, FactoryCosts
from metering.models import Pool
from portal import clock
from portal.models import AuditEntry
from tests.flywheel.test_tfom_api import (
    APRIL,
    APRIL_START,
    COST_MODEL,
    MAY,
    build_factory,
    post_april_usage,
)

pytestmark = pytest.mark.both_backends

BODY = {
    "pool": "b200-sh",
    "capex_per_gpu": "61900",
    "depreciation_months": 60,
    "power_kw_per_gpu": "1.79",
    "idle_power_ratio": "0.3",
    "pue": "1.3",
    "electricity_price_per_kwh": "0.083",
    "hosting_per_gpu_month": "268.5",
    "network_storage_per_gpu_month": "0",
    "effective_from": "2026-01-01T00:00:00Z",
}


@pytest.fixture
def admin(users, token_client):
    Pool.objects.create(slug="b200-sh", name="B200", gpu_type="B200", gpu_count=1000)
    return token_client(users["operator"], scopes=["admin", "read"])


def _future_hour() -> str:
    moment = clock.now().replace(minute=0, second=0, microsecond=0) + timedelta(days=2)
    return moment.isoformat().replace("+00:00", "Z")


def test_cost_model_create_as_architecture_shows_and_audits(admin, users):
    response = admin.post("/api/v1/cost-models", BODY)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["pool"] == "b200-sh"
    assert Decimal(body["capex_per_gpu"]) == Decimal(61_900)
    assert Decimal(body["power_kw_per_gpu"]) == Decimal("1.79")
    assert Decimal(body["hosting_per_gpu_month"]) == Decimal("268.5")
    assert Decimal(body["node_power_factor"]) == Decimal("1.8")  # default
    assert body["currency"] == "USD"
    assert body["effective_from"] == "2026-01-01T00:00:00Z"
    entry = AuditEntry.objects.get(action="cost_model.create")
    assert entry.actor == users["operator"]
    assert entry.object_id == str(body["id"])
    assert entry.after["capex_per_gpu"] == "61900.0000"


def test_factory_costs_create_as_architecture_shows(admin):
    body = {
        "staff_per_month": "130000",
        "sga_per_month": "0",
        "effective_from": "2026-01-01T00:00:00Z",
    }
    response = admin.post("/api/v1/factory-costs", body)
    assert response.status_code == 201, response.json()
    assert Decimal(response.json()["staff_per_month"]) == Decimal(130_000)
    assert AuditEntry.objects.filter(action="factory_costs.create").count() == 1
    listing = admin.get("/api/v1/factory-costs").json()
    assert listing["count"] == 1
    assert listing["results"][0]["currency"] == "USD"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"effective_from": "2026-01-01T00:30:00Z"}, "effective_from"),
        ({"pue": "0.9"}, "pue"),
        ({"idle_power_ratio": "1.5"}, "idle_power_ratio"),
        ({"depreciation_months": 0}, "depreciation_months"),
        ({"capex_per_gpu": "-1"}, "capex_per_gpu"),
        ({"currency": "EUR"}, "currency"),
        ({"pool": "nowhere"}, "pool"),
    ],
)
def test_cost_model_refuses_invalid_input_and_stores_nothing(admin, change, field):
    response = admin.post("/api/v1/cost-models", {**BODY, **change})
    assert response.status_code == 400
    assert field in {e["field"] for e in response.json()["errors"]}
    assert not CostModel.objects.exists()
    assert not AuditEntry.objects.filter(object_type="cost_model").exists()


def test_cost_model_second_version_at_the_same_instant_is_refused(admin):
    assert admin.post("/api/v1/cost-models", BODY).status_code == 201
    response = admin.post("/api/v1/cost-models", {**BODY, "pue": "1.2"})
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "field": "effective_from",
            "message": "pool b200-sh already has a cost model from that instant",
        }
    ]
    assert CostModel.objects.get().pue == Decimal("1.3")


def test_cost_model_in_force_is_never_edited_nor_deleted(admin):
    created = admin.post("/api/v1/cost-models", BODY).json()
    url = f"/api/v1/cost-models/{created['id']}"
    assert admin.patch(url, {"pue": "1.1"}).status_code == 405
    assert admin.put(url, {**BODY, "pue": "1.1"}).status_code == 405
    response = admin.delete(url)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "effective_from"
    assert CostModel.objects.get().pue == Decimal("1.3")
    assert not AuditEntry.objects.filter(action="cost_model.delete").exists()


def test_cost_model_not_in_force_yet_may_be_deleted_and_is_audited(admin):
    created = admin.post("/api/v1/cost-models", {**BODY, "effective_from": _future_hour()}).json()
    assert admin.delete(f"/api/v1/cost-models/{created['id']}").status_code == 204
    assert not CostModel.objects.exists()
    entry = AuditEntry.objects.get(action="cost_model.delete")
    assert entry.before["pue"] == "1.3000"


def test_factory_costs_not_in_force_yet_may_be_deleted(admin):
    body = {"staff_per_month": "1", "sga_per_month": "2", "effective_from": _future_hour()}
    created = admin.post("/api/v1/factory-costs", body).json()
    assert admin.delete(f"/api/v1/factory-costs/{created['id']}").status_code == 204
    assert not FactoryCosts.objects.exists()
    assert AuditEntry.objects.filter(action="factory_costs.delete").count() == 1


def test_cost_models_list_filters_by_pool(admin):
    Pool.objects.create(slug="h100-a", name="H100", gpu_type="H100", gpu_count=8)
    admin.post("/api/v1/cost-models", BODY)
    admin.post("/api/v1/cost-models", {**BODY, "pool": "h100-a"})
    listing = admin.get("/api/v1/cost-models?pool=h100-a").json()
    assert [row["pool"] for row in listing["results"]] == ["h100-a"]


@pytest.mark.parametrize("role", ["finance", "investor"])
def test_finance_and_investors_read_but_may_not_write(admin, users, role):
    client = APIClient()
    client.force_login(users[role])
    assert client.get("/api/v1/cost-models").status_code == 200
    assert client.post("/api/v1/cost-models", BODY).status_code == 403
    assert (
        client.post(
            "/api/v1/factory-costs",
            {
                "staff_per_month": "1",
                "sga_per_month": "1",
                "effective_from": "2026-01-01T00:00:00Z",
            },
        ).status_code
        == 403
    )
    assert not CostModel.objects.exists()
    assert not FactoryCosts.objects.exists()


def test_a_read_token_may_not_write_cost_models(admin, users, token_client):
    reader = token_client(users["operator"], scopes=["read"])
    response = reader.post("/api/v1/cost-models", BODY)
    assert response.status_code == 403
    assert "admin" in response.json()["errors"][0]["message"]
    assert not CostModel.objects.exists()


COST_WRITES = {
    "cost model": (
        "/api/v1/cost-models",
        lambda at: {"pool": "h100-a", **COST_MODEL, "pue": "2.0", "effective_from": at},
        CostModel,
    ),
    "factory costs": (
        "/api/v1/factory-costs",
        lambda at: {"staff_per_month": "99999", "sga_per_month": "1", "effective_from": at},
        FactoryCosts,
    ),
}


@pytest.fixture
def april_closed(users, token_client):
    """The April example (tests/flywheel/test_tfom_api.py), invoiced: April is closed, May
    open. Returns (operator client, investor client)."""
    admin = token_client(users["operator"], scopes=["admin", "read"])
    build_factory(admin, token_client(users["operator"], scopes=["ingest"]))
    post_april_usage(token_client(users["operator"], scopes=["ingest"]))
    assert len(close_run(month_start=APRIL_START).issued) == 1
    investor = APIClient()
    investor.force_login(users["investor"])
    return admin, investor


@pytest.mark.parametrize("kind", list(COST_WRITES))
def test_cost_version_inside_a_closed_month_is_refused_and_its_tfom_unchanged(april_closed, kind):
    admin, investor = april_closed
    path, body, model = COST_WRITES[kind]
    tfom = f"/api/v1/tfom?scope=factory&from={APRIL}&to={MAY}"
    before = (investor.get(tfom).json(), model.objects.count(), AuditEntry.objects.count())
    assert before[0]["gross_profit"] is not None  # the month has figures to protect

    response = admin.post(path, body(APRIL))

    assert response.status_code == 400, response.json()
    assert response.json()["errors"] == [
        {
            "field": "effective_from",
            "message": "is before the end of the last closed month (2026-04): a version "
            "from then would be in force inside it; start it at 2026-05-01T00:00:00Z or "
            "later",
        }
    ]
    after = (investor.get(tfom).json(), model.objects.count(), AuditEntry.objects.count())
    assert after == before


@pytest.mark.parametrize("kind", list(COST_WRITES))
def test_cost_version_from_an_open_month_is_added(april_closed, kind):
    admin, _ = april_closed
    path, body, model = COST_WRITES[kind]
    count = model.objects.count()

    response = admin.post(path, body(MAY))

    assert response.status_code == 201, response.json()
    assert response.json()["effective_from"] == MAY
    assert model.objects.count() == count + 1
