"""Levers: what each moves and costs, and how realized outcomes refine its multipliers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import cast

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
    """A lever as the engine sees it: the factors it moves, where, the GPUs it takes out
    of service, and what it costs.

    `pool` None: the lever moves the factory's factors (spread over the pools). A pool:
    it moves that pool's own ratios, by `share` of each multiplier's step (a lever scoped
    to a deployment reaches the deployment's share of its pool's production:
    1 + share × (m − 1)). `gpus_withdrawn` GPUs of its pool leave service: calendar and
    available GPU-seconds fall with them (busy time as the demand says: pools_withdraw),
    and so do depreciation, hosting and idle power through the section-5 formulas."""

    slug: str
    name: str = ""
    effects: tuple[LeverEffect, ...] = ()
    one_time_cost: Decimal = ZERO  # money
    monthly_cost: Decimal = ZERO  # money per month
    pool: str | None = None  # slug of the pool it is scoped to
    share: Decimal = ONE  # the part of the pool it reaches (a deployment's share)
    gpus_withdrawn: int = 0  # GPUs of `pool` taken out of service

    def __post_init__(self) -> None:
        if not ZERO <= self.share <= ONE:
            raise ValueError(f"{self.slug}: share must be in [0, 1]")
        if self.gpus_withdrawn < 0:
            raise ValueError(f"{self.slug}: gpus_withdrawn must not be negative")
        if self.gpus_withdrawn and self.pool is None:
            raise ValueError(f"{self.slug}: GPUs are withdrawn from a pool: name it")

    @property
    def cost(self) -> Decimal:
        """One-time + 12 × monthly: what goal seeking minimises."""
        return self.one_time_cost + MONTHS_OF_COST * self.monthly_cost

    @property
    def moves_nothing(self) -> bool:
        """No factor rises at its typical multiplier and no GPU leaves service: already in
        place for this factory (its realized effect was 1), so never proposed."""
        return not self.gpus_withdrawn and all(effect.typical <= 1 for effect in self.effects)


def lever_multipliers(levers: Sequence[LeverSpec], estimate: str = "typical") -> dict[str, Decimal]:
    """Per factor, the product of the multipliers of every factory-wide lever that moves it."""
    return _product([lever for lever in levers if lever.pool is None], estimate).get(None, {})


def pool_multipliers(
    levers: Sequence[LeverSpec], estimate: str = "typical"
) -> dict[str, dict[str, Decimal]]:
    """Per pool and factor, the product of the multipliers of the levers scoped to it, each
    reaching its share: 1 + share × (m − 1)."""
    scoped = [lever for lever in levers if lever.pool is not None]
    return {pool: factors for pool, factors in _product(scoped, estimate).items() if pool}


def _product(levers: Sequence[LeverSpec], estimate: str) -> dict[str | None, dict[str, Decimal]]:
    product: dict[str | None, dict[str, Decimal]] = {}
    with localcontext(KPI_CONTEXT):
        for lever in levers:
            factors = product.setdefault(lever.pool, {})
            for effect in lever.effects:
                step = ONE + lever.share * (effect.multiplier(estimate) - ONE)
                factors[effect.factor] = factors.get(effect.factor, ONE) * step
    return product


def gpus_withdrawn(levers: Sequence[LeverSpec]) -> dict[str, int]:
    """Per pool, the GPUs the levers take out of service."""
    withdrawn: dict[str, int] = {}
    for lever in levers:
        if lever.gpus_withdrawn:
            pool = cast(str, lever.pool)  # a lever that withdraws GPUs names its pool
            withdrawn[pool] = withdrawn.get(pool, 0) + lever.gpus_withdrawn
    return withdrawn


def expected_moves(
    multipliers: Mapping[str, Decimal], *, is_bounded: bool
) -> dict[str, tuple[Decimal, bool]]:
    """What an applied lever's multipliers were projected to do to each factor, and whether
    the factor's realized change teaches the lever anything. Under a bounded (measured)
    demand occupancy follows the busy time the same production needs: × 1 / (m_α × m_η),
    never learned from; every other factor as its multiplier."""
    moves = {factor: (m, True) for factor, m in multipliers.items()}
    if is_bounded and {"availability", "efficiency", "occupancy"} & multipliers.keys():
        with localcontext(KPI_CONTEXT):
            moves["occupancy"] = (
                ONE / (multipliers.get("availability", ONE) * multipliers.get("efficiency", ONE)),
                False,
            )
    return moves


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
