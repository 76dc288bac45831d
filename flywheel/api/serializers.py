from decimal import Decimal

from rest_framework import serializers

from flywheel.models import CostModel, FactoryCosts
from metering.models import Pool
from portal.api.fields import AwareDateTimeField, ModelSerializer

MONEY = {"max_digits": 20, "decimal_places": 4, "min_value": Decimal(0)}


class CostModelSerializer(ModelSerializer):
    """A pool's TCO inputs from `effective_from` (kpis.md section 5)."""

    pool = serializers.SlugRelatedField(slug_field="slug", queryset=Pool.objects.all())
    capex_per_gpu = serializers.DecimalField(**MONEY, help_text="money per GPU, all-in")
    depreciation_months = serializers.IntegerField(
        min_value=1, max_value=600, help_text="straight line"
    )
    power_kw_per_gpu = serializers.DecimalField(
        max_digits=12,
        decimal_places=6,
        min_value=Decimal(0),
        help_text="kW of IT power per GPU at full load, node share included",
    )
    idle_power_ratio = serializers.DecimalField(
        max_digits=7,
        decimal_places=6,
        min_value=Decimal(0),
        max_value=Decimal(1),
        default=Decimal("0.3"),
        help_text="idle draw of a healthy GPU not serving, over its full-load draw",
    )
    pue = serializers.DecimalField(
        max_digits=7, decimal_places=4, min_value=Decimal(1), help_text="facility over IT energy"
    )
    electricity_price_per_kwh = serializers.DecimalField(
        max_digits=20, decimal_places=10, min_value=Decimal(0), help_text="money per kWh"
    )
    hosting_per_gpu_month = serializers.DecimalField(**MONEY, help_text="money per GPU-month")
    network_storage_per_gpu_month = serializers.DecimalField(
        **MONEY, default=Decimal(0), help_text="money per GPU-month"
    )
    node_power_factor = serializers.DecimalField(
        max_digits=7,
        decimal_places=4,
        min_value=Decimal("0.0001"),
        default=Decimal("1.8"),
        help_text="node power per GPU over the GPU's own, applied to DCGM-measured energy",
    )
    currency = serializers.CharField(
        max_length=3, required=False, help_text="the factory currency (default)"
    )

    class Meta:
        model = CostModel
        fields = [
            "id",
            "pool",
            "capex_per_gpu",
            "depreciation_months",
            "power_kw_per_gpu",
            "idle_power_ratio",
            "pue",
            "electricity_price_per_kwh",
            "hosting_per_gpu_month",
            "network_storage_per_gpu_month",
            "node_power_factor",
            "currency",
            "effective_from",
        ]
        validators = []  # the service reports a duplicate version on effective_from


class FactoryCostsSerializer(ModelSerializer):
    """Factory-level monthly costs from `effective_from`."""

    staff_per_month = serializers.DecimalField(**MONEY, help_text="money per month")
    sga_per_month = serializers.DecimalField(**MONEY, help_text="money per month")
    currency = serializers.CharField(
        max_length=3, required=False, help_text="the factory currency (default)"
    )
    effective_from = AwareDateTimeField(help_text="a whole UTC hour")

    class Meta:
        model = FactoryCosts
        fields = ["id", "staff_per_month", "sga_per_month", "currency", "effective_from"]


def _ratio(help_text: str) -> serializers.FloatField:
    return serializers.FloatField(allow_null=True, help_text=help_text)


def _money(help_text: str) -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=30, decimal_places=2, allow_null=True, help_text=help_text
    )


class TfomSerializer(serializers.Serializer):
    """Documentation of GET /api/v1/tfom: ratios and rates as numbers, money as decimal
    strings (cents; per-million prices to ten decimals), token counts as integers."""

    scope = serializers.CharField()
    # "from" is a Python keyword: declared below.
    to = serializers.DateTimeField()
    telemetry = serializers.ChoiceField(choices=["measured", "partial", "assumed"])
    calendar_gpu_seconds = serializers.FloatField(help_text="C")
    available_gpu_seconds = serializers.FloatField(help_text="A")
    busy_gpu_seconds = serializers.FloatField(help_text="B")
    std_gpu_seconds = serializers.FloatField(help_text="Σ std(e)")
    availability = _ratio("α = A / C")
    occupancy = _ratio("β = B / A")
    efficiency = _ratio("η = Σ std / B")
    tef = _ratio("TEF = α β η")
    sla_delivery = _ratio("σ")
    sell_through = _ratio("s")
    price_realization = _ratio("ρ")
    tfi = _ratio("TFI = TEF σ s ρ")
    output_tokens = serializers.IntegerField()
    paid_output_tokens = serializers.IntegerField()
    tps = serializers.FloatField(help_text="output tokens/s")
    theoretical_tps = serializers.FloatField(help_text="output-token units/s at R_ref")
    list_value = _money("money")
    realized_revenue = _money("money")
    tps_per_gpu = serializers.FloatField(allow_null=True)
    tpm = serializers.FloatField()
    revenue = _money("realized + minimum shortfall − SLA credits")
    energy_kwh = serializers.FloatField(help_text="facility kWh, PUE included")
    energy_cost = _money("money")
    depreciation = _money("money")
    hosting = _money("hosting + network and storage")
    cogs = _money("depreciation + energy + hosting")
    gross_profit = _money("revenue − COGS")
    gross_margin = _ratio("gross profit / revenue")
    opex = _money("staff + SG&A")
    ebitda = _money("revenue − energy − hosting − opex")
    ebit = _money("EBITDA − depreciation")
    roi = _ratio("annualized EBIT / capex invested")
    payback_years = serializers.FloatField(
        allow_null=True, help_text="capex invested / annualized EBITDA; null when EBITDA ≤ 0"
    )
    asset_turnover = _ratio("annualized revenue / capex invested")
    cost_per_million_tokens = serializers.DecimalField(
        max_digits=30, decimal_places=10, allow_null=True, help_text="per million output tokens"
    )
    revenue_per_million_tokens = serializers.DecimalField(
        max_digits=30, decimal_places=10, allow_null=True, help_text="per million paid tokens"
    )
    cost_per_million_paid_tokens = serializers.DecimalField(
        max_digits=30, decimal_places=10, allow_null=True
    )
    daily_token_value_per_gpu = _money("revenue / installed GPUs / days")
    tokens_per_kwh = serializers.FloatField(allow_null=True)
    baseline_tef = serializers.FloatField(help_text="TEF_0")
    equivalent_gpus = serializers.FloatField(help_text="N × TEF / TEF_0, summed over pools")
    avoided_capex = _money("(equivalent GPUs − N) × capex per GPU, 0 when TEF ≤ TEF_0")
    total_cost = _money("COGS + opex")
    capex_invested = _money("Σ installed GPUs × capex per GPU")
    currency = serializers.CharField()
    rating_errors = serializers.DictField(
        child=serializers.CharField(), help_text="tenant slug → why it was not rated"
    )


TfomSerializer._declared_fields["from"] = serializers.DateTimeField()
