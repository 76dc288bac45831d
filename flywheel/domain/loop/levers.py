"""Levers: what each moves and costs, and how realized outcomes refine its multipliers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT, ZERO
from flywheel.domain.loop.factors import FACTORS, ONE

ESTIMATES = ("low", "typical", "high")

MONTHS_OF_COST = 12  # a lever set's cost: one-time + 12 × monthly

# The published prior counts as one observation in the running mean of realized multipliers.
PRIOR_WEIGHT = 1


@dataclass(frozen=True, kw_only=True)
class LeverEffect:
    """How a lever moves one factor: multipliers, low ≤ typical ≤ high."""

    factor: str
    low: Decimal
    typical: Decimal
    high: Decimal

    def __post_init__(self) -> None:
        if self.factor not in FACTORS:
            raise ValueError(f"unknown factor {self.factor!r}")
        if not ZERO < self.low <= self.typical <= self.high:
            raise ValueError(f"{self.factor}: needs 0 < low <= typical <= high")

    def multiplier(self, estimate: str = "typical") -> Decimal:
        if estimate not in ESTIMATES:
            raise ValueError(f"estimate must be one of {', '.join(ESTIMATES)}")
        return getattr(self, estimate)


@dataclass(frozen=True, kw_only=True)
class LeverSpec:
    """A lever as the engine sees it: the factors it moves and what it costs."""

    slug: str
    name: str = ""
    effects: tuple[LeverEffect, ...] = ()
    one_time_cost: Decimal = ZERO  # money
    monthly_cost: Decimal = ZERO  # money per month

    @property
    def cost(self) -> Decimal:
        """One-time + 12 × monthly: what goal seeking minimises."""
        return self.one_time_cost + MONTHS_OF_COST * self.monthly_cost

    @property
    def moves_nothing(self) -> bool:
        """No factor rises at its typical multiplier: already in place for this factory (its
        realized effect was 1), so never proposed."""
        return all(effect.typical <= 1 for effect in self.effects)


def lever_multipliers(levers: Sequence[LeverSpec], estimate: str = "typical") -> dict[str, Decimal]:
    """Per factor, the product of the multipliers of every lever that moves it."""
    product: dict[str, Decimal] = {}
    with localcontext(KPI_CONTEXT):
        for lever in levers:
            for effect in lever.effects:
                product[effect.factor] = product.get(effect.factor, ONE) * effect.multiplier(
                    estimate
                )
    return product


def multiplier_blend(*, prior: Decimal, realized: Decimal, observations: int) -> Decimal:
    """The lever's new typical multiplier: the running mean of the published prior (weight
    PRIOR_WEIGHT = 1) and every realized multiplier so far. `prior` is the current typical,
    which already folds in `observations` realized ones:
    (prior × (1 + observations) + realized) / (2 + observations)."""
    if observations < 0:
        raise ValueError("observations must be non-negative")
    with localcontext(KPI_CONTEXT):
        weight = PRIOR_WEIGHT + observations
        return (prior * weight + realized) / (weight + 1)


def realized_split(
    *, realized_ratio: Decimal, multipliers: Mapping[str, Decimal]
) -> dict[str, Decimal]:
    """Attribute a factor's realized ratio (after / before) to the levers that moved it, in
    proportion to their projected log-uplifts: lever i gets m_i ** (ln R / ln Π m). A single
    lever gets R itself; when the projected product is 1 each of k levers gets R ** (1/k)."""
    if realized_ratio <= 0:
        raise ValueError("realized ratio must be positive")
    if not multipliers:
        return {}
    with localcontext(KPI_CONTEXT):
        if len(multipliers) == 1:
            return dict.fromkeys(multipliers, realized_ratio)
        log_product = sum((m.ln() for m in multipliers.values()), ZERO)
        log_realized = realized_ratio.ln()
        if log_product == 0:
            share = log_realized / len(multipliers)
            return {slug: share.exp() for slug in multipliers}
        return {
            slug: (m.ln() * log_realized / log_product).exp() for slug, m in multipliers.items()
        }
