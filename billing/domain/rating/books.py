"""Effective-dated lookups: the contract and list prices in force at an instant."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from billing.domain.rating.types import ContractVersion, PriceVersion, TokenClass
from portal.effective import InForce, in_force_by

TOKEN_CLASSES = tuple(TokenClass)  # iterating the enum itself is slow, and this runs per item


class ContractBook:
    """A tenant's contract versions; the latest effective_from <= t is in force at t."""

    def __init__(self, contracts: Iterable[ContractVersion]) -> None:
        self._series = InForce(contracts)
        if len(set(self._series.starts)) != len(self._series.starts):
            raise ValueError("two contract versions share an effective_from")

    def at(self, *, when: datetime) -> ContractVersion | None:
        return self._series.at(when)


class PriceBook:
    """List price versions per (model, token class); the latest in force at t applies."""

    def __init__(self, prices: Iterable[PriceVersion]) -> None:
        self._series = in_force_by(prices, series=_price_key)
        for key, series in self._series.items():
            if len(set(series.starts)) != len(series.starts):
                raise ValueError(f"two prices of {key[0]} {key[1]} share an effective_from")

    def at(self, *, model: str, token_class: TokenClass, when: datetime) -> PriceVersion | None:
        series = self._series.get((model, token_class))
        return series.at(when) if series is not None else None

    def has_any(self, *, model: str, when: datetime) -> bool:
        """Whether the model has a list price in force at `when` for any token class."""
        return any(self.at(model=model, token_class=tc, when=when) for tc in TOKEN_CLASSES)


def _price_key(price: PriceVersion) -> tuple[str, TokenClass]:
    return price.model, TokenClass(price.token_class)
