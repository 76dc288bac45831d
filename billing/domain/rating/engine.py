"""Rate one tenant's one UTC month (kpis.md section 3): paid-ness, list value, realized amount.

Decisions where kpis.md is silent:
- The contract in force at an item's time decides its kind (paid-ness) and its
  discount and volume tiers; no contract in force gives the reason ``no_contract``.
- The allowance is ``free_tokens_per_month`` of the contract in force at the month's
  start (none in force: 0). Every item of the month consumes it in rating order,
  whatever its contract's kind; trial, internal and no_contract reasons take
  precedence over ``allowance``.
- Volume tiers count paid tokens only; an item gets the tier with the greatest
  ``from_tokens`` <= the running total including it (0% below the first tier).
- The committed minimum is that of the contract in force at the month's start when
  it is ``paid``; it is measured against the usage lines (after discounts and tiers,
  before promotions, as the SLA credit base in section 3b).
- A price is required for every token class with a non-zero quantity, and the model
  must have some list price in force; otherwise ``RatingError``.
- Promotional credits are consumed earliest expiry first (no expiry last, then by
  id). A credit reduces the paid items before its expiry, pro rata to what remains of
  their realized amounts, up to that remainder. Shares are computed as exact
  fractions and reported as Decimal (exact when they are decimals of <= 60 digits,
  else truncated, so no item's realized amount after promotions is negative).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from fractions import Fraction

from billing.domain.invoices import invoice_total, minimum_line, promotion_lines, usage_lines
from billing.domain.rating.books import ContractBook, PriceBook
from billing.domain.rating.types import (
    ClassCharge,
    ContractKind,
    ContractVersion,
    PriceVersion,
    PromotionalCredit,
    PromotionApplication,
    RatedItem,
    RatedMonth,
    RatingError,
    TokenClass,
    UnsoldReason,
    UsageItem,
    VolumeTier,
    month_bounds,
)
from portal.money import EXACT, MILLION, fraction_to_decimal, minor_unit, round_money

ZERO = Decimal(0)

HUNDRED = Decimal(100)


def token_classes(
    *, input_tokens: int, cached_tokens: int, output_tokens: int
) -> dict[TokenClass, int]:
    """Split an item's counts into priced classes: uncached input, cached input, output."""
    if cached_tokens > input_tokens:
        raise ValueError("cached_tokens must not exceed input_tokens")
    return {
        TokenClass.INPUT: input_tokens - cached_tokens,
        TokenClass.CACHED_INPUT: cached_tokens,
        TokenClass.OUTPUT: output_tokens,
    }


def tier_reached(*, tiers: Sequence[VolumeTier], running_tokens: int) -> VolumeTier | None:
    """The graduated tier reached by running_tokens (None below the first tier)."""
    reached = [tier for tier in tiers if tier.from_tokens <= running_tokens]
    return max(reached, key=lambda tier: tier.from_tokens) if reached else None


def _unsold_reason(contract: ContractVersion | None, *, is_beyond: bool) -> UnsoldReason | None:
    if contract is None:
        return UnsoldReason.NO_CONTRACT
    if contract.kind == ContractKind.TRIAL:
        return UnsoldReason.TRIAL
    if contract.kind == ContractKind.INTERNAL:
        return UnsoldReason.INTERNAL
    return None if is_beyond else UnsoldReason.ALLOWANCE


def _charges(item: UsageItem, prices: PriceBook, currency: str) -> tuple[ClassCharge, ...]:
    when = item.time.astimezone(UTC)
    if not prices.has_any(model=item.model, when=when):
        raise RatingError(
            f"no list price in force for model {item.model!r} at {when.isoformat()}",
            model=item.model,
            time=when,
        )
    quantities = token_classes(
        input_tokens=item.input_tokens,
        cached_tokens=item.cached_tokens,
        output_tokens=item.output_tokens,
    )
    charges = []
    for token_class, quantity in quantities.items():
        if quantity == 0:
            continue
        price = prices.at(model=item.model, token_class=token_class, when=when)
        if price is None:
            raise RatingError(
                f"no {token_class} list price in force for model {item.model!r} "
                f"at {when.isoformat()}",
                model=item.model,
                time=when,
                token_class=token_class,
            )
        if price.currency != currency:
            raise RatingError(
                f"price of {item.model!r} {token_class} is in {price.currency}, "
                f"the invoice in {currency}",
                model=item.model,
                time=when,
                token_class=token_class,
            )
        charges.append(
            ClassCharge(
                token_class=token_class, quantity=quantity, list_unit_price=price.per_million
            )
        )
    return tuple(charges)


def _allocate_promotions(
    *,
    items: list[RatedItem],
    promotions: Sequence[PromotionalCredit],
    month_start: datetime,
    currency: str,
) -> tuple[list[Fraction], list[tuple[PromotionalCredit, Fraction]]]:
    """Per-item promotion shares and the amount applied from each credit, exact.

    Fractions keep every pool exact, so the credits applied never exceed the realized
    amounts even when a later credit's eligible items differ from an earlier one's.
    """
    shares = [Fraction(0)] * len(items)
    applied: list[tuple[PromotionalCredit, Fraction]] = []
    if not promotions:
        return shares, applied
    remaining = [Fraction(rated.realized_amount) for rated in items]
    ordered = sorted(
        promotions,
        key=lambda c: (c.expires_at is None, c.expires_at or month_start, c.id),
    )
    for credit in ordered:
        if credit.currency != currency:
            raise RatingError(f"promotional credit {credit.id!r} is in {credit.currency}")
        eligible = [
            index
            for index, rated in enumerate(items)
            if rated.is_paid and (credit.expires_at is None or rated.item.time < credit.expires_at)
        ]
        pool = sum((remaining[index] for index in eligible), Fraction(0))
        amount = min(Fraction(credit.amount), pool)
        if amount <= 0:
            continue
        for index in eligible:
            share = amount * remaining[index] / pool
            shares[index] += share
            remaining[index] -= share
        applied.append((credit, amount))
    return shares, applied


def rate_month(
    *,
    month_start: datetime,
    items: Iterable[UsageItem],
    contracts: Sequence[ContractVersion],
    prices: Sequence[PriceVersion],
    promotions: Sequence[PromotionalCredit] = (),
    currency: str = "USD",
) -> RatedMonth:
    """Rate one tenant's ok usage of one UTC month; RatingError for a paid item without price."""
    start, end = month_bounds(month_start=month_start)
    minor_unit(currency=currency)  # unknown currencies fail before any work
    contract_book = ContractBook(contracts)
    price_book = PriceBook(prices)
    ordered = sorted(items, key=lambda item: item.order_key)
    for item in ordered:
        if not start <= item.time < end:
            raise ValueError(
                f"item at {item.time.isoformat()} lies outside the month {start:%Y-%m}"
            )

    opening = contract_book.at(when=start)
    allowance = opening.free_tokens_per_month if opening is not None else 0
    unsold = dict.fromkeys(UnsoldReason, 0)
    consumed = 0  # allowance running total, every item
    paid_tokens = 0  # tier running total, paid items only
    is_beyond = False
    drafts: list[RatedItem] = []
    with localcontext(EXACT):
        for item in ordered:
            tokens = item.total_tokens
            consumed += tokens
            is_beyond = is_beyond or consumed > allowance
            contract = contract_book.at(when=item.time)
            reason = _unsold_reason(contract, is_beyond=is_beyond)
            if contract is None or reason is not None:
                why = reason or UnsoldReason.NO_CONTRACT
                unsold[why] += tokens
                drafts.append(_unsold_item(item, why))
                continue
            if contract.currency != currency:
                raise RatingError(
                    f"contract in force at {item.time.isoformat()} is in {contract.currency}, "
                    f"the invoice in {currency}",
                    model=item.model,
                    time=item.time,
                )
            paid_tokens += tokens
            tier = tier_reached(tiers=contract.volume_tiers, running_tokens=paid_tokens)
            tier_pct = tier.discount_pct if tier is not None else ZERO
            charges = _charges(item, price_book, currency)
            list_value = sum((c.quantity * c.list_unit_price for c in charges), ZERO) / MILLION
            keep = (HUNDRED - contract.discount_pct) * (HUNDRED - tier_pct) / (HUNDRED * HUNDRED)
            drafts.append(
                RatedItem(
                    item=item,
                    is_paid=True,
                    unsold_reason=None,
                    contract_discount_pct=contract.discount_pct,
                    tier_discount_pct=tier_pct,
                    charges=charges,
                    list_value=list_value,
                    realized_amount=list_value * keep,
                    promotion_amount=ZERO,
                    tier_from_tokens=tier.from_tokens if tier is not None and tier_pct else None,
                )
            )

    shares, exact_applied = _allocate_promotions(
        items=drafts, promotions=promotions, month_start=start, currency=currency
    )
    rated = tuple(
        _with_promotion(rated_item, fraction_to_decimal(share)) if share else rated_item
        for rated_item, share in zip(drafts, shares, strict=True)
    )
    applied = [(credit, fraction_to_decimal(amount)) for credit, amount in exact_applied]
    with localcontext(EXACT):
        list_value = sum((r.list_value for r in rated), ZERO)
        realized = sum((r.realized_amount for r in rated), ZERO)
    exact_promoted = sum((amount for _, amount in exact_applied), Fraction(0))
    promoted = fraction_to_decimal(exact_promoted)
    realized_after = fraction_to_decimal(Fraction(realized) - exact_promoted)

    money_zero = round_money(amount=ZERO, currency=currency)
    lines = list(usage_lines(items=rated, currency=currency))
    usage_total = invoice_total(lines=lines)
    promo_lines, billed = promotion_lines(
        applied=applied, usage_total=usage_total, currency=currency
    )
    lines.extend(promo_lines)
    minimum = None
    if opening is not None and opening.kind == ContractKind.PAID and opening.committed_minimum > 0:
        if opening.currency != currency:
            raise RatingError(
                f"committed minimum is in {opening.currency}, the invoice in {currency}"
            )
        minimum = minimum_line(
            committed_minimum=opening.committed_minimum, usage_total=usage_total, currency=currency
        )
    if minimum is not None:
        lines.append(minimum)

    return RatedMonth(
        month_start=start,
        month_end=end,
        currency=currency,
        items=rated,
        allowance_tokens=allowance,
        paid_tokens=paid_tokens,
        unsold_tokens=unsold,
        list_value=list_value,
        realized_amount=realized,
        promotion_amount=promoted,
        realized_after_promotions=realized_after,
        minimum_shortfall=minimum.amount if minimum is not None else money_zero,
        promotions=tuple(
            PromotionApplication(credit_id=credit.id, applied_amount=amount, billed_amount=bill)
            for (credit, amount), bill in zip(applied, billed, strict=True)
        ),
        lines=tuple(lines),
        total=round_money(amount=invoice_total(lines=lines), currency=currency),
    )


def _unsold_item(item: UsageItem, reason: UnsoldReason) -> RatedItem:
    return RatedItem(
        item=item,
        is_paid=False,
        unsold_reason=reason,
        contract_discount_pct=ZERO,
        tier_discount_pct=ZERO,
        charges=(),
        list_value=ZERO,
        realized_amount=ZERO,
        promotion_amount=ZERO,
    )


def _with_promotion(rated: RatedItem, share: Decimal) -> RatedItem:
    return replace(rated, promotion_amount=share)
