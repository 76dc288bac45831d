"""Billing API: prices, contracts, promotions (create-only once in force), invoices, ledger."""

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from billing.models import Contract, Invoice, Posting, Price
from billing.services.close import close_run
from billing.services.invoices.draft import invoice_draft
from billing.services.invoices.issue import invoice_finalize
from portal.models import AuditEntry
from tests.billing.factories import (
    MARCH,
    assert_refused,
    make_march_usage,
    make_priced_model,
)

pytestmark = pytest.mark.both_backends


def test_price_create_is_audited_and_listed(admin_api):
    make_deployment_model = make_priced_model(prices=("1", "0.5", "2"))
    response = admin_api.post(
        "/api/v1/prices",
        {
            "model": make_deployment_model.slug,
            "token_class": "output",
            "per_million": "2.19",
            "currency": "USD",
            "effective_from": "2026-12-01T00:00:00Z",
        },
    )
    assert response.status_code == 201, response.json()
    assert response.json()["per_million"] == "2.1900000000"
    listed = admin_api.get("/api/v1/prices?model=llama-70b&token_class=output").json()
    assert [p["per_million"] for p in listed["results"]] == ["2.0000000000", "2.1900000000"]


@pytest.mark.parametrize("token_class", ["reasoning", "cache_write"])
def test_reasoning_and_cache_write_take_a_price_of_their_own(admin_api, token_class):
    make_priced_model()
    body = {"model": "llama-70b", "token_class": token_class, "per_million": "3.10",
            "currency": "USD", "effective_from": "2026-12-01T00:00:00Z"}  # fmt: skip

    response = admin_api.post("/api/v1/prices", body)

    assert response.status_code == 201, response.json()
    listed = admin_api.get(f"/api/v1/prices?model=llama-70b&token_class={token_class}").json()
    assert [p["per_million"] for p in listed["results"]] == ["3.1000000000"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"per_million": "-1"}, "per_million"),
        ({"token_class": "thinking"}, "token_class"),
        ({"model": "nope"}, "model"),
        ({"effective_from": "2026-12-01T00:30:00Z"}, "effective_from"),
        ({"effective_from": "2026-01-01T00:00:00Z"}, "effective_from"),  # version exists
        ({"currency": "XYZ"}, "currency"),
    ],
)
def test_price_create_rejects_bad_input_naming_the_field(admin_api, body, field):
    make_priced_model()
    good = {
        "model": "llama-70b",
        "token_class": "output",
        "per_million": "1.00",
        "currency": "USD",
        "effective_from": "2026-12-01T00:00:00Z",
    }
    response = admin_api.post("/api/v1/prices", {**good, **body})
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert Price.objects.count() == 3


def test_price_in_force_cannot_be_deleted_but_a_future_one_can(admin_api):
    make_priced_model()
    in_force = Price.objects.first()
    response = admin_api.delete(f"/api/v1/prices/{in_force.pk}")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "effective_from"
    future = admin_api.post(
        "/api/v1/prices",
        {
            "model": "llama-70b",
            "token_class": "input",
            "per_million": "0.90",
            "currency": "USD",
            "effective_from": "2030-01-01T00:00:00Z",
        },
    ).json()
    assert admin_api.delete(f"/api/v1/prices/{future['id']}").status_code == 204
    assert admin_api.put(f"/api/v1/prices/{in_force.pk}", {}).status_code == 405


def _contract_post(api, **fields):
    """POST /api/v1/contracts: a paid contract of tenant A from 1 January 2026, but for
    `fields`."""
    body = {"tenant": "tenant-a", "kind": "paid", "effective_from": "2026-01-01T00:00:00Z"}
    return api.post("/api/v1/contracts", {**body, **fields})


def test_contract_create_with_tiers_and_default_credit_tiers(admin_api, tenant_a):
    response = _contract_post(
        admin_api,
        discount_pct="10",
        free_tokens_per_month=1000000,
        volume_tiers=[{"from_tokens": 1000000000, "discount_pct": "5"}],
    )
    assert response.status_code == 201, response.json()
    contract = Contract.objects.get()
    assert contract.volume_tiers == [{"from_tokens": 1000000000, "discount_pct": "5.0000"}]
    assert contract.credit_tiers == [["0.999", "10"], ["0.99", "25"], ["0.95", "100"]]
    assert contract.currency == "USD"
    bad = _contract_post(admin_api, kind="free", effective_from="2026-02-01T00:00:00Z")
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "kind"


def test_contract_ignores_mass_assigned_fields(admin_api, tenant_a):
    response = _contract_post(admin_api, id=999, created_at="2000-01-01T00:00:00Z")
    assert response.status_code == 201
    assert Contract.objects.get().pk != 999


@pytest.fixture
def invoices(admin_api, tenant_a, tenant_b):
    make_priced_model()
    make_march_usage(admin_api, tenant_a, "a1")
    make_march_usage(admin_api, tenant_b, "b1")
    return {i.tenant.slug: i for i in close_run(month_start=MARCH).issued}


@pytest.fixture
def open_invoices(admin_api, tenant_a, tenant_b):
    """March's invoices issued by finance before March is closed (so they may be voided)."""
    make_priced_model()
    make_march_usage(admin_api, tenant_a, "a1")
    make_march_usage(admin_api, tenant_b, "b1")
    issued = {}
    for tenant in (tenant_a, tenant_b):
        draft, _ = invoice_draft(tenant=tenant, month_start=MARCH)
        issued[tenant.slug] = invoice_finalize(invoice=draft)
    return issued


def test_tenant_sees_only_its_own_invoices(users, invoices):
    member = APIClient()
    member.force_login(users["tenant"])
    listed = member.get("/api/v1/invoices").json()
    assert [i["tenant"] for i in listed["results"]] == ["tenant-a"]
    assert listed["results"][0]["total"] == "17.6000"
    assert member.get(f"/api/v1/invoices/{invoices['tenant-b'].pk}").status_code == 404
    ledger = member.get("/api/v1/ledger").json()
    assert {row["tenant"] for row in ledger["results"]} == {"tenant-a"}
    assert member.post(f"/api/v1/invoices/{invoices['tenant-a'].pk}/pay").status_code == 403


def test_finance_pays_and_voids(finance, open_invoices):
    a, b = open_invoices["tenant-a"], open_invoices["tenant-b"]
    paid = finance.post(f"/api/v1/invoices/{a.pk}/pay")
    assert paid.status_code == 200
    assert paid.json()["status"] == "paid"
    voided = finance.post(f"/api/v1/invoices/{b.pk}/void", {"reason": "duplicate"})
    assert voided.json()["status"] == "void"
    again = finance.post(f"/api/v1/invoices/{b.pk}/void", {})
    assert again.status_code == 409  # a state conflict, as for finalize
    paid_again = finance.post(f"/api/v1/invoices/{a.pk}/pay")
    assert paid_again.status_code == 409
    assert paid_again.json()["errors"] == [
        {"field": "status", "message": f"invoice {a.number} is paid; only issued invoices are paid"}
    ]
    assert again.json()["errors"][0]["field"] == "status"
    cash = finance.get("/api/v1/ledger?account=cash").json()["results"]
    assert [(row["amount"], row["kind"]) for row in cash] == [("17.6000", "payment")]
    assert Invoice.objects.get(pk=b.pk).status == "void"


def test_an_invoice_of_a_closed_month_is_not_voided_but_credited(finance, invoices):
    invoice = invoices["tenant-a"]
    before = Posting.objects.count()

    response = finance.post(f"/api/v1/invoices/{invoice.pk}/void", {"reason": "duplicate"})

    assert_refused(
        response,
        400,
        "status",
        f"2026-03 is closed: {invoice.number} is not voided; correct it with a credit note",
    )
    assert (Invoice.objects.get(pk=invoice.pk).status, Posting.objects.count()) == (
        "issued",
        before,
    )


@pytest.mark.parametrize("state", ["issued", "paid", "void"])
def test_finalize_of_an_invoice_past_draft_is_a_conflict_naming_its_state(
    finance, open_invoices, state
):
    invoice = open_invoices["tenant-a"]
    if state != "issued":
        finance.post(f"/api/v1/invoices/{invoice.pk}/{'pay' if state == 'paid' else 'void'}")
    before = (
        list(Invoice.objects.order_by("pk").values_list("pk", "status", "number")),
        Posting.objects.count(),
        AuditEntry.objects.count(),
    )

    response = finance.post(f"/api/v1/invoices/{invoice.pk}/finalize")

    assert_refused(
        response, 409, "status", f"invoice {invoice.number} is {state}; only a draft is finalized"
    )
    after = (
        list(Invoice.objects.order_by("pk").values_list("pk", "status", "number")),
        Posting.objects.count(),
        AuditEntry.objects.count(),
    )
    assert after == before


def test_investor_cannot_read_invoices_or_write_prices(users, invoices):
    investor = APIClient()
    investor.force_login(users["investor"])
    assert investor.get("/api/v1/invoices").status_code == 403
    assert investor.get("/api/v1/ledger").status_code == 403
    assert investor.get("/api/v1/prices").status_code == 200
    body = {"model": "llama-70b", "token_class": "input", "per_million": "0"}
    assert investor.post("/api/v1/prices", body).status_code == 403


def test_finance_token_with_read_scope_cannot_post(users, token_client, invoices):
    api = token_client(users["finance"], scopes=["read"])
    assert api.get("/api/v1/invoices").status_code == 200
    pay = api.post(f"/api/v1/invoices/{invoices['tenant-a'].pk}/pay")
    assert pay.status_code == 403
    assert Decimal(api.get("/api/v1/invoices").json()["results"][0]["total"]) == Decimal("17.60")


@pytest.mark.parametrize("currency", ["EUR", "XYZ"])
def test_a_price_in_another_currency_than_the_ledgers_is_refused(admin_api, currency):
    model = make_priced_model(prices=("1", "0.5", "2"))
    response = admin_api.post(
        "/api/v1/prices",
        {"model": model.slug, "token_class": "output", "per_million": "2.19",
         "currency": currency, "effective_from": "2027-01-01T00:00:00Z"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "currency"
    assert Price.objects.filter(currency=currency).count() == 0
