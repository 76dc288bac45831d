"""Effective-dated lookups: the contract, list prices and service tiers' multipliers in force
at an instant."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from billing.domain.rating.types import (
    PARENT_CLASS,
    ContractVersion,
    PriceVersion,
    TierMultiplier,
    TokenClass,
)
from metering.domain.usage.fields import STANDARD
from portal.effective import InForce, in_force_by

TOKEN_CLASSES = tuple(TokenClass)  # iterating the enum itself is slow, and this runs per item

# A tier's multiplier while none is recorded for it (kpis.md section 3, "Service tiers").
DEFAULT_MULTIPLIERS: dict[str, Decimal] = {
    "priority": Decimal("1.75"),
    "flex": Decimal("0.5"),
    "batch": Decimal("0.5"),
}


class ContractBook:
    """A tenant's contract versions; the latest effective_from <= t is in force at t."""

    def __init__(self, contracts: Iterable[ContractVersion]) -> None:
        self._series = InForce(contracts)
        if len(set(self._series.starts)) != len(self._series.starts):
            raise ValueError("two contract versions share an effective_from")

    def at(self, *, when: datetime) -> ContractVersion | None:
        return self._series.at(when)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A class's list price in a tier: the price version it comes from (`price.token_class`
    is the class whose price was used) and, when it is the standard tier's, the tier's
    multiplier applied (None: a price of the tier's own)."""

    price: PriceVersion
    multiplier: Decimal | None = None

    @property
    def per_million(self) -> Decimal:
        if self.multiplier is None:
            return self.price.per_million
        return self.price.per_million * self.multiplier


class PriceBook:
    """List price versions per (model, token class, tier); the latest in force at t applies.
    `multipliers`: the tiers' recorded multipliers (a tier without one in force takes
    DEFAULT_MULTIPLIERS)."""

    def __init__(
        self, prices: Iterable[PriceVersion], multipliers: Iterable[TierMultiplier] = ()
    ) -> None:
        self._series = in_force_by(prices, series=_price_key)
        for key, series in self._series.items():
            if len(set(series.starts)) != len(series.starts):
                raise ValueError(
                    f"two prices of {key[0]} {key[1]} {key[2]} share an effective_from"
                )
        self._multipliers = in_force_by(multipliers, series=_tier_of)
        self._by_model: dict[str, list[InForce[PriceVersion]]] = {}
        for (model, _, _), series in self._series.items():
            self._by_model.setdefault(model, []).append(series)

    def at(
        self, *, model: str, token_class: TokenClass, when: datetime, tier: str = STANDARD
    ) -> PriceVersion | None:
        series = self._series.get((model, token_class, tier))
        return series.at(when) if series is not None else None

    def has_any(self, *, model: str, when: datetime) -> bool:
        """Whether the model has a list price in force at `when` for any token class, in the
        standard tier (every tier falls back to it) or any other."""
        return any(series.at(when) is not None for series in self._by_model.get(model, ()))

    def multiplier(self, *, tier: str, when: datetime) -> Decimal:
        """The tier's multiplier in force at `when` (1 for the standard tier)."""
        if tier == STANDARD:
            return Decimal(1)
        series = self._multipliers.get(tier)
        version = series.at(when) if series is not None else None
        return version.multiplier if version is not None else DEFAULT_MULTIPLIERS[tier]

    def resolve(
        self, *, model: str, token_class: TokenClass, when: datetime, tier: str = STANDARD
    ) -> Resolved | None:
        """A class's list price in a tier (kpis.md section 3, "Service tiers"): the class's
        own price in the tier, then its parent class's in the tier; without either, the
        standard tier's resolution (the class's, then its parent's) times the tier's
        multiplier in force. None when the standard tier has neither."""
        own = self._in_tier(model, token_class, when, tier)
        if own is not None or tier == STANDARD:
            return None if own is None else Resolved(own)
        standard = self._in_tier(model, token_class, when, STANDARD)
        if standard is None:
            return None
        return Resolved(standard, self.multiplier(tier=tier, when=when))

    def _in_tier(
        self, model: str, token_class: TokenClass, when: datetime, tier: str
    ) -> PriceVersion | None:
        price = self.at(model=model, token_class=token_class, when=when, tier=tier)
        if price is None and token_class in PARENT_CLASS:
            price = self.at(
                model=model, token_class=PARENT_CLASS[token_class], when=when, tier=tier
            )
        return price


def _price_key(price: PriceVersion) -> tuple[str, TokenClass, str]:
    return price.model, TokenClass(price.token_class), price.service_tier


def _tier_of(multiplier: TierMultiplier) -> str:
    return multiplier.service_tier
