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

from flywheel.scenarios.baseline import Baseline, measured_tfom, per_month
from flywheel.scenarios.factors import (
    CAPPED,
    FACTORS,
    LABELS,
    ONE,
    SYMBOLS,
    FlywheelError,
    factor_values,
)
from flywheel.scenarios.goals import (
    SEARCH_LIMIT,
    Criterion,
    GoalCheck,
    GoalSpec,
    Proposal,
    cheapest_lever_set,
    goal_check,
)
from flywheel.scenarios.levers import (
    ESTIMATES,
    MONTHS_OF_COST,
    PRIOR_WEIGHT,
    LeverEffect,
    LeverSpec,
    lever_multipliers,
    multiplier_blend,
    realized_split,
)
from flywheel.scenarios.projection import Projection, project

__all__ = [
    "CAPPED",
    "ESTIMATES",
    "FACTORS",
    "LABELS",
    "MONTHS_OF_COST",
    "ONE",
    "PRIOR_WEIGHT",
    "SEARCH_LIMIT",
    "SYMBOLS",
    "Baseline",
    "Criterion",
    "FlywheelError",
    "GoalCheck",
    "GoalSpec",
    "LeverEffect",
    "LeverSpec",
    "Projection",
    "Proposal",
    "cheapest_lever_set",
    "factor_values",
    "goal_check",
    "lever_multipliers",
    "measured_tfom",
    "multiplier_blend",
    "per_month",
    "project",
    "realized_split",
]
