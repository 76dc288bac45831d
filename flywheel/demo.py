"""Demo TFOM inputs from demo-factory.md: a cost model per pool and the factory costs.

Per GPU: all-in capex (server share plus 12.5% network and storage, so no separate
network/storage charge), IT power at full load (DGX H100 ≈ 10.2 kW / 8, DGX B200 ≈ 14.3 kW
/ 8), colocation at 150 per kW-month of IT power. Shared: 60-month straight-line
depreciation, PUE 1.30, electricity 0.083 per kWh; staff 129,000 a month (0.10 per
GPU-hour for 1,768 GPUs) and SG&A 1,300,000 a month (about 15% of expected revenue).
"""

from datetime import UTC, datetime
from decimal import Decimal
from typing import TextIO

from django.db.models import Min

from flywheel.models import CostModel, FactoryCosts
from flywheel.services.costs import cost_model_create, factory_costs_create
from flywheel.services.snapshots import snapshots_measure
from metering.models import HourlyUsage, Pool
from portal import clock
from portal.demo import demo_step

COSTS_FROM = datetime(2026, 1, 1, tzinfo=UTC)
COLOCATION_PER_KW_MONTH = Decimal(150)
# GPU type: (all-in capex per GPU, IT power per GPU at full load in kW)
GPU_COSTS = {
    "H100": (Decimal(45_000), Decimal("1.275")),
    "H200": (Decimal(54_000), Decimal("1.275")),
    "B200": (Decimal(61_900), Decimal("1.79")),
}
SHARED = {
    "depreciation_months": 60,
    "pue": Decimal("1.30"),
    "electricity_price_per_kwh": Decimal("0.083"),
    "idle_power_ratio": Decimal("0.3"),
    "network_storage_per_gpu_month": Decimal(0),  # inside the all-in capex
}
STAFF_PER_MONTH = Decimal(129_000)
SGA_PER_MONTH = Decimal(1_300_000)


@demo_step(50, "flywheel: cost models per pool and factory costs (demo-factory.md TCO inputs)")
def demo_costs(*, stdout: TextIO) -> None:
    for pool in Pool.objects.all():
        costs = GPU_COSTS.get(pool.gpu_type.upper())
        if costs is None or CostModel.objects.filter(pool=pool).exists():
            continue
        capex, power_kw = costs
        cost_model_create(
            pool=pool,
            capex_per_gpu=capex,
            power_kw_per_gpu=power_kw,
            hosting_per_gpu_month=COLOCATION_PER_KW_MONTH * power_kw,
            effective_from=COSTS_FROM,
            **SHARED,
        )
        stdout.write(f"  cost model for {pool.slug}: capex {capex:,} per GPU, {power_kw} kW\n")
    if not FactoryCosts.objects.exists():
        factory_costs_create(
            staff_per_month=STAFF_PER_MONTH, sga_per_month=SGA_PER_MONTH, effective_from=COSTS_FROM
        )


@demo_step(55, "flywheel: KPI snapshots of every demo day and month")
def demo_snapshots(*, stdout: TextIO) -> None:
    """So the overview's trends are full on first start (the measure job keeps them fresh)."""
    now = clock.now()
    first = HourlyUsage.objects.aggregate(first=Min("hour"))["first"]
    if first is None:
        return
    rows = snapshots_measure(start=first, end=now, now=now)
    stdout.write(f"  {len(rows)} snapshots\n")


from flywheel import demo_flywheel  # noqa: E402, F401  (registers the levers, goal and cycle step)
