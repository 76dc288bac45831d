"""Chargeback on the invoice basis (kpis.md 3e), computed by hand: a tenant with projects
alpha (1), beta (2), gamma (3) and its (none) (0); two usage lines, a reservation, a
promotion, a minimum shortfall, an SLA credit, and balances drawn (left out).

Usage line 1, input at 2.00 per million less 10 %: alpha 1,500,000 tokens (2.70), beta
1,000,000 (1.80), gamma 250,000 (0.45), (none) 5,000 (0.009); the line 2,755,000 tokens:
5.51 less 10 % = 4.959 → 4.96. Its 496 cents by largest remainder: quotas 270.05, 180.04,
45.01, 0.90 → 270, 180, 45, 0 and the one cent left to (none)'s 0.90.
Usage line 2, output at 4.00 less 10 %: alpha 500,000 (1.80), gamma 125,000 (0.45): 2.25.
Usage amounts: alpha 4.50, beta 1.80, gamma 0.90, (none) 0.01; 7.21 in all.
Reservation 7's line 10.00 by its covered list value alpha 3.00, beta 1.00: 7.50, 2.50;
reservation 8's 4.00 (another deployment, only gamma's usage covered there) to gamma.
Promotion -1.00 pro rata to usage: quotas 62.41, 24.97, 12.48, 0.14 cents → 62, 24, 12, 0
and 2 cents to the largest remainders (beta .97, gamma .48): -0.62, -0.25, -0.13, 0.
Minimum 3.79: quotas 236.55, 94.62, 47.31, 0.53 → 236, 94, 47, 0 and 2 cents (beta .62,
alpha .55; (none)'s .53 is third): 2.37, 0.95, 0.47, 0.00.
SLA credit -0.50: quotas 31.21, 12.48, 6.24, 0.07 → 31, 12, 6, 0 and 1 cent (beta): -0.31,
-0.13, -0.06, 0.
Invoice before balances: 7.21 + 10.00 + 4.00 - 1.00 + 3.79 - 0.50 = 23.50 = alpha 13.44
+ beta 4.87 + gamma 5.18 + (none) 0.01. Usage lines are keyed by tier too (kpis.md section
3): these are standard ones."""

from decimal import Decimal

from billing.domain.chargeback import Line, chargeback_split
from billing.domain.rating.types import TokenClass

D = Decimal
IN, OUT = TokenClass.INPUT, TokenClass.OUTPUT
TEN = (D(10), D(0), 0)  # contract 10 %, no tier
S = "standard"


def test_an_invoice_splits_to_the_cent_across_projects_by_line_kind():
    quantities = {
        ("m", S, IN, IN, D("2.00"), None, TEN, 1): 1_500_000,
        ("m", S, IN, IN, D("2.00"), None, TEN, 2): 1_000_000,
        ("m", S, IN, IN, D("2.00"), None, TEN, 3): 250_000,
        ("m", S, IN, IN, D("2.00"), None, TEN, 0): 5_000,
        ("m", S, OUT, OUT, D("4.00"), None, TEN, 1): 500_000,
        ("m", S, OUT, OUT, D("4.00"), None, TEN, 3): 125_000,
    }
    usage = {"kind": "usage", "model": "m", "discount_pct": D("10.000000")}
    lines = [
        Line(**usage, token_class="input", price_class="input",
             list_unit_price=D("2.0000000000"), amount=D("4.96")),
        Line(**usage, token_class="output", price_class="output",
             list_unit_price=D("4.0000000000"), amount=D("2.25")),
        Line(kind="reservation", amount=D("10.00"), reservation=7),
        Line(kind="reservation", amount=D("4.00"), reservation=8),
        Line(kind="promotion", amount=D("-1.00")),
        Line(kind="minimum", amount=D("3.79")),
        Line(kind="sla_credit", amount=D("-0.50")),
        Line(kind="credit", amount=D("-5.00")),
        Line(kind="prepaid", amount=D("-2.00")),
    ]  # fmt: skip

    covered = {7: {1: D("3.00"), 2: D("1.00")}, 8: {3: D("0.60")}}
    charges = chargeback_split(lines=lines, quantities=quantities, covered=covered, currency="USD")

    assert {p: dict(c.by_kind) for p, c in charges.items()} == {
        0: {"usage": D("0.01"), "promotion": D("0"), "minimum": D("0"), "sla_credit": D("0")},
        1: {"usage": D("4.50"), "reservation": D("7.50"), "promotion": D("-0.62"),
            "minimum": D("2.37"), "sla_credit": D("-0.31")},
        2: {"usage": D("1.80"), "reservation": D("2.50"), "promotion": D("-0.25"),
            "minimum": D("0.95"), "sla_credit": D("-0.13")},
        3: {"usage": D("0.90"), "reservation": D("4.00"), "promotion": D("-0.13"),
            "minimum": D("0.47"), "sla_credit": D("-0.06")},
    }  # fmt: skip
    assert [charges[p].total for p in (1, 2, 3, 0)] == [D("13.44"), D("4.87"), D("5.18"), D("0.01")]
    assert sum(c.total for c in charges.values()) == D("23.50")  # the invoice before balances


def test_a_line_with_nothing_to_split_it_by_is_the_nones():
    charges = chargeback_split(
        lines=[Line(kind="minimum", amount=D("50.00"))], quantities={}, currency="USD"
    )
    assert {p: dict(c.by_kind) for p, c in charges.items()} == {0: {"minimum": D("50.00")}}
