"""Prepaid balances (kpis.md "Credit notes, balances and receivables"): a purchase booked as
deferred revenue, recognized as the month-end closes draw it, its rest breakage on its
expiry day; exact to the cent in the ledger, TFOM and the tenant's balances."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.utils.html import escape

from billing.models import Invoice, Posting
from billing.selectors.close import close_report
from billing.selectors.ledger import ledger_revenue
from billing.services.close import close_run
from billing.services.prepaid import prepaid_purchase
from metering.models import Pool
from tests.billing.factories import make_contract, make_priced_model, post_usage
from tests.flywheel.factories import make_cost_model

pytestmark = pytest.mark.both_backends

OCT = datetime(2026, 10, 1, tzinfo=UTC)
NOV = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)
B = 1_000_000_000


def _deferred() -> Decimal:
    return -sum(
        Posting.objects.filter(account__code="liability:deferred-revenue:tenant-a").values_list(
            "amount", flat=True
        ),
        Decimal(0),
    )


def _usage(admin_api, event_id: str, time: str, billions: Decimal) -> None:
    """`billions` B input and as many output tokens at 1.00 per million: 2,000.00 a billion."""
    tokens = int(billions * B)
    post_usage(admin_api, [{"id": event_id, "time": time, "input_tokens": tokens,
                            "output_tokens": tokens}])  # fmt: skip


def test_prepaid_is_recognized_as_drawn_and_its_rest_breaks_on_its_expiry_day(admin_api, tenant_a):
    make_priced_model(prices=("1", "0.5", "1"))
    make_cost_model(Pool.objects.get())
    make_contract(tenant_a)
    balance = prepaid_purchase(
        tenant=tenant_a,
        amount="10000.00",
        expires_at=datetime(2026, 11, 30, tzinfo=UTC),
        now=datetime(2026, 10, 1, 9, tzinfo=UTC),
    )
    purchase = balance.invoice
    assert (purchase.kind, purchase.number, purchase.total) == (
        "purchase", "INV-2026-000001", Decimal("10000.00"),
    )  # fmt: skip
    assert purchase.issue_transaction.accounting_date.isoformat() == "2026-10-01"
    assert _deferred() == Decimal("10000.00")
    assert ledger_revenue(start=OCT.date(), end=NOV.date()) == 0  # no revenue at purchase

    for n, day in enumerate(("2026-10-05", "2026-10-12", "2026-10-19"), start=1):
        _usage(admin_api, f"oct-{n}", f"{day}T10:00:00Z", Decimal(1))  # 3 × 2,000.00
    _usage(admin_api, "nov-1", "2026-11-05T10:00:00Z", Decimal(1))
    _usage(admin_api, "nov-2", "2026-11-20T10:00:00Z", Decimal("0.5"))  # 3,000.00 in all

    [october] = close_run(month_start=OCT, now=NOV.replace(hour=2)).issued
    assert [(line.kind, line.amount) for line in october.lines.all()] == [
        ("usage", Decimal("3000.00")),
        ("usage", Decimal("3000.00")),
        ("prepaid", Decimal("-6000.00")),
    ]
    assert (october.total, october.status) == (Decimal("0.00"), "paid")
    assert ledger_revenue(start=OCT.date(), end=NOV.date()) == Decimal("6000.00")
    assert _deferred() == Decimal("4000.00")

    [november] = close_run(month_start=NOV, now=DEC.replace(hour=2)).issued
    assert november.lines.get(kind="prepaid").amount == Decimal("-3000.00")
    assert ledger_revenue(start=NOV.date(), end=DEC.date()) == Decimal("4000.00")
    breakage = Posting.objects.get(account__code="revenue:breakage")
    assert (breakage.amount, breakage.transaction.accounting_date.isoformat()) == (
        Decimal("-1000.00"), "2026-11-30",
    )  # fmt: skip
    assert _deferred() == Decimal("0")
    assert close_report(month=OCT).is_balanced and close_report(month=NOV).is_balanced

    from flywheel.selectors.tfom import tfom_measure

    assert tfom_measure(scope="factory", start=OCT, end=NOV).revenue == Decimal("6000.00")
    assert tfom_measure(scope="factory", start=NOV, end=DEC).revenue == Decimal("4000.00")

    body = admin_api.get("/api/v1/tenants/tenant-a/balances").json()
    assert body["prepaid"] == [
        {"id": balance.pk, "amount": "10000.00", "remaining": "0.00",
         "starts_at": "2026-10-01T00:00:00+00:00", "expires_at": "2026-11-30T00:00:00+00:00",
         "invoice": "INV-2026-000001"},
    ]  # fmt: skip
    assert [(m["kind"], m["amount"], m["document"]) for m in body["movements"]] == [
        ("purchase", "10000.00", "INV-2026-000001"),
        ("draw", "-6000.00", october.number),
        ("breakage", "-1000.00", ""),
        ("draw", "-3000.00", november.number),
    ]
    assert Invoice.objects.filter(kind="usage").count() == 2


def test_a_purchase_is_refused_naming_the_field(admin_api, tenant_a):
    cases = [
        ({"amount": "0", "expires_at": "2027-01-31"}, "amount"),
        ({"amount": "10.001", "expires_at": "2027-01-31"}, "amount"),
        ({"amount": "10.00", "expires_at": "2026-12-16T10:00:00Z"}, "expires_at"),
        ({"amount": "10.00", "expires_at": "2026-12-01"}, "expires_at"),
        ({"amount": "10.00", "starts_at": "2026-12-17T05:00:00Z", "expires_at": "2027-01-31"},
         "starts_at"),
    ]  # fmt: skip
    for body, field in cases:
        response = admin_api.post("/api/v1/prepaid", {"tenant": "tenant-a", **body}, format="json")
        assert response.status_code == 400, (body, response.json())
        assert response.json()["errors"][0]["field"] == field, body
    assert not Invoice.objects.exists()
    made = admin_api.post(
        "/api/v1/prepaid",
        {"tenant": "tenant-a", "amount": "500.00", "expires_at": "2027-03-31"},
        format="json",
    )
    assert made.status_code == 201, made.json()
    assert made.json()["starts_at"] == "2026-12-16T00:00:00+00:00"


def test_the_balances_page_refuses_a_purchase_as_the_api_does_keeping_the_form(
    admin_api, client, users, tenant_a
):
    """From the page, the API's refusals: a 400 with its message beside the form, the amount
    and day typed kept; no invoice. A good purchase is recorded and redirects."""
    client.force_login(users["finance"])
    for body in (
        {"amount": "10.001", "expires_at": "2027-01-31"},
        {"amount": "10.00", "expires_at": "2026-12-01"},
    ):
        api = admin_api.post("/api/v1/prepaid", {"tenant": "tenant-a", **body}, format="json")
        error = api.json()["errors"][0]
        page = client.post("/billing/balances/?tenant=tenant-a", body)
        assert page.status_code == 400, body
        shown = page.content.decode()
        message = escape(f"{error['field']}: {error['message']}")
        assert f'<p class="error" id="pp-error" role="alert">{message}</p>' in shown, body
        for name, value in body.items():
            typed = f'name="{name}"'
            at = shown.index(typed)
            assert f'value="{value}"' in shown[at : at + 200], (name, value)
    assert not Invoice.objects.exists()
    made = client.post(
        "/billing/balances/?tenant=tenant-a", {"amount": "500.00", "expires_at": "2027-03-31"}
    )
    assert made.status_code == 302 and Invoice.objects.count() == 1
    # The balance in money, not a count of purchases.
    shown = client.get("/billing/balances/?tenant=tenant-a").content.decode()
    assert '<div class="label">Prepaid left</div><div class="value">500.00</div>' in shown
    assert "USD in 1 purchase," in shown


def test_a_voided_purchase_leaves_the_balances(admin_api, tenant_a, users, session_client):
    kept = admin_api.post(
        "/api/v1/prepaid",
        {"tenant": "tenant-a", "amount": "500.00", "expires_at": "2027-03-31"},
        format="json",
    ).json()
    voided = admin_api.post(
        "/api/v1/prepaid",
        {"tenant": "tenant-a", "amount": "70.00", "expires_at": "2027-03-31"},
        format="json",
    ).json()
    invoice = Invoice.objects.get(number=voided["invoice"])
    listed = admin_api.get("/api/v1/invoices").json()["results"]
    assert {row["number"]: row["kind"] for row in listed} == {
        kept["invoice"]: "purchase",  # invoice results carry their kind (usage | purchase)
        voided["invoice"]: "purchase",
    }
    answer = admin_api.post(
        f"/api/v1/invoices/{invoice.pk}/void", {"reason": "sold by mistake"}, format="json"
    )
    assert answer.status_code == 200, answer.json()

    balances = admin_api.get("/api/v1/tenants/tenant-a/balances").json()
    assert [b["id"] for b in balances["prepaid"]] == [kept["id"]]
    assert [(m["kind"], m["amount"]) for m in balances["movements"]] == [("purchase", "500.00")]
    page = session_client(users["finance"]).get("/billing/balances/?tenant=tenant-a")
    assert voided["invoice"] not in page.content.decode()
    assert kept["invoice"] in page.content.decode()


def test_the_balances_page_lists_every_tenants_balances_before_one_is_chosen(
    admin_api, client, users, tenant_a, tenant_b
):
    """No tenant chosen: each tenant's credit balance and prepaid left, by name, each
    opening its own balances (tenant A bought 500.00 of prepaid; B nothing)."""
    made = admin_api.post(
        "/api/v1/prepaid",
        {"tenant": "tenant-a", "amount": "500.00", "expires_at": "2027-03-31"},
        format="json",
    )
    assert made.status_code == 201, made.json()
    client.force_login(users["finance"])

    page = client.get("/billing/balances/")

    rows = [(b.tenant.slug, b.credit, b.prepaid_left, b.purchases)
            for b in page.context["every_tenant"]]  # fmt: skip
    assert rows == [
        ("tenant-a", Decimal(0), Decimal("500.00"), 1),
        ("tenant-b", Decimal(0), Decimal(0), 0),
    ]
    shown = " ".join(page.content.decode().split())
    assert (
        '<td><a href="?tenant=tenant-a">Tenant A</a></td><td class="num">0.00</td>'
        '<td class="num">500.00</td><td class="num">1</td>' in shown
    )
    assert "Choose a tenant to see its balances." not in shown
