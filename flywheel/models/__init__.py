from flywheel.models.counters import CounterMonth, CounterValue
from flywheel.models.kpis import KpiSnapshot
from flywheel.models.loop import Cycle, Factor, Goal, Lever, LeverApplication
from flywheel.models.plan import CapacityPlan, Forecast
from flywheel.models.tfom import CostModel, FactoryCosts

__all__ = [
    "CapacityPlan",
    "CostModel",
    "CounterMonth",
    "CounterValue",
    "Cycle",
    "Factor",
    "FactoryCosts",
    "Forecast",
    "Goal",
    "KpiSnapshot",
    "Lever",
    "LeverApplication",
]
