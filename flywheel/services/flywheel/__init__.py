"""Writes of the flywheel: lever and goal versions (effective-dated, create-only once in
force), lever applications, and the cycle (measure → diagnose → learn from applied levers
→ check the goal → propose levers), upserted on its period. Every write leaves an audit
entry.

How a lever's typical multiplier learns (kpis.md section 6, step 4). When a lever is
marked applied, the factors measured over the 7 days before it and the version's typical
multipliers are recorded. The first cycle whose measured period starts at or after the
application compares each factor it moves: realized ratio R = after / before, projected
ratio = min(1, before × m) / before (σ, s, ρ, α, β capped at 1). Levers evaluated in the
same cycle on the same factor share R in proportion to their projected log-uplifts
(`scenarios.realized_split`). A projection capped at 1 that the factor reached tells
nothing against the prior, so it confirms m. The lever then gets a new version whose
typical multiplier is the running mean of the published prior (weighing as one
observation) and every realized multiplier: typical' = (typical × (1 + n) + realized) /
(2 + n), n the observations so far (`scenarios.multiplier_blend`); low and high widen to
keep low ≤ typical ≤ high.
"""

from flywheel.scenarios import FlywheelError
from flywheel.services.flywheel.applications import lever_application_delete, lever_apply
from flywheel.services.flywheel.cycle import cycle_run
from flywheel.services.flywheel.versions import (
    effects_clean,
    goal_create,
    lever_create,
    version_delete,
)

__all__ = [
    "FlywheelError",
    "cycle_run",
    "effects_clean",
    "goal_create",
    "lever_application_delete",
    "lever_apply",
    "lever_create",
    "version_delete",
]
