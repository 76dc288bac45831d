"""Invoice lines of a rated month (kpis.md section 3, "Invoices").

A usage line sums paid quantities per (model, token class, list unit price, combined
discount %); its list_amount and amount are computed exactly from the quantity and
rounded once, half-up; discount = list_amount - amount. The total is the sum of the
rounded lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal, localcontext

from billing.domain.rating.types import (
    InvoiceLine,
    LineKind,
    PromotionalCredit,
    RatedItem,
    TokenClass,
    month_bounds,
    total_discount_pct,
)
from portal.formatting import decimal_plain, tokens_short
from portal.money import EXACT, MILLION, is_rounded, round_money

ZERO = Decimal(0)

_CLASS_ORDER = {token_class: index for index, token_class in enumerate(TokenClass)}


def usage_lines(*, items: Iterable[RatedItem], currency: str) -> list[InvoiceLine]:
    """One usage line per (model, token class, list unit price, combined discount %)."""
    quantities: dict[tuple, int] = {}
    for rated in items:
        if not rated.is_paid:
            continue
        discounts = (rated.contract_discount_pct, rated.tier_discount_pct, rated.tier_from_tokens)
        for charge in rated.charges:
            key = (rated.item.model, charge.token_class, charge.list_unit_price, discounts)
            quantities[key] = quantities.get(key, 0) + charge.quantity
    lines = []
    for (model, token_class, unit_price, discounts), quantity in sorted(
        quantities.items(),
        key=lambda kv: (kv[0][0], _CLASS_ORDER[kv[0][1]], kv[0][2], kv[0][3][1], kv[0][3][0]),
    ):
        contract_pct, tier_pct, tier_from = discounts
        pct = total_discount_pct(contract=contract_pct, tier=tier_pct)
        with localcontext(EXACT):
            list_exact = quantity * unit_price / MILLION
            amount_exact = list_exact * (Decimal(100) - pct) / Decimal(100)
        list_amount = round_money(amount=list_exact, currency=currency)
        amount = round_money(amount=amount_exact, currency=currency)
        description = f"{model} {token_class} tokens at {decimal_plain(unit_price)} per million"
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
                quantity=quantity,
                list_unit_price=unit_price,
                list_amount=list_amount,
                discount=list_amount - amount,
                amount=amount,
                discount_pct=pct,
                description=description,
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
