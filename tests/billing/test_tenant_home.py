"""A tenant's home (ui.md): its month to date (amount due so far, allowance used), its
contract and prices in force, all from billing's read models, the same figures as its
budget.

The world: now is 16 December 2026 10:00 UTC. Tenant A's paid contract: 10% off, 5 M free
tokens a month, a committed minimum of 100.00, and a 1.00 promotional credit from 1
December. On 3 December it used 2 M input and 3 M output tokens at 00:00 (the allowance,
exactly) and 10 M input and 10 M output at 01:00, at 0.88 per million each:
list 17.60, discount 1.76, usage 15.84, credit 1.00, due so far 14.84."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.selectors.month_to_date import month_to_date
from billing.selectors.pricing import contract_in_force, tenant_prices
from billing.services.invoices.draft import invoice_draft
from tests.billing.factories import M, make_contract, make_priced_model, make_promotion, post_usage

pytestmark = pytest.mark.both_backends

DECEMBER = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def december(admin_api, tenant_a, now):
    make_priced_model()
    make_contract(
        tenant_a,
        discount_pct=Decimal(10),
        free_tokens_per_month=5 * M,
        committed_minimum=Decimal("100.00"),
    )
    make_promotion(tenant_a, "1.00", effective_from=DECEMBER)
    post_usage(
        admin_api,
        [
            {"id": "free", "time": "2026-12-03T00:00:00Z", "input_tokens": 2 * M,
             "output_tokens": 3 * M},
            {"id": "paid", "time": "2026-12-03T01:00:00Z", "input_tokens": 10 * M,
             "output_tokens": 10 * M},
        ],
    )  # fmt: skip
    return tenant_a


def test_the_month_to_date_reads_the_rated_month_by_hand(december):
    month = month_to_date(tenant=december, month=DECEMBER)

    assert (month.list_value, month.discounts, month.promotions, month.amount_due) == (
        Decimal("17.60"),
        Decimal("1.76"),
        Decimal("1.00"),
        Decimal("14.84"),
    )
    assert month.list_value - month.discounts - month.promotions == month.amount_due
    assert (month.allowance_tokens, month.allowance_used, month.allowance_left) == (5 * M, 5 * M, 0)
    assert (month.currency, month.committed_minimum, month.error) == ("USD", Decimal("100"), "")


@pytest.mark.parametrize(
    ("second_hour", "used", "left"),
    [
        (0, 4 * M, 1 * M),  # within the allowance: 1 M left
        (2 * M, 5 * M, 0),  # 2 M more cross it: split, 1 M free and 1 M paid
    ],
)
def test_the_allowance_is_used_to_the_token_by_the_request_that_crosses_it(
    admin_api, tenant_a, now, second_hour, used, left
):
    make_priced_model()
    make_contract(tenant_a, free_tokens_per_month=5 * M)
    events = [{"id": "a", "time": "2026-12-03T00:00:00Z", "input_tokens": 2 * M,
               "output_tokens": 2 * M}]  # fmt: skip
    if second_hour:
        events.append({"id": "b", "time": "2026-12-03T01:00:00Z", "input_tokens": second_hour,
                       "output_tokens": 0})  # fmt: skip
    post_usage(admin_api, events)

    month = month_to_date(tenant=tenant_a, month=DECEMBER)

    assert (month.allowance_used, month.allowance_left) == (used, left)
    assert month.list_value == (Decimal("0.88") if second_hour else 0)  # 1 M × 0.88


def test_prices_in_force_carry_the_contracts_discount(december, now):
    prices = tenant_prices(contract=contract_in_force(tenant=december, when=now), at=now)

    assert [(p.price.model.slug, p.words, p.price.per_million, p.per_million) for p in prices] == [
        ("llama-70b", "input", Decimal("0.88"), Decimal("0.792")),
        ("llama-70b", "cached input", Decimal("0.44"), Decimal("0.396")),
        ("llama-70b", "output", Decimal("0.88"), Decimal("0.792")),
    ]


def test_the_home_shows_the_month_to_date_contract_and_prices_as_the_budget_reads_them(
    december, users, session_client
):
    client = session_client(users["tenant"])
    assert (
        client.post("/billing/budget/", {"amount": "20.00", "thresholds": "50"}).status_code == 302
    )

    home = client.get("/").content.decode()

    month = home[home.index('id="month-to-date"') : home.index('id="budget"')]
    for shown in (
        "December 2026 so far",
        "14.84",
        "17.60",
        "1.76 contract and volume discounts",
        "1.00 promotional credits",
        "of 5.0 M tokens this month",
        "100.00",
    ):
        assert shown in month, shown
    budget = home[home.index('id="budget"') :]
    assert "14.84" in budget  # the budget's spend is the amount due so far
    contract = home[home.index('id="contract"') :]
    for shown in (
        "10% off list prices",
        "5.0 M free tokens a month",
        "100.00 USD a month",
        "due 30 days after issue",
        "Uptime target 99.9%",
        "cached input",
        "0.792",
    ):
        assert shown in contract, shown
    assert "cached_input" not in home


def test_without_a_contract_the_home_says_so(tenant_a, users, session_client, now):
    home = session_client(users["tenant"]).get("/").content.decode()

    assert "No contract in force: usage is not billed" in home
    assert 'aria-label="Prices in force"' not in home


def test_an_invoice_shows_the_allowance_its_month_used(december, users, session_client):
    invoice, _ = invoice_draft(tenant=december, month_start=DECEMBER)
    client = session_client(users["tenant"])

    page = client.get(f"/billing/invoices/{invoice.pk}/").content.decode()

    assert "Free allowance: 5,000,000 of 5,000,000 tokens used this month, not billed." in page
    assert "llama-70b input tokens at 0.88 per million, contract discount 10%" in page
    assert "cached_input" not in page


def test_the_invoice_of_a_month_whose_allowance_ran_out_inside_an_event(
    admin_api, tenant_a, now, users, session_client
):
    """kpis.md section 3, "Boundaries": 1,000,000 free tokens; 600,000 on 3 December, then
    700,000 (input 400,000 with 100,000 cached, output 300,000) split 400,000 free and
    300,000 paid: 128,571 input, 42,857 cached, 128,572 output (the free part's classes by
    largest remainder: 171,429 / 57,143 / 171,428). At 0.88 / 0.44 / 0.88 per million, 10%
    off, each line rounded once, half-up:
    input 0.11314248 -> 0.11, amount 0.101828232 -> 0.10
    cached 0.01885708 -> 0.02, amount 0.016971372 -> 0.02
    output 0.11314336 -> 0.11, amount 0.101829024 -> 0.10; total 0.22."""
    make_priced_model()
    make_contract(tenant_a, discount_pct=Decimal(10), free_tokens_per_month=1 * M)
    post_usage(
        admin_api,
        [
            {"id": "first", "time": "2026-12-03T00:00:00Z", "input_tokens": 200_000,
             "output_tokens": 400_000},
            {"id": "second", "time": "2026-12-03T01:00:00Z", "input_tokens": 400_000,
             "cached_tokens": 100_000, "output_tokens": 300_000},
        ],
    )  # fmt: skip

    invoice, _ = invoice_draft(tenant=tenant_a, month_start=DECEMBER)

    assert invoice is not None
    assert [
        (line.token_class, line.quantity, line.list_amount, line.discount, line.amount)
        for line in invoice.lines.all()
    ] == [
        ("input", 128_571, Decimal("0.11"), Decimal("0.01"), Decimal("0.10")),
        ("cached_input", 42_857, Decimal("0.02"), Decimal("0.00"), Decimal("0.02")),
        ("output", 128_572, Decimal("0.11"), Decimal("0.01"), Decimal("0.10")),
    ]
    assert invoice.total == Decimal("0.22")
    page = session_client(users["tenant"]).get(f"/billing/invoices/{invoice.pk}/").content.decode()
    assert "Free allowance: 1,000,000 of 1,000,000 tokens used this month, not billed." in page
