"""The six factors of the chain (α, β, η, σ, s, ρ): names, which cap at 1, and their symbols
and labels as their declarations say (flywheel.domain.kpis)."""

from __future__ import annotations

from decimal import Decimal

from flywheel.domain.kpis import KPI

FACTORS = (
    "availability",
    "occupancy",
    "efficiency",
    "sla_delivery",
    "sell_through",
    "price_realization",
)

SYMBOLS = {factor: KPI[factor].symbol for factor in FACTORS}

LABELS = {factor: KPI[factor].label for factor in FACTORS}

CAPPED = frozenset(FACTORS) - {"efficiency"}  # η exceeds 1 when a deployment beats R_ref

ONE = Decimal(1)


def factor_values(kpis) -> dict[str, Decimal | None]:
    """The six factors of a Kpis (or Tfom), by name."""
    return {factor: getattr(kpis, factor) for factor in FACTORS}
