"""Every money input is bounded (portal.money.money_parse): a plain decimal of at most 2
places (4 for unit prices), at most 10^12, else a 400 naming the field and nothing stored;
no exponent, Infinity, NaN or non-ASCII digits. Prepaid only in the ledger's currency;
volume tiers within the token range; factor targets within (0, 10]."""

from __future__ import annotations

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from billing.models import Contract, CreditNote, Invoice, PrepaidBalance, Price, PromotionalCredit
from flywheel.models import CostModel, FactoryCosts, Goal, Lever
from portal.models import AlertRule
from tests.flywheel.factories import COST_MODEL_TERMS
from tests.flywheel.test_loop_api import LEVER
from tests.metering.factories import make_deployment

# Refused everywhere (money with 2 places, and unit prices with 4).
ALWAYS_REFUSED = [
    "1e3",
    "1E+2",
    "1e20",
    "1e400",
    "Infinity",
    "-Infinity",
    "NaN",
    "١٢٣",  # Arabic-Indic digits
    "１２３",  # fullwidth digits
    "1000000000000.01",
    "10000000000000",
    "-1",
    "0x10",
    "1_000",
    " ",
    "",
    True,
    [],
]


@pytest.fixture
def world(users, tenant_a, admin_api, token_client):
    make_deployment(model="llama-70b", pool="h100-a")
    finance = APIClient()
    finance.force_login(users["finance"])
    purchase = finance.post(
        "/api/v1/prepaid",
        {"tenant": "tenant-a", "amount": "100.00", "expires_at": "2027-06-30T00:00:00Z"},
        format="json",
    )
    assert purchase.status_code == 201, purchase.json()
    invoice = Invoice.objects.get()
    return {
        "operator": admin_api,
        "finance": finance,
        "notify": token_client(users["operator"], scopes=["notify"]),
        "invoice": invoice,
    }


def _body(case: str, world, value) -> tuple[str, str, dict, object, str]:
    """(client, url, body, model whose rows must not grow, the field named)."""
    invoice = world["invoice"]
    return {
        "prepaid": (
            "finance", "/api/v1/prepaid",
            {"tenant": "tenant-a", "amount": value, "expires_at": "2027-06-30T00:00:00Z"},
            PrepaidBalance, "amount",
        ),
        "credit_note": (
            "finance", "/api/v1/credit-notes",
            {"invoice": invoice.number, "reason": "goodwill", "amount": value},
            CreditNote, "amount",
        ),
        "credit_note_line": (
            "finance", "/api/v1/credit-notes",
            {"invoice": invoice.number, "reason": "goodwill",
             "lines": [{"line": invoice.lines.get().pk, "amount": value}]},
            CreditNote, "lines.0.amount",
        ),
        "budget": (
            "notify", "/api/v1/alert-rules",
            {"kind": "budget", "scope": {"tenant": "tenant-a"}, "params": {"amount": value}},
            AlertRule, "params.amount",
        ),
        "price": (
            "operator", "/api/v1/prices",
            {"model": "llama-70b", "token_class": "output", "per_million": value,
             "currency": "USD", "effective_from": "2026-01-01T00:00:00Z"},
            Price, "per_million",
        ),
        "committed_minimum": (
            "operator", "/api/v1/contracts",
            {"tenant": "tenant-a", "kind": "paid", "committed_minimum": value,
             "effective_from": "2026-01-01T00:00:00Z"},
            Contract, "committed_minimum",
        ),
        "promotion": (
            "operator", "/api/v1/promotions",
            {"tenant": "tenant-a", "amount": value, "effective_from": "2026-01-01T00:00:00Z"},
            PromotionalCredit, "amount",
        ),
        "capex": (
            "operator", "/api/v1/cost-models",
            {**COST_MODEL, "capex_per_gpu": value}, CostModel, "capex_per_gpu",
        ),
        "electricity": (
            "operator", "/api/v1/cost-models",
            {**COST_MODEL, "electricity_price_per_kwh": value}, CostModel,
            "electricity_price_per_kwh",
        ),
        "hosting": (
            "operator", "/api/v1/cost-models",
            {**COST_MODEL, "hosting_per_gpu_month": value}, CostModel, "hosting_per_gpu_month",
        ),
        "network_storage": (
            "operator", "/api/v1/cost-models",
            {**COST_MODEL, "network_storage_per_gpu_month": value}, CostModel,
            "network_storage_per_gpu_month",
        ),
        "staff": (
            "operator", "/api/v1/factory-costs",
            {"staff_per_month": value, "sga_per_month": "0",
             "effective_from": "2026-01-01T00:00:00Z"},
            FactoryCosts, "staff_per_month",
        ),
        "sga": (
            "operator", "/api/v1/factory-costs",
            {"staff_per_month": "0", "sga_per_month": value,
             "effective_from": "2026-01-01T00:00:00Z"},
            FactoryCosts, "sga_per_month",
        ),
        "lever_one_time": (
            "operator", "/api/v1/levers", {**LEVER, "one_time_cost": value}, Lever,
            "one_time_cost",
        ),
        "lever_monthly": (
            "operator", "/api/v1/levers", {**LEVER, "monthly_cost": value}, Lever, "monthly_cost",
        ),
        "goal_ebitda": (
            "operator", "/api/v1/goals",
            {"min_ebitda_per_month": value, "effective_from": "2026-01-01T00:00:00Z"},
            Goal, "min_ebitda_per_month",
        ),
    }[case]  # fmt: skip


COST_MODEL = {"pool": "h100-a", **COST_MODEL_TERMS, "effective_from": "2026-01-01T00:00:00Z"}
UNIT_PRICES = {"price", "electricity"}
SIGNED = {"goal_ebitda"}
CASES = [
    "prepaid", "credit_note", "credit_note_line", "budget", "price", "committed_minimum",
    "promotion", "capex", "electricity", "hosting", "network_storage", "staff", "sga",
    "lever_one_time", "lever_monthly", "goal_ebitda",
]  # fmt: skip


def _refused(world, case: str, value) -> None:
    client, url, body, model, field = _body(case, world, value)
    before = model.objects.count()
    response = world[client].post(url, body, format="json")
    assert response.status_code == 400, (case, value, response.status_code, response.content)
    fields = [error["field"] for error in response.json()["errors"]]
    assert field in fields, (case, value, response.json())
    assert model.objects.count() == before, (case, value)


@pytest.mark.parametrize("case", CASES)
def test_each_money_input_refuses_what_is_not_a_bounded_plain_decimal(case, world):
    places = 4 if case in UNIT_PRICES else 2
    too_fine = "0." + "0" * places + "1"  # one place too many
    top = "1000000000" if case in UNIT_PRICES else "1000000000000"
    refused = [*ALWAYS_REFUSED, too_fine, "1." + "0" * places + "1", top + ".01"]
    if case in SIGNED:  # nullable: a blank is no goal
        refused = [v for v in refused if v not in ("-1", "", " ")] + ["-1000000000000.01"]
    for value in refused:
        _refused(world, case, value)


@pytest.mark.parametrize("case", CASES)
def test_each_money_input_takes_its_bounds_exactly(case, world):
    """10^12 (10^9 for unit prices) and the finest place are taken (as decimal strings and
    as JSON numbers)."""
    places = 4 if case in UNIT_PRICES else 2
    top = "1000000000" if case in UNIT_PRICES else "1000000000000"
    finest = "0." + "0" * (places - 1) + "1"
    for value in (top, top + "." + "0" * places, finest, 12.5):
        client, url, body, model, _ = _body(case, world, value)
        if model not in (PrepaidBalance, CreditNote, PromotionalCredit):
            model.objects.all().delete()  # one version an instant, one budget a tenant
        if case.startswith("credit_note") and value != finest:
            continue  # a credit note is bounded by its invoice (100.00) too
        response = world[client].post(url, body, format="json")
        assert response.status_code == 201, (case, value, response.json())


def test_the_prepaid_balance_of_the_probe_is_refused_and_10_12_taken(world):
    refused = world["finance"].post(
        "/api/v1/prepaid",
        {"tenant": "tenant-a", "amount": "1e15", "expires_at": "2027-06-30T00:00:00Z"},
        format="json",
    )
    assert refused.json() == {
        "errors": [
            {
                "field": "amount",
                "message": 'must be a decimal amount written plainly, e.g. "1250.00"',
            }
        ]
    }
    assert PrepaidBalance.objects.get().amount == Decimal("100.00")


def test_a_prepaid_purchase_in_another_currency_is_refused_naming_currency(world):
    response = world["finance"].post(
        "/api/v1/prepaid",
        {"tenant": "tenant-a", "amount": "50.00", "currency": "EUR",
         "expires_at": "2027-06-30T00:00:00Z"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "currency", "message": "the ledger is kept in USD: buy in it"}
    ]
    assert PrepaidBalance.objects.count() == 1
    same = world["finance"].post(
        "/api/v1/prepaid",
        {"tenant": "tenant-a", "amount": "50.00", "currency": "USD",
         "expires_at": "2027-06-30T00:00:00Z"},
        format="json",
    )  # fmt: skip
    assert same.status_code == 201


def test_volume_tier_bounds_stay_within_the_token_range(world):
    body = {
        "tenant": "tenant-a",
        "kind": "paid",
        "volume_tiers": [{"from_tokens": 2**63, "discount_pct": "5"}],
        "effective_from": "2026-01-01T00:00:00Z",
    }
    response = world["operator"].post("/api/v1/contracts", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "volume_tiers.0.from_tokens"
    body["volume_tiers"][0]["from_tokens"] = 2**63 - 1
    assert world["operator"].post("/api/v1/contracts", body, format="json").status_code == 201


@pytest.mark.parametrize(
    ("targets", "status"),
    [
        ({"efficiency": "10"}, 201),
        ({"efficiency": "10.000001"}, 400),
        ({"efficiency": "500000"}, 400),
        ({"occupancy": "1"}, 201),
        ({"occupancy": "1.5"}, 400),
        ({"occupancy": "0"}, 400),
    ],
)
def test_factor_targets_stay_within_0_and_10(targets, status, world):
    goal = world["operator"].post(
        "/api/v1/goals",
        {"min_tfi": "0.3", "factor_targets": targets, "effective_from": "2026-01-01T00:00:00Z"},
        format="json",
    )
    assert goal.status_code == status, goal.json()
    scenario = world["operator"].post(
        "/api/v1/flywheel/scenarios", {"targets": targets}, format="json"
    )
    if status == 400:
        assert goal.json()["errors"][0]["field"].startswith("factor_targets")
        assert scenario.status_code == 400
        assert scenario.json()["errors"][0]["field"].startswith("targets")
    else:  # taken: refused only for want of measured data (no pool in service here)
        assert [e["field"] for e in scenario.json()["errors"]] == ["from"]
