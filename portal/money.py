"""Money: currency minor units, the one rounding mode (half-up, half away from zero), and
exact Decimal arithmetic. Every amount the portal shows, stores rounded, sends as JSON or
exports is rounded here and nowhere else. Pure Python: the engines may import it."""

from __future__ import annotations

import re
from collections.abc import Mapping
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
from math import lcm
from typing import TypeVar

from portal.errors import FieldError

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

K = TypeVar("K")


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


def currency_places(currency: str) -> int:
    """The decimal places a money input in `currency` may have: its minor unit's."""
    return -minor_unit(currency=currency).as_tuple().exponent


def is_rounded(*, amount: Decimal, currency: str) -> bool:
    return amount == round_money(amount=amount, currency=currency)


# Every money input (amounts, prices, costs, budgets) is at most this, and has at most
# MONEY_PLACES decimal places (UNIT_PRICE_PLACES for unit prices: per million tokens, per kWh).
MONEY_MAXIMUM = Decimal(10) ** 12
MONEY_PLACES = 2
UNIT_PRICE_PLACES = 4
UNIT_PRICE_MAXIMUM = Decimal(10) ** 9  # stored with 10 places under 10^10
_PLAIN_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?\Z", re.ASCII)


def money_parse(
    value: object,
    *,
    field: str,
    places: int = MONEY_PLACES,
    positive: bool = False,
    signed: bool = False,
    maximum: Decimal = MONEY_MAXIMUM,
) -> Decimal:
    """A money input as a Decimal: a plain decimal (ASCII digits, an optional sign and point:
    no exponent, Infinity or NaN; a JSON number as written) of at most `places` decimal
    places, from 0 (above 0 when `positive`; from -`maximum` when `signed`) up to `maximum`
    (MONEY_MAXIMUM; UNIT_PRICE_MAXIMUM for unit prices); else a FieldError naming `field`."""
    plain = isinstance(value, (str, int, float, Decimal)) and not isinstance(value, bool)
    text = str(value).strip() if plain else ""
    if not _PLAIN_DECIMAL.match(text):
        raise FieldError(field, 'must be a decimal amount written plainly, e.g. "1250.00"')
    amount = Decimal(text)
    if amount != amount.quantize(Decimal(1).scaleb(-places), context=_ROUNDING):
        raise FieldError(field, f"must have at most {places} decimal places")
    if positive and amount <= 0:
        raise FieldError(field, "must be above 0")
    if amount < 0 and not signed:
        raise FieldError(field, "must not be negative")
    if abs(amount) > maximum:
        raise FieldError(field, f"must be at most {maximum:f} (10^{maximum.adjusted()})")
    return amount


def apportion(weights: Mapping[K, int | Fraction | Decimal], units: int) -> dict[K, int]:
    """`units` allocated across the keys in proportion to `weights` (none negative; some
    positive when there are units) by largest remainder: each key its quota's whole part,
    then one more unit to each key of the largest remainders until none is left, a tie to
    the key listed first (the weights' order). The token classes of a split event, and the
    cents of a chargeback (kpis.md 3e). Exact, in integers: the weights over their common
    denominator, each quota's whole part and remainder by one division (a chargeback splits
    thousands of lines; Fractions cost it a second)."""
    ratios = [weight.as_integer_ratio() for weight in weights.values()]
    common = lcm(*(denominator for _, denominator in ratios)) if ratios else 1
    scaled = [numerator * (common // denominator) for numerator, denominator in ratios]
    total = sum(scaled)
    if units < 0 or any(w < 0 for w in scaled) or (units and not total):
        raise ValueError(
            f"cannot apportion {units} units by weights summing to {Fraction(total, common)}"
        )
    allocated, remainders = {}, {}
    for key, weight in zip(weights, scaled, strict=True):
        allocated[key], remainders[key] = divmod(units * weight, total) if total else (0, 0)
    left = units - sum(allocated.values())
    # sorted() is stable: among equal remainders the key listed first comes first
    for key in sorted(remainders, key=lambda key: -remainders[key])[:left]:
        allocated[key] += 1
    return allocated


def split_money(
    *, amount: Decimal, weights: Mapping[K, int | Fraction | Decimal], currency: str
) -> dict[K, Decimal]:
    """A rounded amount (of either sign) split across the keys in proportion to `weights`,
    to the minor unit by largest remainder (`apportion`): the parts sum to it exactly."""
    quantum = minor_unit(currency=currency)
    units = int(round_money(amount=amount, currency=currency) / quantum)
    sign = -1 if units < 0 else 1
    return {key: sign * part * quantum for key, part in apportion(weights, abs(units)).items()}
