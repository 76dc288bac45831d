from decimal import Decimal

from django.db import models
from django.db.models import Q

from portal.models import EffectiveDated
from portal.periods import validate_whole_hour


class CostModel(EffectiveDated):
    """A pool's TCO inputs (kpis.md section 5) in force from `effective_from` (a whole UTC
    hour) until the next version; the version in force at a period's start applies to it.
    Create-only once in force; deletable only before it takes effect."""

    audit_type = "cost_model"

    pool = models.ForeignKey("metering.Pool", on_delete=models.PROTECT, related_name="cost_models")
    capex_per_gpu = models.DecimalField(max_digits=20, decimal_places=4)  # money, all-in per GPU
    depreciation_months = models.PositiveIntegerField()  # straight line
    # kW of IT power per GPU at full load, node share included
    power_kw_per_gpu = models.DecimalField(max_digits=12, decimal_places=6)
    # idle draw over full-load draw, for healthy GPUs not serving
    idle_power_ratio = models.DecimalField(max_digits=7, decimal_places=6, default=Decimal("0.3"))
    pue = models.DecimalField(max_digits=7, decimal_places=4)  # facility / IT energy, >= 1
    electricity_price_per_kwh = models.DecimalField(max_digits=20, decimal_places=10)  # money
    hosting_per_gpu_month = models.DecimalField(max_digits=20, decimal_places=4)  # money
    network_storage_per_gpu_month = models.DecimalField(
        max_digits=20, decimal_places=4, default=Decimal(0)
    )  # money
    # Node power per GPU over the GPU's own, applied to DCGM-measured GPU energy.
    node_power_factor = models.DecimalField(max_digits=7, decimal_places=4, default=Decimal("1.8"))
    currency = models.CharField(max_length=3)
    # Months between ordering GPUs for the pool and their serving (kpis.md 6c: the plan
    # orders its additions this long before the month that needs them).
    lead_time_months = models.PositiveIntegerField(default=3)

    class Meta:
        ordering = ["pool__slug", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["pool", "effective_from"], name="cost_model_version_unique"
            ),
            models.CheckConstraint(
                condition=Q(depreciation_months__gt=0), name="cost_model_depreciation_positive"
            ),
            models.CheckConstraint(condition=Q(pue__gte=1), name="cost_model_pue_at_least_1"),
            models.CheckConstraint(
                condition=Q(idle_power_ratio__gte=0) & Q(idle_power_ratio__lte=1),
                name="cost_model_idle_power_ratio_0_to_1",
            ),
            models.CheckConstraint(
                condition=Q(capex_per_gpu__gte=0)
                & Q(power_kw_per_gpu__gte=0)
                & Q(electricity_price_per_kwh__gte=0)
                & Q(hosting_per_gpu_month__gte=0)
                & Q(network_storage_per_gpu_month__gte=0)
                & Q(node_power_factor__gt=0),
                name="cost_model_amounts_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pool} from {self.effective_from:%Y-%m-%d %H:00}"


class FactoryCosts(EffectiveDated):
    """Factory-level monthly costs (staff, SG&A) in force from `effective_from` (a whole UTC
    hour) until the next version. Create-only once in force."""

    audit_type = "factory_costs"

    staff_per_month = models.DecimalField(max_digits=20, decimal_places=4)  # money
    sga_per_month = models.DecimalField(max_digits=20, decimal_places=4)  # money
    currency = models.CharField(max_length=3)
    effective_from = models.DateTimeField(unique=True, validators=[validate_whole_hour])

    class Meta:
        ordering = ["effective_from"]
        verbose_name_plural = "factory costs"
        constraints = [
            models.CheckConstraint(
                condition=Q(staff_per_month__gte=0) & Q(sga_per_month__gte=0),
                name="factory_costs_not_negative",
            )
        ]

    def __str__(self) -> str:
        return f"factory costs from {self.effective_from:%Y-%m-%d %H:00}"
