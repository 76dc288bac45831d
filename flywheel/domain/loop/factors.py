"""The six factors of the chain (α, β, η, σ, s, ρ): names, symbols, labels, which cap at 1."""

from __future__ import annotations

from decimal import Decimal

FACTORS = (
    "availability",
    "occupancy",
    "efficiency",
    "sla_delivery",
    "sell_through",
    "price_realization",
)

SYMBOLS = {
    "availability": "α",
    "occupancy": "β",
    "efficiency": "η",
    "sla_delivery": "σ",
    "sell_through": "s",
    "price_realization": "ρ",
}

LABELS = {
    "availability": "availability",
    "occupancy": "occupancy",
    "efficiency": "efficiency",
    "sla_delivery": "SLA delivery",
    "sell_through": "sell-through",
    "price_realization": "price realization",
}

CAPPED = frozenset(FACTORS) - {"efficiency"}  # η exceeds 1 when a deployment beats R_ref

ONE = Decimal(1)


def factor_values(kpis) -> dict[str, Decimal | None]:
    """The six factors of a Kpis (or Tfom), by name."""
    return {factor: getattr(kpis, factor) for factor in FACTORS}
