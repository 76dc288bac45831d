"""Rate one tenant's one UTC month (kpis.md section 3): paid-ness, list value, realized amount.

Decisions where kpis.md is silent:
- The contract in force at an item's time decides its kind (paid-ness) and its
  discount and volume tiers; no contract in force gives the reason ``no_contract``.
- The allowance is ``free_tokens_per_month`` of the contract in force at the month's
  start (none in force: 0). Every item of the month consumes it in rating order,
  whatever its contract's kind; trial, internal and no_contract reasons take
  precedence over ``allowance``. The item that crosses it is split there
  (billing.domain.rating.boundaries): its first part free, the rest paid.
- Volume tiers count paid tokens only, the first ``from_tokens`` of them before a tier's
  boundary as the allowance's first tokens are before its own: a paid token is in the
  tier with the greatest ``from_tokens`` <= the paid tokens before it (0% below the first
  tier), and a paid item that crosses a boundary is split there, each part at its tier.
- The committed minimum is that of the contract in force at the month's start when
  it is ``paid``; it is measured against the usage lines (after discounts and tiers,
  before promotions, as the SLA credit base in section 3b).
- A price is required for every token class with a non-zero quantity (a class with a
  parent takes its parent's when it has none of its own in force), and the model must
  have some list price in force; otherwise ``RatingError``.
- Promotional credits are consumed earliest expiry first (no expiry last, then by
  id). A credit reduces the paid items before its expiry, pro rata to what remains of
  their realized amounts, up to that remainder. Shares are computed as exact
  fractions and reported as Decimal (exact when they are decimals of <= 60 digits,
  else truncated, so no item's realized amount after promotions is negative).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from fractions import Fraction

from billing.domain.invoices import month_lines, usage_lines
from billing.domain.rating.books import ContractBook, PriceBook
from billing.domain.rating.boundaries import split_at, split_at_production, token_classes
from billing.domain.rating.types import (
    ClassCharge,
    ContractKind,
    ContractVersion,
    PriceVersion,
    PromotionalCredit,
    RatedItem,
    RatedMonth,
    RatingError,
    Running,
    TierMultiplier,
    UnsoldReason,
    UsageItem,
    VolumeTier,
    month_bounds,
)
from billing.domain.reservations import Coverage, ReservationTerms, reservation_lines
from metering.domain.usage.production import production_tokens
from portal.money import EXACT, MILLION, fraction_to_decimal, minor_unit

ZERO = Decimal(0)
START = Running()  # a month rated from its first hour

HUNDRED = Decimal(100)


def tier_reached(*, tiers: Sequence[VolumeTier], running_tokens: int) -> VolumeTier | None:
    """The graduated tier of the paid tokens that follow the month's first `running_tokens`
    (None below the first tier)."""
    reached = [tier for tier in tiers if tier.from_tokens <= running_tokens]
    return max(reached, key=lambda tier: tier.from_tokens) if reached else None


def tier_parts(
    item: UsageItem, *, tiers: Sequence[VolumeTier], paid_tokens: int
) -> list[tuple[UsageItem, VolumeTier | None]]:
    """A paid item after the month's first `paid_tokens` paid tokens, split at every tier
    boundary it crosses, each part with its tier."""
    parts: list[tuple[UsageItem, VolumeTier | None]] = []
    rest: UsageItem | None = item
    for boundary in sorted(tier.from_tokens for tier in tiers):
        if rest is None:
            break
        if boundary > paid_tokens:
            before, rest = split_at(rest, boundary - paid_tokens)
            if before is not None:
                parts.append((before, tier_reached(tiers=tiers, running_tokens=paid_tokens)))
                paid_tokens += before.total_tokens
    if rest is not None:
        parts.append((rest, tier_reached(tiers=tiers, running_tokens=paid_tokens)))
    return parts


def _unsold_reason(contract: ContractVersion | None) -> UnsoldReason | None:
    """Why an item under this contract is unsold whatever the allowance (None: paid)."""
    if contract is None:
        return UnsoldReason.NO_CONTRACT
    if contract.kind == ContractKind.TRIAL:
        return UnsoldReason.TRIAL
    if contract.kind == ContractKind.INTERNAL:
        return UnsoldReason.INTERNAL
    return None


def _charges(
    item: UsageItem, prices: PriceBook, currency: str
) -> tuple[tuple[ClassCharge, ...], Decimal]:
    """A paid item's charges (its classes with tokens, at their list prices) and its list
    value: a part's is its share of its whole's (kpis.md section 3, "Boundaries")."""
    charges = _class_charges(item.whole, prices, currency)
    list_value = sum((c.quantity * c.list_unit_price for c in charges), ZERO) / MILLION
    if item.part_of is None:
        return charges, list_value
    quantities = token_classes(item)
    return (
        tuple(
            replace(charge, quantity=quantities[charge.token_class])
            for charge in charges
            if quantities[charge.token_class]
        ),
        fraction_to_decimal(Fraction(list_value) * item.share),
    )


def _class_charges(item: UsageItem, prices: PriceBook, currency: str) -> tuple[ClassCharge, ...]:
    when = item.time.astimezone(UTC)
    if not prices.has_any(model=item.model, when=when):
        raise RatingError(
            f"no list price in force for model {item.model!r} at {when.isoformat()}",
            model=item.model,
            time=when,
        )
    charges = []
    for token_class, quantity in token_classes(item).items():
        if quantity == 0:
            continue
        resolved = prices.resolve(
            model=item.model, token_class=token_class, when=when, tier=item.service_tier
        )
        if resolved is None:
            raise RatingError(
                f"no {token_class} list price in force for model {item.model!r} "
                f"at {when.isoformat()}",
                model=item.model,
                time=when,
                token_class=token_class,
            )
        price = resolved.price
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
                token_class=token_class,
                quantity=quantity,
                list_unit_price=resolved.per_million,
                price_class=price.token_class,
                multiplier=resolved.multiplier,
            )
        )
    return tuple(charges)


def allocate_promotions(
    *,
    paid: Sequence[tuple[datetime, Decimal]],
    promotions: Sequence[PromotionalCredit],
    month_start: datetime,
    currency: str,
) -> tuple[list[Fraction], list[tuple[PromotionalCredit, Fraction]]]:
    """Promotion shares of paid amounts (time, realized amount before promotions), and the
    amount applied from each credit, exact.

    Fractions keep every pool exact, so the credits applied never exceed the realized
    amounts even when a later credit's eligible items differ from an earlier one's. Items
    that every credit treats alike (no expiry between them) may be given summed: the
    amounts applied are the same.
    """
    shares = [Fraction(0)] * len(paid)
    applied: list[tuple[PromotionalCredit, Fraction]] = []
    if not promotions:
        return shares, applied
    remaining = [Fraction(realized) for _, realized in paid]
    ordered = sorted(
        promotions,
        key=lambda c: (c.expires_at is None, c.expires_at or month_start, c.id),
    )
    for credit in ordered:
        if credit.currency != currency:
            raise RatingError(f"promotional credit {credit.id!r} is in {credit.currency}")
        eligible = [
            index
            for index, (time, _) in enumerate(paid)
            if credit.expires_at is None or time < credit.expires_at
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


class Covering:
    """Reservations' coverage of one tenant's month (kpis.md 3d), hour by hour: its ok items
    on a deployment in an hour with coverage are covered, in rating order, while their
    running production stays within the hour's pooled cap; the item that crosses it is
    split there (billing.domain.rating.boundaries) and every later item of the hour is on
    demand. Each hour's covered items are then realized at min(its fees, their list value),
    pro rata to their list values."""

    def __init__(self, coverage: Mapping[tuple[str, datetime], Coverage]) -> None:
        self.coverage = coverage
        self.used: dict[tuple[str, datetime], Fraction] = {}
        self.spent: set[tuple[str, datetime]] = set()  # hours whose cap an item crossed

    def split(self, item: UsageItem) -> tuple[UsageItem | None, UsageItem | None]:
        """(its covered part, the rest on demand); (None, item) without coverage."""
        key = _hour_key(item)
        hour = self.coverage.get(key)
        if hour is None or key in self.spent:
            return None, item
        tok = Fraction(
            production_tokens(
                output_tokens=item.output_tokens,
                input_tokens=item.input_tokens,
                cached_tokens=item.cached_tokens,
                w_in=Fraction(hour.w_in),
            )
        )
        left = Fraction(hour.cap) - self.used.get(key, Fraction(0))
        if tok <= left:
            self.used[key] = self.used.get(key, Fraction(0)) + tok
            return item, None
        self.spent.add(key)
        return split_at_production(item, left=left, production=tok)

    @staticmethod
    def draft(item: UsageItem, charges: tuple[tuple[ClassCharge, ...], Decimal]) -> RatedItem:
        """A covered item's rating before its hour's fees are shared out (`realize`): paid,
        at its list value, on no usage line."""
        classes, list_value = charges
        return RatedItem(
            item=item,
            is_paid=True,
            unsold_reason=None,
            contract_discount_pct=ZERO,
            tier_discount_pct=ZERO,
            charges=classes,
            list_value=list_value,
            realized_amount=ZERO,
            promotion_amount=ZERO,
            covered=True,
        )

    def realize(self, drafts: list[RatedItem]) -> None:
        """Each hour's covered items realized: min(Σ fee, their list value) shared pro rata
        to their list values (exact fractions)."""
        by_hour: dict[tuple[str, datetime], list[int]] = {}
        for index, rated in enumerate(drafts):
            if rated.covered:
                by_hour.setdefault(_hour_key(rated.item), []).append(index)
        for key, indexes in by_hour.items():
            values = [Fraction(drafts[i].list_value) for i in indexes]
            listed = sum(values, Fraction(0))
            if not listed:
                continue
            realized = min(self.coverage[key].fee, listed)
            for index, value in zip(indexes, values, strict=True):
                share = fraction_to_decimal(realized * value / listed)
                drafts[index] = replace(drafts[index], realized_amount=share)


def _hour_key(item: UsageItem) -> tuple[str, datetime]:
    return (item.deployment, item.time.astimezone(UTC).replace(minute=0, second=0, microsecond=0))


def rate_month(
    *,
    month_start: datetime,
    items: Iterable[UsageItem],
    contracts: Sequence[ContractVersion],
    prices: Sequence[PriceVersion],
    promotions: Sequence[PromotionalCredit] = (),
    currency: str = "USD",
    opening: Running = START,
    multipliers: Sequence[TierMultiplier] = (),
    coverage: Mapping[tuple[str, datetime], Coverage] | None = None,
    reservations: Sequence[ReservationTerms] = (),
) -> RatedMonth:
    """Rate one tenant's ok usage of one UTC month; RatingError for a paid item without
    price. Given where the month's rating stood before its items (`opening`: the items of
    the hours before them rated already), it rates the rest of the month: its items are
    exactly what a whole-month rating gives those items, and its totals and lines theirs.
    `coverage`: the tenant's reservations pooled per (deployment, hour) (kpis.md 3d);
    `reservations`: the tenant's, whose fees of the month its lines bill."""
    start, end = month_bounds(month_start=month_start)
    minor_unit(currency=currency)  # unknown currencies fail before any work
    contract_book = ContractBook(contracts)
    price_book = PriceBook(prices, multipliers)
    covering = Covering(coverage or {})
    ordered = sorted(items, key=lambda item: item.order_key)
    for item in ordered:
        if not start <= item.time < end:
            raise ValueError(
                f"item at {item.time.isoformat()} lies outside the month {start:%Y-%m}"
            )

    opening_contract = contract_book.at(when=start)
    allowance = opening_contract.free_tokens_per_month if opening_contract is not None else 0
    unsold = dict.fromkeys(UnsoldReason, 0)
    consumed = opening.consumed  # allowance running total, every item
    paid_tokens = opening.paid_tokens  # tier running total, paid items only
    paid_here = 0
    drafts: list[RatedItem] = []
    with localcontext(EXACT):
        for whole in ordered:
            covered, on_demand = covering.split(whole)
            if covered is not None:
                drafts.append(covering.draft(covered, _charges(covered, price_book, currency)))
            if on_demand is None:
                continue
            item = on_demand
            left = allowance - consumed  # the allowance's tokens left before the item
            consumed += item.total_tokens
            contract = contract_book.at(when=item.time)
            reason = _unsold_reason(contract)
            if contract is None or reason is not None:
                reason = reason or UnsoldReason.NO_CONTRACT
                unsold[reason] += item.total_tokens
                drafts.append(_unsold_item(item, reason))
                continue
            free, beyond = split_at(item, left)
            if free is not None:
                unsold[UnsoldReason.ALLOWANCE] += free.total_tokens
                drafts.append(_unsold_item(free, UnsoldReason.ALLOWANCE))
            if beyond is None:
                continue
            if contract.currency != currency:
                raise RatingError(
                    f"contract in force at {item.time.isoformat()} is in {contract.currency}, "
                    f"the invoice in {currency}",
                    model=item.model,
                    time=item.time,
                )
            for part, tier in tier_parts(
                beyond, tiers=contract.volume_tiers, paid_tokens=paid_tokens
            ):
                paid_tokens += part.total_tokens
                paid_here += part.total_tokens
                drafts.append(_paid_item(part, contract, tier, price_book, currency))

    covering.realize(drafts)
    paid = [index for index, rated in enumerate(drafts) if rated.is_paid and not rated.covered]
    shares, exact_applied = allocate_promotions(
        paid=[(drafts[index].item.time, drafts[index].realized_amount) for index in paid],
        promotions=promotions,
        month_start=start,
        currency=currency,
    )
    for index, share in zip(paid, shares, strict=True):
        if share:
            drafts[index] = replace(drafts[index], promotion_amount=fraction_to_decimal(share))
    with localcontext(EXACT):
        list_value = sum((r.list_value for r in drafts), ZERO)
        realized = sum((r.realized_amount for r in drafts), ZERO)
    closing = month_lines(
        usage=usage_lines(items=drafts, currency=currency),
        applied=exact_applied,
        opening=opening_contract,
        currency=currency,
        reserved=reservation_lines(
            reservations, month_start=start, month_end=end, currency=currency
        ),
    )
    return RatedMonth(
        month_start=start,
        month_end=end,
        currency=currency,
        items=tuple(drafts),
        allowance_tokens=allowance,
        paid_tokens=paid_here,
        unsold_tokens=unsold,
        list_value=list_value,
        realized_amount=realized,
        promotion_amount=fraction_to_decimal(closing.promoted),
        realized_after_promotions=fraction_to_decimal(Fraction(realized) - closing.promoted),
        minimum_shortfall=closing.minimum_shortfall,
        promotions=closing.promotions,
        lines=closing.lines,
        total=closing.total,
        running=Running(consumed=consumed, paid_tokens=paid_tokens),
    )


def _paid_item(
    item: UsageItem,
    contract: ContractVersion,
    tier: VolumeTier | None,
    prices: PriceBook,
    currency: str,
) -> RatedItem:
    tier_pct = tier.discount_pct if tier is not None else ZERO
    charges, list_value = _charges(item, prices, currency)
    keep = (HUNDRED - contract.discount_pct) * (HUNDRED - tier_pct) / (HUNDRED * HUNDRED)
    return RatedItem(
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
