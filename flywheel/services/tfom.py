"""Cost models (per pool) and factory costs: effective-dated, create-only once in force.

The version in force at a period's start applies to the whole period (kpis.md section 5).
Every write and delete leaves an audit entry.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Model

from flywheel.models import CostModel, FactoryCosts
from portal.errors import FieldError
from portal.versions import (
    effective_from_check,
    version_create,
)


def _check_currency(currency: str) -> None:
    if currency != settings.FACTORY_CURRENCY:
        raise FieldError(
            "currency", f"TFOM is kept in the factory currency {settings.FACTORY_CURRENCY}"
        )


def _check_not_negative(**amounts: Decimal) -> None:
    for field, amount in amounts.items():
        if amount < 0:
            raise FieldError(field, "must not be negative")


@transaction.atomic
def cost_model_create(
    *,
    pool: Model,  # a metering Pool
    capex_per_gpu: Decimal,
    depreciation_months: int,
    power_kw_per_gpu: Decimal,
    pue: Decimal,
    electricity_price_per_kwh: Decimal,
    hosting_per_gpu_month: Decimal,
    network_storage_per_gpu_month: Decimal = Decimal(0),
    idle_power_ratio: Decimal = Decimal("0.3"),
    node_power_factor: Decimal = Decimal("1.8"),
    lead_time_months: int = 3,
    effective_from: datetime,
    currency: str | None = None,
    by=None,
) -> CostModel:
    """Add a pool's cost model version; another version of that pool at the same instant is
    a conflict."""
    currency = currency or settings.FACTORY_CURRENCY
    _check_currency(currency)
    effective_from_check(effective_from)
    _check_not_negative(
        capex_per_gpu=capex_per_gpu,
        power_kw_per_gpu=power_kw_per_gpu,
        electricity_price_per_kwh=electricity_price_per_kwh,
        hosting_per_gpu_month=hosting_per_gpu_month,
        network_storage_per_gpu_month=network_storage_per_gpu_month,
    )
    if depreciation_months <= 0:
        raise FieldError("depreciation_months", "must be a positive number of months")
    if pue < 1:
        raise FieldError("pue", "must be at least 1 (facility energy over IT energy)")
    if not 0 <= idle_power_ratio <= 1:
        raise FieldError("idle_power_ratio", "must be between 0 and 1")
    if node_power_factor <= 0:
        raise FieldError("node_power_factor", "must be positive")
    return version_create(
        CostModel(
            pool=pool,
            capex_per_gpu=capex_per_gpu,
            depreciation_months=depreciation_months,
            power_kw_per_gpu=power_kw_per_gpu,
            idle_power_ratio=idle_power_ratio,
            pue=pue,
            electricity_price_per_kwh=electricity_price_per_kwh,
            hosting_per_gpu_month=hosting_per_gpu_month,
            network_storage_per_gpu_month=network_storage_per_gpu_month,
            node_power_factor=node_power_factor,
            lead_time_months=lead_time_months,
            currency=currency,
            effective_from=effective_from,
        ),
        series={"pool": pool},
        conflict=f"pool {pool.slug} already has a cost model from that instant",
        by=by,
    )


@transaction.atomic
def factory_costs_create(
    *,
    staff_per_month: Decimal,
    sga_per_month: Decimal,
    effective_from: datetime,
    currency: str | None = None,
    by=None,
) -> FactoryCosts:
    """Add a factory costs version; another version at the same instant is a conflict."""
    currency = currency or settings.FACTORY_CURRENCY
    _check_currency(currency)
    effective_from_check(effective_from)
    _check_not_negative(staff_per_month=staff_per_month, sga_per_month=sga_per_month)
    return version_create(
        FactoryCosts(
            staff_per_month=staff_per_month,
            sga_per_month=sga_per_month,
            currency=currency,
            effective_from=effective_from,
        ),
        series={},
        conflict="factory costs already have a version from that instant",
        by=by,
    )
