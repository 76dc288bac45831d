"""Money: currency minor units, the one rounding mode (half-up, half away from zero), and
exact Decimal arithmetic. Every amount the portal shows, stores rounded, sends as JSON or
exports is rounded here and nowhere else. Pure Python: the engines may import it."""

from __future__ import annotations

from decimal import (
    ROUND_DOWN,
    ROUND_HALF_UP,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
)
from fractions import Fraction

# ISO 4217 minor-unit exponents of the currencies a factory may bill in.
CURRENCY_EXPONENTS: dict[str, int] = {
    "USD": 2,
    "EUR": 2,
    "GBP": 2,
    "CHF": 2,
    "CAD": 2,
    "AUD": 2,
    "CNY": 2,
    "SGD": 2,
    "INR": 2,
    "JPY": 0,
    "KRW": 0,
    "KWD": 3,
    "BHD": 3,
}

# Sums and products of list values are exact: a lost digit raises instead of rounding.
EXACT = Context(
    prec=200,
    traps=[InvalidOperation, DivisionByZero, Overflow, Inexact],
)

# Pro rata shares are exact fractions; shown as Decimal they keep this many significant
# digits, truncated so that no share ever exceeds what it was taken from.
PRO_RATA = Context(prec=60, rounding=ROUND_DOWN, traps=[InvalidOperation, DivisionByZero, Overflow])

_ROUNDING = Context(prec=200, traps=[InvalidOperation, DivisionByZero, Overflow])

MILLION = Decimal(10) ** 6


def fraction_to_decimal(value: Fraction) -> Decimal:
    """Exact when the fraction is a decimal of at most 60 digits, else truncated to 60."""
    return PRO_RATA.divide(Decimal(value.numerator), Decimal(value.denominator))


def minor_unit(*, currency: str) -> Decimal:
    """The currency's smallest unit as a quantum, e.g. Decimal('0.01') for USD."""
    try:
        exponent = CURRENCY_EXPONENTS[currency]
    except KeyError:
        raise ValueError(f"unknown currency {currency!r}: add it to CURRENCY_EXPONENTS") from None
    return Decimal(1).scaleb(-exponent)


def round_half_up(*, amount: Decimal, quantum: Decimal) -> Decimal:
    """Round half-up (half away from zero) to `quantum`: the one rounding mode of money,
    also for amounts finer than a cent (unit prices per million tokens)."""
    return amount.quantize(quantum, rounding=ROUND_HALF_UP, context=_ROUNDING)


def round_money(*, amount: Decimal, currency: str) -> Decimal:
    """Round half-up (half away from zero) to the currency's minor unit: 0.005 -> 0.01."""
    return round_half_up(amount=amount, quantum=minor_unit(currency=currency))


def round_money_whole(*, amount: Decimal, currency: str) -> Decimal:
    """Whole units for summaries, from the amount rounded to the cent (as every amount is
    first): 100.495 -> 100.50 -> 101, so a page in units agrees with one in cents."""
    return round_half_up(amount=round_money(amount=amount, currency=currency), quantum=Decimal(1))


def money_str(*, amount: Decimal | None, currency: str) -> str | None:
    """An amount as JSON carries it: a decimal string in the currency's minor unit."""
    return None if amount is None else str(round_money(amount=amount, currency=currency))


def is_rounded(*, amount: Decimal, currency: str) -> bool:
    return amount == round_money(amount=amount, currency=currency)
