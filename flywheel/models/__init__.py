from .costs import CostModel, FactoryCosts
from .snapshots import KpiSnapshot

__all__ = ["CostModel", "FactoryCosts", "KpiSnapshot"]
