"""Invoice lines of a rated month (kpis.md section 3, "Invoices").

A usage line sums paid quantities on demand per (model, service tier, token class, price
class, list unit price, combined discount %), every project's; its list_amount and amount
are computed exactly from the quantity and rounded once, half-up; discount = list_amount -
amount. The total is the sum of the rounded lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, localcontext
from fractions import Fraction

from billing.domain.rating.types import (
    ContractKind,
    ContractVersion,
    InvoiceLine,
    LineKind,
    PromotionalCredit,
    PromotionApplication,
    RatedItem,
    RatingError,
    TokenClass,
    month_bounds,
    total_discount_pct,
)
from metering.domain.usage.fields import SERVICE_TIERS, STANDARD
from portal.formatting import decimal_plain, tokens_short
from portal.money import EXACT, MILLION, fraction_to_decimal, is_rounded, round_money

ZERO = Decimal(0)

_CLASS_ORDER = {token_class: index for index, token_class in enumerate(TokenClass)}


# (model, service tier, token class, price class, list unit price, tier multiplier or None,
#  (contract %, tier %, tier from), project): a usage line is one per key but its project
# (the projects' shares of it are what a chargeback splits it by, kpis.md 3e).
LineKey = tuple

# The kinds of line a month's usage invoice bills from its rating (the others are
# adjustments, credits and draws of balances).
BILLED_KINDS = (LineKind.USAGE, LineKind.RESERVATION, LineKind.PROMOTION, LineKind.MINIMUM)
# The lines an SLA credit (kpis.md 3b) and a committed minimum are measured against.
BASE_KINDS = (LineKind.USAGE, LineKind.RESERVATION)
_TIER_ORDER = {tier: index for index, tier in enumerate(SERVICE_TIERS)}


class InvoiceError(Exception):
    """An invoice operation that the invoice's state does not allow; the API answers it
    naming `status`."""

    http_status = 400

    def api_errors(self) -> list[dict]:
        return [{"field": "status", "message": str(self)}]


class InvoiceConflict(InvoiceError):
    """A transition the invoice's state no longer allows (finalizing past draft, paying or
    voiding what is not issued): a 409, so a retried request learns the invoice's state
    instead of being told it succeeded."""

    http_status = 409


def line_quantities(
    *, items: Iterable[RatedItem], into: dict[LineKey, int] | None = None
) -> dict[LineKey, int]:
    """The paid quantities of the items on demand per usage line and project: (model,
    service tier, token class, the class whose price was used, list unit price, the tier's
    multiplier when the price is the standard one's times it, (contract discount %, tier
    discount %, the tier's threshold), project id), added to `into`. Covered items are on no
    usage line (their price is the reservation's fee)."""
    quantities: dict[LineKey, int] = {} if into is None else into
    for rated in items:
        if not rated.is_paid or rated.covered:
            continue
        discounts = (rated.contract_discount_pct, rated.tier_discount_pct, rated.tier_from_tokens)
        model, tier, project = rated.item.model, rated.item.service_tier, rated.item.project
        for charge in rated.charges:
            key = (
                model, tier, charge.token_class, charge.price_class, charge.list_unit_price,
                charge.multiplier, discounts, project,
            )  # fmt: skip
            quantities[key] = quantities.get(key, 0) + charge.quantity
    return quantities


def line_of_key(key: LineKey) -> LineKey:
    """The usage line a key's quantity is billed on: the key but its project."""
    return key[:7]


def line_realized(key: LineKey, quantity: int) -> Decimal:
    """A quantity's amount on its usage line before rounding: quantity × list unit price ÷
    10^6 less the line's combined discount, exact."""
    _, _, _, _, unit_price, _, (contract_pct, tier_pct, _) = key[:7]
    pct = total_discount_pct(contract=contract_pct, tier=tier_pct)
    with localcontext(EXACT):
        return quantity * unit_price / MILLION * (Decimal(100) - pct) / Decimal(100)


def usage_lines(*, items: Iterable[RatedItem], currency: str) -> list[InvoiceLine]:
    """One usage line per (model, service tier, token class, price class, list unit price,
    multiplier, combined discount %)."""
    return quantity_lines(quantities=line_quantities(items=items), currency=currency)


def _line_order(entry: tuple[LineKey, int]) -> tuple:
    model, tier, token_class, price_class, unit_price, _, discounts = entry[0]
    contract_pct, tier_pct, _ = discounts
    return (
        model, _TIER_ORDER[tier], _CLASS_ORDER[token_class], _CLASS_ORDER[price_class],
        unit_price, tier_pct, contract_pct,
    )  # fmt: skip


def quantity_lines(*, quantities: dict[LineKey, int], currency: str) -> list[InvoiceLine]:
    """The usage lines of paid quantities per line key (line_quantities: each line the sum
    of its projects'), in invoice order."""
    lines = []
    merged: dict[LineKey, int] = {}
    for key, quantity in quantities.items():
        line = line_of_key(key)
        merged[line] = merged.get(line, 0) + quantity
    for key, quantity in sorted(merged.items(), key=_line_order):
        model, tier, token_class, price_class, unit_price, multiplier, discounts = key
        contract_pct, tier_pct, tier_from = discounts
        pct = total_discount_pct(contract=contract_pct, tier=tier_pct)
        with localcontext(EXACT):
            list_exact = quantity * unit_price / MILLION
        list_amount = round_money(amount=list_exact, currency=currency)
        amount = round_money(amount=line_realized(key, quantity), currency=currency)
        served = "" if tier == STANDARD else f" {tier}"
        description = (
            f"{model}{served} {TokenClass(token_class).words} tokens at "
            f"{decimal_plain(unit_price)} per million"
        )
        if multiplier is not None:
            description += f" (standard × {decimal_plain(multiplier)})"
        if price_class != token_class:
            description += f" (priced as {TokenClass(price_class).words})"
        if contract_pct:
            description += f", contract discount {decimal_plain(contract_pct)}%"
        if tier_pct:
            description += (
                f", volume tier ≥ {tokens_short(tier_from)} tokens: −{decimal_plain(tier_pct)}%"
            )
        if contract_pct and tier_pct:
            description += f" ({decimal_plain(pct)}% off in all)"
        lines.append(
            InvoiceLine(
                kind=LineKind.USAGE,
                model=model,
                token_class=token_class,
                price_class=price_class,
                quantity=quantity,
                list_unit_price=unit_price,
                list_amount=list_amount,
                discount=list_amount - amount,
                amount=amount,
                discount_pct=pct,
                description=description,
                service_tier=tier,
            )
        )
    return lines


def promotion_lines(
    *,
    applied: Sequence[tuple[PromotionalCredit, Decimal]],
    usage_total: Decimal,
    currency: str,
) -> tuple[list[InvoiceLine], list[Decimal]]:
    """One negative line per credit used, each rounded once; never below a zero total.

    Returns the lines and, per applied credit, the rounded amount billed against it
    (0 when it rounds away), in the order of `applied`.
    """
    lines = []
    billed = []
    left = usage_total
    for credit, amount in applied:
        bill = min(round_money(amount=amount, currency=currency), max(left, ZERO))
        billed.append(bill)
        if bill == 0:
            continue
        left -= bill
        lines.append(
            InvoiceLine(
                kind=LineKind.PROMOTION,
                list_amount=round_money(amount=ZERO, currency=currency),
                discount=bill,
                amount=-bill,
                description=credit.description or f"Promotional credit {credit.id}",
            )
        )
    return lines, billed


@dataclass(frozen=True)
class MonthLines:
    """A month's lines once its usage lines and the credits it applied are known."""

    lines: tuple[InvoiceLine, ...]  # usage, reservation, promotion, minimum
    promotions: tuple[PromotionApplication, ...]
    promoted: Fraction  # the credits applied, exact
    minimum_shortfall: Decimal  # rounded
    usage_amount: Decimal  # the usage and reservation lines' total: the SLA credit base
    total: Decimal  # every line's


def month_lines(
    *,
    usage: Sequence[InvoiceLine],
    applied: Sequence[tuple[PromotionalCredit, Fraction]],
    opening: ContractVersion | None,
    currency: str,
    reserved: Sequence[InvoiceLine] = (),
) -> MonthLines:
    """The month's usage lines, its reservations' lines (`reserved`), then a promotion line
    per credit applied (`applied`, exact amounts; never more than the usage lines: promotions
    never apply to fees), then the shortfall of the committed minimum of the contract in
    force at the month's start (paid contracts only), measured as the SLA credit base is:
    against the usage and reservation lines."""
    usage_total = invoice_total(lines=usage)
    base_total = usage_total + invoice_total(lines=reserved)
    promo_lines, billed = promotion_lines(
        applied=[(credit, fraction_to_decimal(amount)) for credit, amount in applied],
        usage_total=usage_total,
        currency=currency,
    )
    lines = [*usage, *reserved, *promo_lines]
    minimum = None
    if opening is not None and opening.kind == ContractKind.PAID and opening.committed_minimum > 0:
        if opening.currency != currency:
            raise RatingError(
                f"committed minimum is in {opening.currency}, the invoice in {currency}"
            )
        minimum = minimum_line(
            committed_minimum=opening.committed_minimum, usage_total=base_total, currency=currency
        )
    if minimum is not None:
        lines.append(minimum)
    return MonthLines(
        lines=tuple(lines),
        promotions=tuple(
            PromotionApplication(
                credit_id=credit.id,
                applied_amount=fraction_to_decimal(amount),
                billed_amount=bill,
            )
            for (credit, amount), bill in zip(applied, billed, strict=True)
        ),
        promoted=sum((amount for _, amount in applied), Fraction(0)),
        minimum_shortfall=(
            minimum.amount if minimum is not None else round_money(amount=ZERO, currency=currency)
        ),
        usage_amount=base_total,
        total=round_money(amount=invoice_total(lines=lines), currency=currency),
    )


def minimum_line(
    *, committed_minimum: Decimal, usage_total: Decimal, currency: str
) -> InvoiceLine | None:
    """The committed minimum's shortfall over the usage lines' total, or None if met."""
    shortfall = round_money(amount=committed_minimum - usage_total, currency=currency)
    if shortfall <= 0:
        return None
    return InvoiceLine(
        kind=LineKind.MINIMUM,
        list_amount=shortfall,
        discount=round_money(amount=ZERO, currency=currency),
        amount=shortfall,
        description=(f"Committed minimum {decimal_plain(committed_minimum)} {currency}: shortfall"),
    )


def invoice_total(*, lines: Iterable[InvoiceLine]) -> Decimal:
    """Sum of the (already rounded) line amounts."""
    with localcontext(EXACT):
        return sum((line.amount for line in lines), ZERO)


def adjustment_line(
    *,
    month_start: datetime,
    invoiced_lines: Sequence[InvoiceLine],
    rerated_lines: Sequence[InvoiceLine],
    currency: str,
) -> InvoiceLine | None:
    """The difference between a month's re-rating and what was invoiced for it, or None.

    `invoiced_lines` are every line billed for that month so far: its invoice's usage,
    promotion and minimum lines plus earlier adjustment lines for the month.
    `rerated_lines` are the lines of the month rated again with every event now known.
    The line may be negative; it goes on the next invoice.
    """
    start, _ = month_bounds(month_start=month_start)
    for line in (*invoiced_lines, *rerated_lines):
        if line.kind == LineKind.SLA_CREDIT:
            raise ValueError("sla_credit lines are not part of a month's rating")
        for value in (line.list_amount, line.discount, line.amount):
            if not is_rounded(amount=value, currency=currency):
                raise ValueError(f"line amount {value} is not rounded to {currency}'s minor unit")
    with localcontext(EXACT):
        list_delta = sum((line.list_amount for line in rerated_lines), ZERO) - sum(
            (line.list_amount for line in invoiced_lines), ZERO
        )
        amount_delta = invoice_total(lines=rerated_lines) - invoice_total(lines=invoiced_lines)
    if amount_delta == 0 and list_delta == 0:
        return None
    return InvoiceLine(
        kind=LineKind.ADJUSTMENT,
        list_amount=list_delta,
        discount=list_delta - amount_delta,
        amount=amount_delta,
        description=f"Adjustment for {start:%Y-%m}: usage re-rated with late events",
    )
