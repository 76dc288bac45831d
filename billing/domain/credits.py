"""SLA credits as contracts set them (kpis.md §3b): the credit tiers, the percent an uptime
earns, the SLA target, and the amount on a month's usage. metering computes the uptime;
billing owns the contract terms and the money."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

from portal.money import round_money

# (uptime below, credit percent): 10 means 10% of the month's usage lines.
CreditTiers = Sequence[tuple[Decimal, Decimal]]


DEFAULT_CREDIT_TIERS: tuple[tuple[Decimal, Decimal], ...] = (
    (Decimal("0.999"), Decimal(10)),
    (Decimal("0.99"), Decimal(25)),
    (Decimal("0.95"), Decimal(100)),
)


def _fraction(value: Decimal | Fraction | int | float) -> Fraction:
    # A float threshold is read as written (0.999 -> 999/1000), not as its binary value.
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def credit_pct_for(
    *, uptime: Fraction | Decimal | None, tiers: CreditTiers = DEFAULT_CREDIT_TIERS
) -> Decimal:
    """Credit percent: the highest percent whose threshold uptime is strictly below; else 0."""
    if uptime is None:
        return Decimal(0)
    matching = [
        Decimal(pct) for threshold, pct in tiers if _fraction(uptime) < _fraction(threshold)
    ]
    return max(matching, default=Decimal(0))


def target_of(*, tiers: CreditTiers = DEFAULT_CREDIT_TIERS) -> Decimal | None:
    """The SLA target: the highest threshold of the credit tiers (None without tiers)."""
    return max((Decimal(threshold) for threshold, _ in tiers), default=None)


def credit_amount(
    *, credit_pct: Decimal, billed_usage_amount: Decimal, currency: str = "USD"
) -> Decimal:
    """credit_pct / 100 x the month's usage lines (after discounts, before promotions),
    rounded to the currency's minor unit."""
    return round_money(amount=credit_pct * billed_usage_amount / 100, currency=currency)
