from decimal import Decimal

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.api.loop.writes import ERRORS, FactoryVersionViewSet
from flywheel.domain import kpis
from flywheel.domain.tfom import baseline_tef_parse
from flywheel.filters import CostModelFilterSet
from flywheel.models import CostModel, FactoryCosts
from flywheel.selectors.kpis import TFOM_FIGURES, window_json
from flywheel.selectors.loop.shapes import rfc3339
from flywheel.selectors.measurement import FACTORY, kpi_read
from flywheel.selectors.tfom import tfom_json, tfom_measure
from flywheel.services.tfom import (
    cost_model_create,
    factory_costs_create,
)
from metering.selectors.factory import pool_list
from metering.selectors.usage import window_resolve
from portal.access import Capability
from portal.api.fields import AwareDateTimeField, ModelSerializer, MoneyField
from portal.api.periods import PERIOD_PARAMETERS
from portal.permissions import capability_permission


class CostModelSerializer(ModelSerializer):
    """A pool's TCO inputs from `effective_from` (kpis.md section 5)."""

    pool = serializers.SlugRelatedField(slug_field="slug", queryset=pool_list())
    capex_per_gpu = MoneyField(decimal_places=4, help_text="money per GPU, all-in")
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
    electricity_price_per_kwh = MoneyField(
        unit_price=True, decimal_places=10, help_text="money per kWh"
    )
    hosting_per_gpu_month = MoneyField(decimal_places=4, help_text="money per GPU-month")
    network_storage_per_gpu_month = MoneyField(
        decimal_places=4, default=Decimal(0), help_text="money per GPU-month"
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
            "lead_time_months",
            "currency",
            "effective_from",
        ]
        extra_kwargs = {
            "lead_time_months": {
                "min_value": 0,
                "max_value": 60,
                "help_text": "months between ordering GPUs and serving them (the capacity plan)",
            }
        }
        validators = []  # the service reports a duplicate version on effective_from


class FactoryCostsSerializer(ModelSerializer):
    """Factory-level monthly costs from `effective_from`."""

    staff_per_month = MoneyField(decimal_places=4, help_text="money per month")
    sga_per_month = MoneyField(decimal_places=4, help_text="money per month")
    currency = serializers.CharField(
        max_length=3, required=False, help_text="the factory currency (default)"
    )
    effective_from = AwareDateTimeField(help_text="a whole UTC hour")

    class Meta:
        model = FactoryCosts
        fields = ["id", "staff_per_month", "sga_per_month", "currency", "effective_from"]


def ratio_field(help_text: str) -> serializers.FloatField:
    return serializers.FloatField(allow_null=True, help_text=help_text)


def money_field(help_text: str) -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=30, decimal_places=2, allow_null=True, help_text=help_text
    )


def kpi_field(kpi: kpis.Kpi) -> serializers.Field:
    """A KPI's field in the API's schema, by its declaration (flywheel.domain.kpis)."""
    if kpi.unit == kpis.TOKENS:
        return serializers.IntegerField()
    if kpi.unit == kpis.MONEY:
        return money_field(kpi.doc)
    return serializers.FloatField(allow_null=kpi.nullable, help_text=kpi.doc or None)


# The window and every KPI, as declared: the first fields of GET /api/v1/tfom.
KpiFieldsSerializer = type(
    "KpiFieldsSerializer",
    (serializers.Serializer,),
    {
        "scope": serializers.CharField(),
        # "from" is a Python keyword: declared with the TFOM's fields, below.
        "to": serializers.DateTimeField(help_text="end of the window measured (excluded)"),
        "data_until": serializers.DateTimeField(help_text="how far usage is metered"),
        "telemetry": serializers.ChoiceField(choices=["measured", "partial", "assumed"]),
        **{kpi.key: kpi_field(kpi) for kpi in kpis.KPIS},
    },
)


class TfomSerializer(KpiFieldsSerializer):
    """Documentation of GET /api/v1/tfom: ratios and rates as numbers, money as decimal
    strings (cents; per-million prices to ten decimals), token counts as integers."""

    revenue = money_field("realized + minimum shortfall − SLA credits")
    energy_kwh = serializers.FloatField(help_text="facility kWh, PUE included")
    energy_cost = money_field("money")
    depreciation = money_field("money")
    hosting = money_field("hosting + network and storage")
    cogs = money_field("depreciation + energy + hosting")
    gross_profit = money_field("revenue − COGS")
    gross_margin = ratio_field("gross profit / revenue")
    opex = money_field("staff + SG&A")
    ebitda = money_field("revenue − energy − hosting − opex")
    ebit = money_field("EBITDA − depreciation")
    roi = ratio_field("annualized EBIT / capex invested")
    payback_years = serializers.FloatField(
        allow_null=True, help_text="capex invested / annualized EBITDA; null when EBITDA ≤ 0"
    )
    asset_turnover = ratio_field("annualized revenue / capex invested")
    cost_per_million_tokens = serializers.DecimalField(
        max_digits=30, decimal_places=10, allow_null=True, help_text="per million output tokens"
    )
    revenue_per_million_tokens = serializers.DecimalField(
        max_digits=30, decimal_places=10, allow_null=True, help_text="per million paid tokens"
    )
    cost_per_million_paid_tokens = serializers.DecimalField(
        max_digits=30, decimal_places=10, allow_null=True
    )
    daily_token_value_per_gpu = money_field("revenue / installed GPUs / days")
    tokens_per_kwh = serializers.FloatField(allow_null=True)
    baseline_tef = serializers.FloatField(help_text="TEF_0")
    equivalent_gpus = serializers.FloatField(help_text="N × TEF / TEF_0, summed over pools")
    avoided_capex = money_field("(equivalent GPUs − N) × capex per GPU, 0 when TEF ≤ TEF_0")
    total_cost = money_field("COGS + opex")
    capex_invested = money_field("Σ installed GPUs × capex per GPU")
    revenue_rated = money_field("the unrounded rating's revenue over the whole period")
    revenue_dated = money_field(
        "credit notes (negative) and breakage dated in the period outside its closed months"
    )
    revenue_tie_out = money_field(
        "revenue minus revenue_rated and revenue_dated: the ledger's, closed months"
    )
    empty_reason = serializers.CharField(allow_null=True)
    currency = serializers.CharField()
    rating_errors = serializers.DictField(
        child=serializers.CharField(), help_text="tenant slug → why it was not rated"
    )


TfomSerializer._declared_fields["from"] = serializers.DateTimeField()


class CostModelViewSet(FactoryVersionViewSet):
    """Per-pool TCO inputs (capex, depreciation, power, PUE, electricity, hosting), effective-dated."""

    serializer_class = CostModelSerializer
    queryset = CostModel.objects.select_related("pool")
    filterset_class = CostModelFilterSet
    create_service = staticmethod(cost_model_create)


class FactoryCostsViewSet(FactoryVersionViewSet):
    """Factory-level monthly costs (staff, SG&A), effective-dated."""

    serializer_class = FactoryCostsSerializer
    queryset = FactoryCosts.objects.all()
    create_service = staticmethod(factory_costs_create)


class TfomView(APIView):
    """Every TFOM figure of kpis.md sections 4-5 for the factory or one pool over [from, to)
    (default: this month so far): the KPI keys plus the P&L, unit economics, ROI, payback
    and equivalent GPUs against `baseline_tef` (default 0.30)."""

    permission_classes = [capability_permission(read=Capability.READ_FACTORY)]

    @extend_schema(
        parameters=[
            OpenApiParameter("scope", str, description="'factory' (default) or a pool slug"),
            *PERIOD_PARAMETERS,
            OpenApiParameter("baseline_tef", float, description="TEF_0, default 0.30"),
        ],
        responses={200: TfomSerializer, 400: ERRORS, 403: ERRORS},
    )
    def get(self, request):
        window = window_resolve(request.query_params)
        scope = request.query_params.get("scope") or FACTORY
        baseline = baseline_tef_parse(request.query_params.get("baseline_tef"))
        if empty := window_json(window=window, scope=scope, figures=TFOM_FIGURES):
            return Response(
                {
                    **empty,
                    "currency": settings.FACTORY_CURRENCY,
                    "baseline_tef": float(baseline),
                    "data_until": rfc3339(window.data_until),
                    "rating_errors": {},
                }
            )
        data = kpi_read(window.period)
        tfom = tfom_measure(
            scope=scope, start=window.start, end=window.to, baseline_tef=baseline, data=data
        )
        return Response(
            {
                **tfom_json(tfom),
                "data_until": rfc3339(window.data_until),
                "empty_reason": None,
                "rating_errors": data.rating_errors,
            }
        )
