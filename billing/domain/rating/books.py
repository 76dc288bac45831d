"""Effective-dated lookups: the contract and list prices in force at an instant."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from datetime import UTC, datetime

from billing.domain.rating.types import ContractVersion, PriceVersion, TokenClass

TOKEN_CLASSES = tuple(TokenClass)  # iterating the enum itself is slow, and this runs per item


class ContractBook:
    """A tenant's contract versions; the latest effective_from <= t is in force at t."""

    def __init__(self, contracts: Iterable[ContractVersion]) -> None:
        ordered = sorted(contracts, key=lambda c: c.effective_from.astimezone(UTC))
        self._starts = [c.effective_from.astimezone(UTC) for c in ordered]
        if len(set(self._starts)) != len(self._starts):
            raise ValueError("two contract versions share an effective_from")
        self._versions = ordered

    def at(self, *, when: datetime) -> ContractVersion | None:
        index = bisect_right(self._starts, when.astimezone(UTC))
        return self._versions[index - 1] if index else None


class PriceBook:
    """List price versions per (model, token class); the latest in force at t applies."""

    def __init__(self, prices: Iterable[PriceVersion]) -> None:
        grouped: dict[tuple[str, TokenClass], list[PriceVersion]] = {}
        for price in prices:
            grouped.setdefault((price.model, TokenClass(price.token_class)), []).append(price)
        self._starts: dict[tuple[str, TokenClass], list[datetime]] = {}
        self._versions: dict[tuple[str, TokenClass], list[PriceVersion]] = {}
        for key, versions in grouped.items():
            versions.sort(key=lambda p: p.effective_from.astimezone(UTC))
            starts = [p.effective_from.astimezone(UTC) for p in versions]
            if len(set(starts)) != len(starts):
                raise ValueError(f"two prices of {key[0]} {key[1]} share an effective_from")
            self._starts[key] = starts
            self._versions[key] = versions

    def at(self, *, model: str, token_class: TokenClass, when: datetime) -> PriceVersion | None:
        key = (model, token_class)
        starts = self._starts.get(key)
        if starts is None:
            return None
        index = bisect_right(starts, when.astimezone(UTC))
        return self._versions[key][index - 1] if index else None

    def has_any(self, *, model: str, when: datetime) -> bool:
        """Whether the model has a list price in force at `when` for any token class."""
        return any(self.at(model=model, token_class=tc, when=when) for tc in TOKEN_CLASSES)
