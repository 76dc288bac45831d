"""Invoices from ingested usage: the hand-computed month, idempotent runs, late usage."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from billing.models import Invoice, InvoiceLine, Posting
from billing.selectors.ledger import account_balances
from billing.services.close import close_run
from billing.services.pricing import price_create
from portal import clock
from tests.billing.factories import (
    APRIL,
    MARCH,
    M,
    line_amounts,
    make_contract,
    make_march_usage,
    make_priced_model,
    make_promotion,
    post_usage,
    usage_event,
)
from tests.conftest import on_every_clock

pytestmark = pytest.mark.both_backends


@pytest.fixture
def march_terms(tenant_a):
    """List 0.88 / 0.44 / 0.88 per million, output 1.10 from 16 March; 10% off, the first
    100 M tokens free, 20% more from 300 M paid tokens; a 50.00 promotional credit."""
    model = make_priced_model()
    price_create(
        model=model,
        token_class="output",
        per_million=Decimal("1.10"),
        currency="USD",
        effective_from=datetime(2026, 3, 16, tzinfo=UTC),
    )
    make_contract(
        tenant_a,
        discount_pct=Decimal(10),
        free_tokens_per_month=100 * M,
        volume_tiers=[{"from_tokens": 300 * M, "discount_pct": "20"}],
    )
    make_promotion(tenant_a, "50.00", description="Launch credit")


MARCH_EVENTS = [
    # Same hour: the first stays within the 100 M allowance, the second crosses it: split,
    # 20 M free (12 M input, 4 M cached, 4 M output: its classes 30 / 10 / 10 in proportion),
    # 30 M paid (18 M, 6 M, 6 M).
    {"id": "e1", "time": "2026-03-02T10:10:00Z", "input_tokens": 60 * M, "output_tokens": 20 * M},
    {"id": "e2", "time": "2026-03-02T10:40:00Z", "input_tokens": 40 * M,
     "cached_tokens": 10 * M, "output_tokens": 10 * M},
    # Same hour: paid running total 180 M, then 330 M: e3b crosses the 20% tier at 300 M,
    # split 120 M before it (40 M of each class), 30 M in it (10 M each).
    {"id": "e3a", "time": "2026-03-10T09:10:00Z", "input_tokens": 100 * M,
     "cached_tokens": 50 * M, "output_tokens": 50 * M},
    {"id": "e3b", "time": "2026-03-10T09:40:00Z", "input_tokens": 100 * M,
     "cached_tokens": 50 * M, "output_tokens": 50 * M},
    # After the price change: output at 1.10.
    {"id": "e4", "time": "2026-03-20T12:00:00Z", "input_tokens": 100 * M, "output_tokens": 50 * M},
]  # fmt: skip

# (token class, unit price, discount %, quantity, list amount, discount, amount), by hand:
# e2's paid part, e3a and e3b's first 120 M at 10%; the rest of e3b and e4 at
# 100 - 90 × 80 / 100 = 28%.
MARCH_LINES = [
    ("input", "0.88", "10", 108 * M, "95.04", "9.50", "85.54"),  # 85.536
    ("input", "0.88", "28", 110 * M, "96.80", "27.10", "69.70"),  # 69.696
    ("cached_input", "0.44", "10", 96 * M, "42.24", "4.22", "38.02"),  # 38.016
    ("cached_input", "0.44", "28", 10 * M, "4.40", "1.23", "3.17"),  # 3.168
    ("output", "0.88", "10", 96 * M, "84.48", "8.45", "76.03"),  # 76.032
    ("output", "0.88", "28", 10 * M, "8.80", "2.46", "6.34"),  # 6.336
    ("output", "1.1", "28", 50 * M, "55.00", "15.40", "39.60"),
]


def _usage_lines(invoice):
    return [
        (
            line.token_class,
            format(line.list_unit_price.normalize(), "f"),
            format(line.discount_pct.normalize(), "f"),
            line.quantity,
            str(line.list_amount.quantize(Decimal("0.01"))),
            str(line.discount.quantize(Decimal("0.01"))),
            str(line.amount.quantize(Decimal("0.01"))),
        )
        for line in invoice.lines.filter(kind="usage")
    ]


def test_invoice_matches_the_hand_computed_month(admin_api, tenant_a, march_terms):
    post_usage(admin_api, MARCH_EVENTS)

    run = close_run(month_start=MARCH)

    [invoice] = run.issued
    assert invoice.number == f"INV-{clock.now().year}-000001"
    assert invoice.status == "issued"
    assert _usage_lines(invoice) == MARCH_LINES
    promotion = invoice.lines.get(kind="promotion")
    assert (promotion.amount, promotion.description) == (Decimal("-50.00"), "Launch credit")
    # 318.40 of usage less the 50.00 credit; the total is the sum of the rounded lines.
    assert invoice.total == Decimal("268.40")
    assert sum(line.amount for line in invoice.lines.all()) == invoice.total


def test_invoice_posts_a_balanced_transaction(admin_api, tenant_a, march_terms):
    post_usage(admin_api, MARCH_EVENTS)
    close_run(month_start=MARCH)

    balances = account_balances()
    assert balances[("receivable:tenant-a", "USD")] == Decimal("268.40")
    assert balances[("revenue:llama-70b", "USD")] == Decimal("-386.76")  # list value
    assert balances[("contra:discounts", "USD")] == Decimal("68.36")  # 386.76 - 318.40
    assert balances[("expense:promotions", "USD")] == Decimal("50.00")
    assert sum(balances.values()) == 0


def test_close_run_twice_issues_one_invoice(admin_api, tenant_a, march_terms):
    post_usage(admin_api, MARCH_EVENTS)

    first = close_run(month_start=MARCH)
    second = close_run(month_start=MARCH)

    assert first.steps == ["lock", "stages", "rate", "sla", "issue", "breakage", "closed"]
    assert [i.number for i in first.issued] == ["INV-2026-000001"]
    assert (second.steps, second.issued) == ([], [])  # nothing left to do
    assert Invoice.objects.count() == 1
    assert Posting.objects.count() == 4


def test_late_usage_goes_onto_the_next_invoice(admin_api, tenant_a, march_terms):
    post_usage(admin_api, MARCH_EVENTS)
    [march] = close_run(month_start=MARCH).issued
    march_lines = list(march.lines.values_list("amount", flat=True))

    # Late: 10 M input at 0.88 and 10 M output at 1.10, both at 28%; April's own usage is
    # within its free allowance.
    late = usage_event("e5", "2026-03-25T10:00:00Z", 10 * M, 10 * M)
    april = usage_event("e6", "2026-04-05T08:00:00Z", 10 * M)
    post_usage(admin_api, [late, april])
    [april_invoice] = close_run(month_start=APRIL).issued

    # Re-rated March: input 0.88 at 28% on 120 M → 76.03 (was 69.70), output 1.10 at 28%
    # on 60 M → 47.52 (was 39.60): +14.25 billed, +19.80 at list.
    [adjustment] = april_invoice.lines.all()
    assert adjustment.kind == "adjustment"
    assert adjustment.for_month == MARCH
    assert (adjustment.list_amount, adjustment.discount, adjustment.amount) == (
        Decimal("19.80"),
        Decimal("5.55"),
        Decimal("14.25"),
    )
    assert april_invoice.total == Decimal("14.25")
    march.refresh_from_db()
    assert march.total == Decimal("268.40")
    assert list(march.lines.values_list("amount", flat=True)) == march_lines
    # A second April run re-rates nothing new.
    assert close_run(month_start=APRIL).issued == []


def test_usage_a_promotion_covers_is_invoiced_at_zero_and_spends_it_once(admin_api, tenant_a):
    make_priced_model()  # 0.88 per million input and output
    make_contract(tenant_a)
    make_promotion(tenant_a, "20.00", description="Trial credit")
    post_usage(admin_api, [usage_event("p1", "2026-03-03T00:00:00Z", 10 * M, 5 * M)])

    # 8.80 + 4.40 of usage, all of it covered by the credit: nothing due, but the ledger
    # must record the revenue and the credit spent.
    [march] = close_run(month_start=MARCH).issued
    assert line_amounts(march) == [
        ("usage", Decimal("8.80")),
        ("usage", Decimal("4.40")),
        ("promotion", Decimal("-13.20")),
    ]
    assert (march.total, march.status) == (Decimal("0.00"), "paid")  # nothing due
    assert march.paid_at == march.issued_at
    balances = account_balances()
    assert balances[("revenue:llama-70b", "USD")] == Decimal("-13.20")
    assert balances[("expense:promotions", "USD")] == Decimal("13.20")

    # April: the 6.80 left of the credit, not 20.00 again.
    post_usage(admin_api, [usage_event("p2", "2026-04-03T00:00:00Z", 10 * M)])
    [april] = close_run(month_start=APRIL).issued
    assert line_amounts(april) == [
        ("usage", Decimal("8.80")),
        ("promotion", Decimal("-6.80")),
    ]
    assert april.total == Decimal("2.00")


def test_late_usage_is_billed_without_credits_so_none_is_spent_past_its_amount(admin_api, tenant_a):
    make_priced_model()  # 0.88 per million input and output
    make_contract(tenant_a)
    credit = make_promotion(tenant_a, "12.00")
    post_usage(admin_api, [usage_event("c1", "2026-03-03T00:00:00Z", 10 * M)])
    [march] = close_run(month_start=MARCH).issued  # 8.80 of usage, all of it credited
    assert march.total == Decimal("0.00")

    # Late March usage (4.40) and April usage (8.80): the credit has 3.20 left.
    late = usage_event("c2", "2026-03-20T00:00:00Z", 5 * M)
    post_usage(admin_api, [late, usage_event("c3", "2026-04-03T00:00:00Z", 10 * M)])
    [april] = close_run(month_start=APRIL).issued

    assert line_amounts(april) == [
        ("usage", Decimal("8.80")),
        ("promotion", Decimal("-3.20")),
        ("adjustment", Decimal("4.40")),  # March re-rated: the late usage, no credit
    ]
    assert april.total == Decimal("10.00")
    assert sum(use.amount for use in credit.uses.all()) == Decimal("12.00")


def test_committed_minimum_bills_the_shortfall(admin_api, tenant_a):
    make_priced_model()
    make_march_usage(admin_api, tenant_a, "m1", committed_minimum=Decimal("100.00"))

    [invoice] = close_run(month_start=MARCH).issued

    # 8.80 + 8.80 of usage; the shortfall to 100.00 is 82.40.
    assert line_amounts(invoice) == [
        ("usage", Decimal("8.80")),
        ("usage", Decimal("8.80")),
        ("minimum", Decimal("82.40")),
    ]
    assert invoice.total == Decimal("100.00")


def test_trial_internal_and_free_tenants_get_no_invoice(admin_api, tenant_a, tenant_b, make_user):
    make_priced_model()
    make_march_usage(admin_api, tenant_a, "t1", kind="trial")
    make_march_usage(admin_api, tenant_b, "t2", free_tokens_per_month=100 * M)

    run = close_run(month_start=MARCH)

    assert run.issued == []
    assert sorted(run.nothing_due) == ["tenant-a", "tenant-b"]


def test_missing_price_is_an_error_naming_the_model(admin_api, tenant_a):
    make_priced_model()
    make_priced_model(model="qwen-32b", prices=("0.10", "0.05", "0.30"))
    make_contract(tenant_a)
    from billing.models import Price

    Price.objects.filter(model__slug="qwen-32b", token_class="output").delete()
    post_usage(
        admin_api,
        [{"id": "q1", "time": "2026-03-03T00:00:00Z", "input_tokens": 10, "output_tokens": 10}],
        model="qwen-32b",
    )

    run = close_run(month_start=MARCH)

    assert run.issued == []
    assert "qwen-32b" in run.errors["tenant-a"]
    assert "output" in run.errors["tenant-a"]
    assert InvoiceLine.objects.count() == 0


def test_invoice_command_folds_pending_and_reports(admin_api, tenant_a, march_terms, capsys):
    admin_api.post(
        "/api/v1/usage/events",
        [{"tenant": "tenant-a", "model": "llama-70b", **e} for e in MARCH_EVENTS],
    )  # not folded: the command folds it

    call_command("invoice", "--month", "2026-03")

    out = capsys.readouterr().out
    assert "1 invoices issued" in out
    assert "268.40 USD" in out
    assert Invoice.objects.get().total == Decimal("268.40")


@on_every_clock
def test_a_month_not_over_is_not_invoiced(now, admin_api, tenant_a, march_terms):
    this_month = now.strftime("%Y-%m")

    with pytest.raises(CommandError, match=f"{this_month} is not over yet"):
        call_command("invoice", "--month", this_month)
    assert not Invoice.objects.exists()


def test_an_invoice_says_who_pays_whom_by_when_and_why_a_line_is_cheaper(
    admin_api, tenant_a, march_terms, client, users, settings
):
    """The issued March invoice: the issuer's and the customer's billing names and
    addresses, due 15 days after issue (the contract's terms), and each usage line labelled
    with the discounts that priced it: the contract's 10%, and the 20% volume tier reached
    at 300 M tokens on the lines at 28%."""
    settings.FACTORY_NAME, settings.FACTORY_ADDRESS = "Acme Token Works", "1 Fab Road\nGPU City"
    tenant_a.billing_name, tenant_a.billing_address = "Tenant A Ltd", "9 Client Street\nTown"
    tenant_a.save()
    make_contract(tenant_a, effective_from=datetime(2026, 3, 1, tzinfo=UTC), discount_pct=Decimal(10),
                  free_tokens_per_month=100 * M, payment_terms_days=15,
                  volume_tiers=[{"from_tokens": 300 * M, "discount_pct": "20"}])  # fmt: skip
    post_usage(admin_api, MARCH_EVENTS)

    [invoice] = close_run(month_start=MARCH).issued
    client.force_login(users["finance"])
    page = client.get(f"/billing/invoices/{invoice.pk}/").content.decode()
    rows = client.get("/billing/invoices/?format=csv").content.decode().splitlines()

    assert (invoice.due_at - invoice.issued_at).days == 15
    assert _usage_lines(invoice) == MARCH_LINES  # the figures are unchanged
    descriptions = list(invoice.lines.filter(kind="usage").values_list("description", flat=True))
    assert descriptions[0] == "llama-70b input tokens at 0.88 per million, contract discount 10%"
    assert descriptions[1] == (
        "llama-70b input tokens at 0.88 per million, contract discount 10%,"
        " volume tier ≥ 300.0 M tokens: −20% (28% off in all)"
    )
    for shown in ("Acme Token Works", "1 Fab Road<br>GPU City", "Tenant A Ltd",
                  "9 Client Street<br>Town", f"{invoice.due_at:%-d %b %Y}", "net 15 days",
                  "volume tier ≥ 300.0 M tokens: −20%"):  # fmt: skip
        assert shown in page, shown
    assert rows[0].endswith(",issued_at,due_at,paid_at,is_overdue")
    assert rows[1].endswith(f"{invoice.due_at.isoformat()},,false")  # not paid, not due yet


def test_an_invoice_prices_reasoning_at_output_until_it_has_its_own_price(
    users, token_client, tenant_a, client
):
    """Ingested usage with token classes, hand-computed: cache writes at their own 1.10;
    reasoning at output's 0.88 until reasoning gets 1.76 from 16 March, then at its own."""
    model = make_priced_model()  # input 0.88, cached input 0.44, output 0.88
    for token_class, price, start in (
        ("cache_write", "1.10", MARCH),
        ("reasoning", "1.76", datetime(2026, 3, 16, tzinfo=UTC)),
    ):
        price_create(model=model, token_class=token_class, per_million=Decimal(price),
                     currency="USD", effective_from=start)  # fmt: skip
    make_contract(tenant_a)
    api = token_client(users["operator"], scopes=["ingest", "read"])
    post_usage(api, [
        {"id": "e1", "time": "2026-03-05T10:00:00Z", "input_tokens": 2 * M,
         "cached_tokens": M // 2, "cache_write_tokens": M, "output_tokens": M,
         "reasoning_tokens": 400_000},
        {"id": "e2", "time": "2026-03-20T10:00:00Z", "input_tokens": 0,
         "output_tokens": M // 2, "reasoning_tokens": M // 2},
    ])  # fmt: skip

    [invoice] = close_run(month_start=MARCH).issued

    body = api.get(f"/api/v1/invoices/{invoice.pk}").json()
    assert [
        (line["token_class"], line["price_class"], line["quantity"], line["amount"])
        for line in body["lines"]
    ] == [
        ("input", "input", 500_000, "0.4400"),
        ("cached_input", "cached_input", 500_000, "0.2200"),
        ("cache_write", "cache_write", 1_000_000, "1.1000"),
        ("output", "output", 600_000, "0.5300"),  # 0.528
        ("reasoning", "output", 400_000, "0.3500"),  # 0.352, at output's price
        ("reasoning", "reasoning", 500_000, "0.8800"),
    ]
    assert body["total"] == "3.5200"
    assert "(priced as output)" in body["lines"][4]["description"]
    client.force_login(users["finance"])
    assert (
        "reasoning tokens at 0.88 per million (priced as output)"
        in client.get(f"/billing/invoices/{invoice.pk}/").content.decode()
    )
