from .costs import CostModel, FactoryCosts
from .levers import Cycle, Factor, Goal, Lever, LeverApplication
from .snapshots import KpiSnapshot

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
