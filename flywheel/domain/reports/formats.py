"""Figures as exported: money in cents (half-up), tokens whole, other figures to 1e-10."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT

CENT = Decimal("0.01")

RATIO_PLACES = Decimal("1e-10")


def export_value(value, unit: str, *, currency: str) -> Decimal | int | None:
    """A figure as exported: money in cents (half-up), tokens whole, others to 1e-10."""
    if value is None or isinstance(value, int):
        return value
    with localcontext(KPI_CONTEXT):
        if unit == "tokens":
            return int(value)
        if unit == currency:
            return value.quantize(CENT, rounding=ROUND_HALF_UP)
        return value.quantize(RATIO_PLACES, rounding=ROUND_HALF_UP)


def report_money(value: Decimal | None) -> Decimal | None:
    if value is None:
        return None
    with localcontext(KPI_CONTEXT):
        return value.quantize(CENT, rounding=ROUND_HALF_UP)
