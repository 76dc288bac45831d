from .snapshots import KpiSnapshot

__all__ = ["KpiSnapshot"]
