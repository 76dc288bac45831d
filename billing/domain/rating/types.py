"""Inputs and outputs of rating: frozen dataclasses and enumerations, no Django.

Money is ``Decimal`` in the invoice currency; token counts are ``int``; times are
timezone-aware datetimes (compared as UTC instants). Every ``effective_from`` is a
whole UTC hour (kpis.md, general rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from enum import StrEnum
from fractions import Fraction

from metering.domain.usage.fields import SERVICE_TIERS, STANDARD
from portal.money import EXACT


class TokenClass(StrEnum):
    """Priced token classes, in invoice order (kpis.md section 3: each token in exactly one)."""

    INPUT = "input"  # input_tokens - cached_tokens - cache_write_tokens
    CACHED_INPUT = "cached_input"  # cached_tokens
    CACHE_WRITE = "cache_write"  # cache_write_tokens
    OUTPUT = "output"  # output_tokens - reasoning_tokens
    REASONING = "reasoning"  # reasoning_tokens

    @property
    def words(self) -> str:
        """The class as a document or page names it: cached input, cache write."""
        return self.value.replace("_", " ")


# The class whose price a class takes when it has no list price of its own in force;
# a class without a parent (input, cached input, output) must have its own.
PARENT_CLASS: Mapping[TokenClass, TokenClass] = {
    TokenClass.CACHE_WRITE: TokenClass.INPUT,
    TokenClass.REASONING: TokenClass.OUTPUT,
}


class ContractKind(StrEnum):
    PAID = "paid"
    TRIAL = "trial"
    INTERNAL = "internal"


class UnsoldReason(StrEnum):
    TRIAL = "trial"
    INTERNAL = "internal"
    ALLOWANCE = "allowance"
    NO_CONTRACT = "no_contract"


class LineKind(StrEnum):
    USAGE = "usage"
    RESERVATION = "reservation"  # a reservation's fees of the month (kpis.md 3d)
    PROMOTION = "promotion"
    MINIMUM = "minimum"
    SLA_CREDIT = "sla_credit"  # posted by the SLA close, never by rating
    ADJUSTMENT = "adjustment"
    CREDIT = "credit"  # drawn from the tenant's credit balance (credit notes settled to it)
    PREPAID = "prepaid"  # drawn from the tenant's prepaid balances
    PURCHASE = "purchase"  # a prepaid purchase, on its own invoice


class RatingError(Exception):
    """A month cannot be rated as given, e.g. a paid item without a list price in force."""

    def __init__(
        self,
        message: str,
        *,
        model: str = "",
        time: datetime | None = None,
        token_class: TokenClass | None = None,
    ) -> None:
        super().__init__(message)
        self.model = model
        self.time = time
        self.token_class = token_class


def _require_aware(name: str, value: datetime) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware (UTC), got {value!r}")


def _require_whole_hour(name: str, value: datetime) -> None:
    _require_aware(name, value)
    utc = value.astimezone(UTC)
    if (utc.minute, utc.second, utc.microsecond) != (0, 0, 0):
        raise ValueError(f"{name} must be a whole UTC hour, got {value.isoformat()}")


def month_bounds(*, month_start: datetime) -> tuple[datetime, datetime]:
    """The half-open UTC month [start, end) that begins at month_start."""
    if month_start.tzinfo is None or month_start.utcoffset() is None:
        raise ValueError("month_start must be timezone-aware (UTC)")
    start = month_start.astimezone(UTC)
    if (start.day, start.hour, start.minute, start.second, start.microsecond) != (1, 0, 0, 0, 0):
        raise ValueError(f"month_start must be the first instant of a UTC month, got {start}")
    end = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return start, end


def _require_pct(name: str, value: Decimal) -> None:
    if not isinstance(value, Decimal) or not Decimal(0) <= value <= Decimal(100):
        raise ValueError(f"{name} must be a Decimal percentage in [0, 100], got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageItem:
    """One ok usage event, an hourly aggregate of ok events, or a part of one that rating
    split at a boundary (billing.domain.rating.boundaries).

    Rating order is (time, source, id); an aggregate uses its hour start and empty
    source and id, so it sorts before the events of that hour. Remaining ties are
    broken by (model, pool, deployment, service tier, project), then by input order.
    """

    time: datetime  # event time (request end) or the aggregate's hour start
    model: str
    input_tokens: int  # includes cached_tokens and cache_write_tokens
    cached_tokens: int
    output_tokens: int  # includes reasoning_tokens
    source: str = ""
    id: str = ""
    pool: str = ""
    deployment: str = ""
    requests: int | Fraction = 1  # ok requests in this item (a part: its share of its whole's)
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    service_tier: str = STANDARD  # the tier it was served at: its price follows it
    part_of: UsageItem | None = None  # the whole item a part was split from (None: whole)
    project: int = 0  # the tenant's project it was metered to (portal.Project id; 0: none)

    def __post_init__(self) -> None:
        _require_aware("time", self.time)
        for name in (
            "input_tokens", "cached_tokens", "output_tokens", "cache_write_tokens",
            "reasoning_tokens",
        ):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if not isinstance(self.requests, int | Fraction) or self.requests < 0:
            raise ValueError(f"requests must be a non-negative number, got {self.requests!r}")
        if self.part_of is not None and self.part_of.part_of is not None:
            raise ValueError("part_of must be a whole item")
        if self.cached_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError("cached_tokens + cache_write_tokens must not exceed input_tokens")
        if self.reasoning_tokens > self.output_tokens:
            raise ValueError("reasoning_tokens must not exceed output_tokens")

    @property
    def total_tokens(self) -> int:
        """Tokens counted by the free allowance and the volume tiers: input + output."""
        return self.input_tokens + self.output_tokens

    @property
    def whole(self) -> UsageItem:
        """The event (or aggregate) this item is, or is a part of."""
        return self.part_of or self

    @property
    def share(self) -> Fraction:
        """The part of its whole this item holds, in total tokens: its requests, list value
        and production are this share of its whole's (kpis.md section 3, "Boundaries")."""
        if self.part_of is None:
            return Fraction(1)
        return Fraction(self.total_tokens, self.part_of.total_tokens)

    @property
    def order_key(self) -> tuple[datetime, str, str, str, str, str, str, int]:
        return (
            self.time.astimezone(UTC),
            self.source,
            self.id,
            self.model,
            self.pool,
            self.deployment,
            self.service_tier,
            self.project,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Running:
    """Where a tenant-month's rating stands after its first hours: the free allowance's
    running total (every ok item's input + output) and the volume tiers' (paid items'
    only). Rating the rest of the month resumes from it."""

    consumed: int = 0
    paid_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeTier:
    """A graduated tier: paid items whose month running total reaches from_tokens."""

    from_tokens: int  # tokens, all classes and models, counted on paid items only
    discount_pct: Decimal  # percent: 5 means 5%

    def __post_init__(self) -> None:
        if not isinstance(self.from_tokens, int) or self.from_tokens < 0:
            raise ValueError(
                f"from_tokens must be a non-negative integer, got {self.from_tokens!r}"
            )
        _require_pct("discount_pct", self.discount_pct)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContractVersion:
    """A tenant's contract from effective_from until the next version."""

    effective_from: datetime  # whole UTC hour
    kind: ContractKind
    discount_pct: Decimal = Decimal(0)  # percent
    free_tokens_per_month: int = 0  # tokens (input + output)
    volume_tiers: tuple[VolumeTier, ...] = ()
    committed_minimum: Decimal = Decimal(0)  # money per month
    currency: str = "USD"

    def __post_init__(self) -> None:
        _require_whole_hour("effective_from", self.effective_from)
        object.__setattr__(self, "kind", ContractKind(self.kind))
        _require_pct("discount_pct", self.discount_pct)
        if not isinstance(self.free_tokens_per_month, int) or self.free_tokens_per_month < 0:
            raise ValueError("free_tokens_per_month must be a non-negative integer")
        if not isinstance(self.committed_minimum, Decimal) or self.committed_minimum < 0:
            raise ValueError("committed_minimum must be a non-negative Decimal")
        starts = [tier.from_tokens for tier in self.volume_tiers]
        if len(set(starts)) != len(starts):
            raise ValueError("volume_tiers must have distinct from_tokens")


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceVersion:
    """A list price per million tokens of one model and token class at one service tier."""

    model: str
    token_class: TokenClass
    per_million: Decimal  # money per 10^6 tokens
    effective_from: datetime  # whole UTC hour
    currency: str = "USD"
    service_tier: str = STANDARD

    def __post_init__(self) -> None:
        _require_whole_hour("effective_from", self.effective_from)
        object.__setattr__(self, "token_class", TokenClass(self.token_class))
        if not isinstance(self.per_million, Decimal) or self.per_million < 0:
            raise ValueError("per_million must be a non-negative Decimal")
        if self.service_tier not in SERVICE_TIERS:
            raise ValueError(f"service_tier must be one of {SERVICE_TIERS}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TierMultiplier:
    """The factor a service tier's prices are of the standard tier's, for a class without a
    price of its own in the tier (kpis.md section 3, "Service tiers"): in force from
    effective_from until the next version of the tier."""

    service_tier: str
    multiplier: Decimal
    effective_from: datetime  # whole UTC hour

    def __post_init__(self) -> None:
        _require_whole_hour("effective_from", self.effective_from)
        if self.service_tier not in SERVICE_TIERS or self.service_tier == STANDARD:
            raise ValueError("a multiplier is of priority, flex or batch")
        if not isinstance(self.multiplier, Decimal) or self.multiplier < 0:
            raise ValueError("multiplier must be a non-negative Decimal")


@dataclass(frozen=True, slots=True, kw_only=True)
class PromotionalCredit:
    """Money granted to a tenant; it pays for paid usage before cash, until it expires."""

    id: str
    amount: Decimal  # money still available at the start of the month
    expires_at: datetime | None = None  # usage at or after this instant cannot use it
    description: str = ""
    currency: str = "USD"

    def __post_init__(self) -> None:
        if not isinstance(self.amount, Decimal) or self.amount < 0:
            raise ValueError("amount must be a non-negative Decimal")
        if self.expires_at is not None:
            _require_aware("expires_at", self.expires_at)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassCharge:
    """One token class of a paid item at its list unit price: that of `price_class`, the
    class itself or, without a price of its own in force, its parent (PARENT_CLASS), in the
    item's tier; or, without either in the tier, the standard tier's times the tier's
    `multiplier` (None: the tier's own price)."""

    token_class: TokenClass
    quantity: int  # tokens
    list_unit_price: Decimal  # per million tokens
    price_class: TokenClass
    multiplier: Decimal | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RatedItem:
    """The rating of one usage item, or of a part of one split at a boundary; amounts are
    unrounded."""

    item: UsageItem
    is_paid: bool
    unsold_reason: UnsoldReason | None  # None exactly when is_paid
    contract_discount_pct: Decimal  # percent, 0 when unsold
    tier_discount_pct: Decimal  # percent, 0 when unsold
    charges: tuple[ClassCharge, ...]  # empty when unsold; only classes with tokens
    list_value: Decimal  # 0 when unsold
    realized_amount: Decimal  # list value after contract and tier discounts, before promotions
    promotion_amount: Decimal  # this item's pro rata share of promotional credits (>= 0)
    tier_from_tokens: int | None = None  # the volume tier reached (its threshold), if any
    # Covered by the tenant's reservations on its deployment (kpis.md 3d): paid, realized
    # at its share of the hour's fees, on no usage line and outside allowance and tiers.
    covered: bool = False

    @property
    def total_discount_pct(self) -> Decimal:
        """Combined percent: 100 - (100 - contract)(100 - tier)/100."""
        return total_discount_pct(contract=self.contract_discount_pct, tier=self.tier_discount_pct)

    @property
    def realized_after_promotions(self) -> Decimal:
        with localcontext(EXACT):
            return self.realized_amount - self.promotion_amount


@dataclass(frozen=True, slots=True, kw_only=True)
class InvoiceLine:
    """One invoice line; amounts rounded to the currency's minor unit.

    Every line satisfies ``discount == list_amount - amount``. Usage lines carry the
    model, service tier, token class, the class whose price was used, quantity and list
    unit price (per million tokens); a reservation line its reservation, GPU-hours and
    hourly rate; the other kinds leave them empty (``""``, ``None``, ``None``, 0,
    ``None``). A promotion line has
    list_amount 0 and a negative amount; a minimum line charges the shortfall.
    """

    kind: LineKind
    list_amount: Decimal
    discount: Decimal
    amount: Decimal
    description: str
    model: str = ""
    token_class: TokenClass | None = None
    price_class: TokenClass | None = None  # the class whose list price was used
    quantity: int = 0  # tokens
    list_unit_price: Decimal | None = None  # per million tokens (a reservation's: per GPU-hour)
    discount_pct: Decimal = Decimal(0)  # combined percent of a usage line
    service_tier: str = ""  # a usage line's tier
    gpu_hours: Decimal | None = None  # a reservation line's quantity
    reservation: int | None = None  # a reservation line's reservation


@dataclass(frozen=True, slots=True, kw_only=True)
class PromotionApplication:
    """How much of one promotional credit the month consumed."""

    credit_id: str
    applied_amount: Decimal  # unrounded, what reduces realized amounts (price realization)
    billed_amount: Decimal  # rounded, the positive value of its promotion line


@dataclass(frozen=True, slots=True, kw_only=True)
class RatedMonth:
    """One tenant's rated UTC month: items, totals and invoice lines."""

    month_start: datetime
    month_end: datetime
    currency: str
    items: tuple[RatedItem, ...]  # in rating order
    allowance_tokens: int  # free_tokens_per_month of the contract in force at month_start
    paid_tokens: int  # input + output tokens of paid items
    unsold_tokens: Mapping[UnsoldReason, int]  # every reason present, 0 when none
    list_value: Decimal  # unrounded
    realized_amount: Decimal  # unrounded, before promotions
    promotion_amount: Decimal  # unrounded, credits applied
    realized_after_promotions: Decimal  # unrounded
    minimum_shortfall: Decimal  # rounded; also the minimum line's amount
    promotions: tuple[PromotionApplication, ...]
    lines: tuple[InvoiceLine, ...]  # usage, reservation, promotion, minimum
    total: Decimal  # sum of the rounded lines
    running: Running = Running()  # where the month's rating stands after its last item


def total_discount_pct(*, contract: Decimal, tier: Decimal) -> Decimal:
    """Combined discount percent of a contract discount then a tier discount (exact)."""
    hundred = Decimal(100)
    with localcontext(EXACT):
        return hundred - (hundred - contract) * (hundred - tier) / hundred
