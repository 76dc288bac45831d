from flywheel.models.costs import CostModel, FactoryCosts
from flywheel.models.levers import Cycle, Factor, Goal, Lever, LeverApplication
from flywheel.models.snapshots import KpiSnapshot

__all__ = [
    "CostModel",
    "Cycle",
    "Factor",
    "FactoryCosts",
    "Goal",
    "KpiSnapshot",
    "Lever",
    "LeverApplication",
]
