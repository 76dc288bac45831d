"""Figures as exported: money in cents (half-up), tokens whole, other figures to 1e-10."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT
from portal.money import round_money

RATIO_PLACES = Decimal("1e-10")


def export_value(value, unit: str, *, currency: str) -> Decimal | int | None:
    """A figure as exported: money in cents (half-up), tokens whole, others to 1e-10."""
    if value is None or isinstance(value, int):
        return value
    with localcontext(KPI_CONTEXT):
        if unit == "tokens":
            return int(value)
        if unit == currency:
            return round_money(amount=value, currency=currency)
        return value.quantize(RATIO_PLACES, rounding=ROUND_HALF_UP)


def report_money(value: Decimal | None, *, currency: str) -> Decimal | None:
    return None if value is None else round_money(amount=value, currency=currency)
