"""Scenarios: project every KPI and TFOM figure of a measured period when levers or direct
factor targets move α, β, η, σ, s, ρ (kpis.md section 6, steps 3 and 4). Pure: imports no
Django; Decimal throughout, every division in KPI_CONTEXT.

How a projection moves the factory. Each factor is a weighted mean of its pools' ratios
(α weighted by C, β by A, η by B, σ by Σstd, s by compliant Σstd, ρ by list value). The
projected factory value of a factor is its direct target when one is given, else its
measured value, then multiplied by every lever that moves it (several levers multiply);
α, β, σ, s, ρ are capped at 1. It is spread over the pools so that the factory reaches it
exactly and no pool leaves [0, 1]: raising a capped factor shrinks every pool's gap to 1 in
the same proportion; lowering one (or moving η) scales every pool's ratio by the same
factor. Factors are applied in the chain's order, so A, B, Σstd and the sales sums follow
from the factors before them; a factor nothing moves stays at its measured factory value.

What follows from the projected sums, pool by pool:
- list value per compliant, paid std GPU-second stays as measured, so realized revenue
  scales with TFI; minimum-commitment shortfalls and SLA credits are held as measured;
- production and output tokens scale with Σstd, paid output tokens with compliant paid
  Σstd (the token mix and R_ref stay as measured);
- energy follows the projected A and B through the energy formula (a pool on DCGM-measured
  energy scales it by the formula's ratio); depreciation and hosting do not move (same
  installed GPUs);
- a lever's monthly cost is operating cost: the projection adds it to opex. Its one-time
  cost is not part of EBITDA; goal seeking ranks lever sets by one-time + 12 × monthly.

A lever's multipliers are priors (published uplifts). Once applied, the cycle that
measures it blends what was realized into its typical multiplier: `multiplier_blend`.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal, localcontext

from .kpis import KPI_CONTEXT, ZERO, PoolInputs, kpis_compute, period_seconds
from .tfom import (
    DEFAULT_BASELINE_TEF,
    SECONDS_PER_MONTH,
    FactoryCosts,
    PoolTfomInputs,
    Tfom,
    pool_energy_kwh,
    tfom_compute,
)

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
ESTIMATES = ("low", "typical", "high")
ONE = Decimal(1)
MONTHS_OF_COST = 12  # a lever set's cost: one-time + 12 × monthly
# The published prior counts as one observation in the running mean of realized multipliers.
PRIOR_WEIGHT = 1
SEARCH_LIMIT = 4096  # lever subsets tried at most when seeking the cheapest set


class FlywheelError(Exception):
    """Invalid or refused flywheel input; `field` names the offending input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, kw_only=True)
class Baseline:
    """A measured period: every pool's TFOM inputs, the factory costs and revenue items."""

    start: datetime
    end: datetime
    pools: tuple[PoolTfomInputs, ...]
    factory_costs: FactoryCosts
    minimum_shortfall: Decimal = ZERO  # money over the period, held in projections
    sla_credits: Decimal = ZERO  # money over the period, held in projections
    baseline_tef: Decimal = DEFAULT_BASELINE_TEF
    scope: str = "factory"


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


@dataclass(frozen=True, kw_only=True)
class GoalSpec:
    """What the factory aims for; a criterion left None is not checked."""

    min_gross_margin: Decimal | None = None  # ratio
    min_ebitda_per_month: Decimal | None = None  # money per month
    min_tfi: Decimal | None = None  # ratio

    @property
    def is_empty(self) -> bool:
        return (
            self.min_gross_margin is None
            and self.min_ebitda_per_month is None
            and (self.min_tfi is None)
        )


@dataclass(frozen=True, kw_only=True)
class Criterion:
    key: str  # gross_margin | ebitda_per_month | tfi
    label: str
    required: Decimal
    actual: Decimal | None
    is_met: bool


@dataclass(frozen=True, kw_only=True)
class GoalCheck:
    criteria: tuple[Criterion, ...]

    @property
    def is_met(self) -> bool:
        return all(c.is_met for c in self.criteria)


@dataclass(frozen=True, kw_only=True)
class Projection:
    """A scenario's outcome: the measured and the projected TFOM of the same period."""

    start: datetime
    end: datetime
    measured: Tfom
    tfom: Tfom
    levers: tuple[str, ...] = ()
    targets: Mapping[str, Decimal] = field(default_factory=dict)
    estimate: str = "typical"
    one_time_cost: Decimal = ZERO
    monthly_cost: Decimal = ZERO
    pools: tuple[PoolInputs, ...] = ()  # each pool's projected sums

    @property
    def cost(self) -> Decimal:
        return self.one_time_cost + MONTHS_OF_COST * self.monthly_cost

    def per_month(self, amount: Decimal) -> Decimal:
        return per_month(amount, start=self.start, end=self.end)

    @property
    def ebitda_per_month(self) -> Decimal:
        return self.per_month(self.tfom.ebitda)

    @property
    def ebitda_gain_per_month(self) -> Decimal:
        return self.per_month(self.tfom.ebitda - self.measured.ebitda)


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """The cheapest lever set that meets a goal, or why there is none."""

    is_found: bool
    levers: tuple[str, ...]
    cost: Decimal  # one-time + 12 × monthly
    projection: Projection | None
    subsets_checked: int
    is_exhaustive: bool  # False: the search stopped at its limit before trying every set
    message: str


def per_month(amount: Decimal, *, start: datetime, end: datetime) -> Decimal:
    """An amount over [start, end) expressed per month (365/12 days)."""
    with localcontext(KPI_CONTEXT):
        return amount * SECONDS_PER_MONTH / period_seconds(start=start, end=end)


def measured_tfom(baseline: Baseline) -> Tfom:
    """The TFOM of the period as measured (what tfom_measure gives for the same inputs)."""
    return _tfom(baseline, [p.pool for p in baseline.pools], baseline.pools, ZERO)


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


def factor_values(kpis) -> dict[str, Decimal | None]:
    """The six factors of a Kpis (or Tfom), by name."""
    return {factor: getattr(kpis, factor) for factor in FACTORS}


def project(
    *,
    baseline: Baseline,
    levers: Sequence[LeverSpec] = (),
    targets: Mapping[str, Decimal] | None = None,
    estimate: str = "typical",
    measured: Tfom | None = None,
) -> Projection:
    """Project the period with `targets` (factor → value, replacing the measured value)
    and `levers` (multiplying it), each multiplier at `estimate`; see the module docstring."""
    targets = dict(targets or {})
    for factor, value in targets.items():
        if factor not in FACTORS:
            raise ValueError(f"unknown factor {factor!r}")
        if factor in CAPPED and not ZERO <= value <= ONE:
            raise ValueError(f"{factor}: a target must be between 0 and 1")
        if value < 0:
            raise ValueError(f"{factor}: a target must not be negative")
    measured = measured if measured is not None else measured_tfom(baseline)
    multipliers = lever_multipliers(levers, estimate)
    levels: dict[str, Decimal | None] = {}  # the factors moved, at their projected level
    with localcontext(KPI_CONTEXT):
        for factor in FACTORS:
            if factor not in targets and factor not in multipliers:
                continue
            level = targets.get(factor, getattr(measured, factor))
            if level is not None and factor in multipliers:
                level = level * multipliers[factor]
                if factor in CAPPED:
                    level = min(level, ONE)
            levels[factor] = level
    pools = _project_pools(baseline, levels, measured)
    monthly = sum((lever.monthly_cost for lever in levers), ZERO)
    projected_inputs = [
        replace(
            item,
            pool=pool,
            measured_gpu_energy_kwh=_scaled_energy(item, pool),
        )
        for item, pool in zip(baseline.pools, pools, strict=True)
    ]
    tfom = _tfom(baseline, pools, projected_inputs, monthly)
    return Projection(
        start=baseline.start,
        end=baseline.end,
        measured=measured,
        tfom=tfom,
        levers=tuple(lever.slug for lever in levers),
        targets=targets,
        estimate=estimate,
        one_time_cost=sum((lever.one_time_cost for lever in levers), ZERO),
        monthly_cost=monthly,
        pools=tuple(pools),
    )


def goal_check(*, goal: GoalSpec, tfom: Tfom, start: datetime, end: datetime) -> GoalCheck:
    """Compare a (measured or projected) TFOM with each criterion the goal sets."""
    criteria = []
    if goal.min_gross_margin is not None:
        actual = tfom.gross_margin
        criteria.append(
            Criterion(
                key="gross_margin",
                label="gross margin",
                required=goal.min_gross_margin,
                actual=actual,
                is_met=actual is not None and actual >= goal.min_gross_margin,
            )
        )
    if goal.min_ebitda_per_month is not None:
        actual = per_month(tfom.ebitda, start=start, end=end)
        criteria.append(
            Criterion(
                key="ebitda_per_month",
                label="EBITDA per month",
                required=goal.min_ebitda_per_month,
                actual=actual,
                is_met=actual >= goal.min_ebitda_per_month,
            )
        )
    if goal.min_tfi is not None:
        actual = tfom.tfi
        criteria.append(
            Criterion(
                key="tfi",
                label="TFI",
                required=goal.min_tfi,
                actual=actual,
                is_met=actual is not None and actual >= goal.min_tfi,
            )
        )
    return GoalCheck(criteria=tuple(criteria))


def cheapest_lever_set(
    *,
    baseline: Baseline,
    goal: GoalSpec,
    levers: Sequence[LeverSpec],
    targets: Mapping[str, Decimal] | None = None,
    measured: Tfom | None = None,
    limit: int = SEARCH_LIMIT,
) -> Proposal:
    """The lever set of least cost (one-time + 12 × monthly; ties: fewer levers, then slugs)
    whose projection at typical multipliers meets `goal`, or a message saying none does.

    Best-first search: levers sorted by cost, subsets grown only with costlier levers, so
    subsets leave the heap in order of cost and the first one that meets the goal is the
    cheapest. At most `limit` subsets are projected."""
    if goal.is_empty:
        return Proposal(
            is_found=False,
            levers=(),
            cost=ZERO,
            projection=None,
            subsets_checked=0,
            is_exhaustive=True,
            message="no goal is set",
        )
    measured = measured if measured is not None else measured_tfom(baseline)
    ordered = sorted(levers, key=lambda lever: (lever.cost, lever.slug))
    if len({lever.slug for lever in ordered}) != len(ordered):
        raise ValueError("each lever may appear once")
    heap: list[tuple[Decimal, int, tuple[str, ...], tuple[int, ...]]] = [(ZERO, 0, (), ())]
    checked = 0
    while heap:
        if checked >= limit:
            return Proposal(
                is_found=False,
                levers=(),
                cost=ZERO,
                projection=None,
                subsets_checked=checked,
                is_exhaustive=False,
                message=f"no lever set met the goal within the first {limit:,} sets tried "
                "(cheapest first); narrow the catalogue or relax the goal",
            )
        cost, _, slugs, indices = heapq.heappop(heap)
        chosen = [ordered[i] for i in indices]
        projection = project(baseline=baseline, levers=chosen, targets=targets, measured=measured)
        checked += 1
        if goal_check(
            goal=goal, tfom=projection.tfom, start=baseline.start, end=baseline.end
        ).is_met:
            names = ", ".join(slugs) if slugs else "no lever"
            return Proposal(
                is_found=True,
                levers=slugs,
                cost=cost,
                projection=projection,
                subsets_checked=checked,
                is_exhaustive=True,
                message=f"cheapest set meeting the goal: {names}",
            )
        for j in range((indices[-1] + 1) if indices else 0, len(ordered)):
            grown = (*indices, j)
            heapq.heappush(
                heap,
                (
                    cost + ordered[j].cost,
                    len(grown),
                    tuple(sorted(ordered[i].slug for i in grown)),
                    grown,
                ),
            )
    return Proposal(
        is_found=False,
        levers=(),
        cost=ZERO,
        projection=None,
        subsets_checked=checked,
        is_exhaustive=True,
        message="no set of the available levers meets the goal, even all of them together",
    )


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


# ---------------------------------------------------------------- projection internals


def _tfom(
    baseline: Baseline,
    pools: Sequence[PoolInputs],
    items: Sequence[PoolTfomInputs],
    lever_monthly_cost: Decimal,
) -> Tfom:
    kpis = kpis_compute(scope=baseline.scope, start=baseline.start, end=baseline.end, pools=pools)
    costs = baseline.factory_costs
    if lever_monthly_cost:
        costs = FactoryCosts(
            staff_per_month=costs.staff_per_month,
            sga_per_month=costs.sga_per_month + lever_monthly_cost,
        )
    return tfom_compute(
        kpis=kpis,
        pools=items,
        factory_costs=costs,
        minimum_shortfall=baseline.minimum_shortfall,
        sla_credits=baseline.sla_credits,
        baseline_tef=baseline.baseline_tef,
    )


def _div(numerator: Decimal, denominator: Decimal) -> Decimal | None:
    if denominator == 0:
        return None
    with localcontext(KPI_CONTEXT):
        return numerator / denominator


def _move(
    weights: Sequence[Decimal],
    ratios: Sequence[Decimal | None],
    level: Decimal | None,
    capped: bool,
) -> list[Decimal]:
    """Pool ratios whose weighted mean is `level` (None: the ratios as they are). A ratio
    nothing was measured under counts as 0 (no pool to learn it from)."""
    filled = [ZERO if r is None else r for r in ratios]
    total = sum(weights, ZERO)
    if level is None or total == 0:
        return filled
    with localcontext(KPI_CONTEXT):
        current = sum((w * r for w, r in zip(weights, filled, strict=True)), ZERO) / total
        if level == current:
            return filled
        if capped and level > current:
            # Shrink every pool's gap to 1 in the same proportion: stays in [0, 1].
            keep = (ONE - level) / (ONE - current)
            return [ONE - (ONE - r) * keep for r in filled]
        if current == 0:
            return [level for _ in filled]
        scale = level / current
        return [r * scale for r in filled]


def _project_pools(
    baseline: Baseline, moved: Mapping[str, Decimal | None], measured: Tfom
) -> list[PoolInputs]:
    """Each pool's sums with the `moved` factors at their level and every other factor at
    its measured factory value (see the module docstring)."""
    pools = [item.pool for item in baseline.pools]
    levels: dict[str, Decimal | None] = {}
    is_upstream_moved = False
    for factor in FACTORS:
        if factor in moved:
            levels[factor] = moved[factor]
            is_upstream_moved = True
        elif is_upstream_moved:
            # Its weights moved: spread the measured factory value over them again.
            levels[factor] = getattr(measured, factor)
        else:
            levels[factor] = None  # nothing before it moved: every pool keeps its sums
    with localcontext(KPI_CONTEXT):
        calendar = [p.calendar_gpu_seconds for p in pools]
        alpha = _move(
            calendar,
            [_div(p.available_gpu_seconds, p.calendar_gpu_seconds) for p in pools],
            levels["availability"],
            capped=True,
        )
        available = [
            _keep(p.available_gpu_seconds, c * a, _div(p.available_gpu_seconds, c), a)
            for p, c, a in zip(pools, calendar, alpha, strict=True)
        ]
        beta = _move(
            available,
            [_div(p.busy_gpu_seconds, p.available_gpu_seconds) for p in pools],
            levels["occupancy"],
            capped=True,
        )
        busy = [
            _same(p.busy_gpu_seconds, p.available_gpu_seconds, a, b, a * b)
            for p, a, b in zip(pools, available, beta, strict=True)
        ]
        eta = _move(
            busy,
            [_div(p.std_gpu_seconds, p.busy_gpu_seconds) for p in pools],
            levels["efficiency"],
            capped=False,
        )
        std = [
            _same(p.std_gpu_seconds, p.busy_gpu_seconds, b, e, b * e)
            for p, b, e in zip(pools, busy, eta, strict=True)
        ]
        sigma = _move(
            std,
            [_div(p.compliant_std_gpu_seconds, p.std_gpu_seconds) for p in pools],
            levels["sla_delivery"],
            capped=True,
        )
        compliant = [
            _same(p.compliant_std_gpu_seconds, p.std_gpu_seconds, s, g, s * g)
            for p, s, g in zip(pools, std, sigma, strict=True)
        ]
        sell = _move(
            compliant,
            [_div(p.compliant_paid_std_gpu_seconds, p.compliant_std_gpu_seconds) for p in pools],
            levels["sell_through"],
            capped=True,
        )
        paid = [
            _same(p.compliant_paid_std_gpu_seconds, p.compliant_std_gpu_seconds, c, s, c * s)
            for p, c, s in zip(pools, compliant, sell, strict=True)
        ]
        # List value per compliant paid std GPU-second: the pool's own, else the factory's.
        factory_price = _div(
            sum((p.list_value for p in pools), ZERO),
            sum((p.compliant_paid_std_gpu_seconds for p in pools), ZERO),
        )
        list_value = []
        for p, sold in zip(pools, paid, strict=True):
            if sold == p.compliant_paid_std_gpu_seconds:
                list_value.append(p.list_value)
            else:
                price = _div(p.list_value, p.compliant_paid_std_gpu_seconds) or factory_price
                list_value.append(sold * price if price is not None else ZERO)
        rho = _move(
            list_value,
            [_div(p.realized_revenue, p.list_value) for p in pools],
            levels["price_realization"],
            capped=True,
        )
        realized = [
            _same(p.realized_revenue, p.list_value, v, r, v * r)
            for p, v, r in zip(pools, list_value, rho, strict=True)
        ]
        return [
            _pool_inputs(
                p, available[i], busy[i], std[i], compliant[i], paid[i], list_value[i], realized[i]
            )
            for i, p in enumerate(pools)
        ]


def _keep(
    measured: Decimal, projected: Decimal, ratio: Decimal | None, new_ratio: Decimal
) -> Decimal:
    """The measured sum when its ratio did not move (exact identity), else the projection."""
    return measured if ratio is not None and ratio == new_ratio else projected


def _same(
    measured: Decimal,
    measured_base: Decimal,
    base: Decimal,
    new_ratio: Decimal,
    projected: Decimal,
) -> Decimal:
    """`measured` when neither its base sum nor its ratio moved, else `projected`."""
    if base == measured_base and _div(measured, measured_base) == new_ratio:
        return measured
    if base == measured_base and measured_base == 0:
        return measured
    return projected


def _scale_int(value: int, numerator: Decimal, denominator: Decimal) -> int:
    if numerator == denominator:
        return value
    if denominator == 0:
        return 0
    with localcontext(KPI_CONTEXT):
        return int((value * numerator / denominator).to_integral_value())


def _pool_inputs(
    pool: PoolInputs,
    available: Decimal,
    busy: Decimal,
    std: Decimal,
    compliant: Decimal,
    paid: Decimal,
    list_value: Decimal,
    realized: Decimal,
) -> PoolInputs:
    with localcontext(KPI_CONTEXT):
        if std == pool.std_gpu_seconds:
            production = pool.production_tokens
        elif pool.std_gpu_seconds > 0:
            production = pool.production_tokens * std / pool.std_gpu_seconds
        else:
            rates = pool.deployment_r_refs
            production = std * (sum(rates, ZERO) / len(rates)) if rates else ZERO
        if pool.std_gpu_seconds > 0:
            output = _scale_int(pool.output_tokens, std, pool.std_gpu_seconds)
        else:
            output = int(production.to_integral_value())
        if pool.compliant_paid_std_gpu_seconds > 0:
            paid_output = _scale_int(
                pool.paid_output_tokens, paid, pool.compliant_paid_std_gpu_seconds
            )
        elif std > 0:
            paid_output = int((output * paid / std).to_integral_value())
        else:
            paid_output = 0
    busy = min(busy, available)
    compliant = min(compliant, std)
    paid = min(paid, compliant)
    return replace(
        pool,
        available_gpu_seconds=available,
        busy_gpu_seconds=busy,
        std_gpu_seconds=std,
        production_tokens=production,
        compliant_std_gpu_seconds=compliant,
        compliant_paid_std_gpu_seconds=paid,
        output_tokens=output,
        paid_output_tokens=min(paid_output, output),
        list_value=list_value,
        realized_revenue=min(realized, list_value),
    )


def _scaled_energy(item: PoolTfomInputs, projected: PoolInputs) -> Decimal | None:
    """DCGM-measured energy scaled by the energy formula's ratio, projected over measured."""
    if item.measured_gpu_energy_kwh is None:
        return None
    before = pool_energy_kwh(
        cost_model=item.cost_model,
        available_gpu_seconds=item.pool.available_gpu_seconds,
        busy_gpu_seconds=item.pool.busy_gpu_seconds,
    )
    after = pool_energy_kwh(
        cost_model=item.cost_model,
        available_gpu_seconds=projected.available_gpu_seconds,
        busy_gpu_seconds=projected.busy_gpu_seconds,
    )
    if before == after:
        return item.measured_gpu_energy_kwh
    if before == 0:
        return None  # nothing to scale: the formula takes over
    with localcontext(KPI_CONTEXT):
        return item.measured_gpu_energy_kwh * after / before
