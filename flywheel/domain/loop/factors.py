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
EFFICIENCY_TARGET_MAX = Decimal(10)  # a target η: ten times R_ref is beyond any hardware


def target_refusal(factor: str, target: Decimal) -> str | None:
    """Why `target` is no target for `factor`, or None: the capped factors in (0, 1], η in
    (0, 10]."""
    top = EFFICIENCY_TARGET_MAX if factor not in CAPPED else ONE
    if not 0 < target <= top:
        return f"must be in (0, {top}]"
    return None


def factor_values(kpis) -> dict[str, Decimal | None]:
    """The six factors of a Kpis (or Tfom), by name."""
    return {factor: getattr(kpis, factor) for factor in FACTORS}
