"""GET /api/v1/market: the cockpit's market figures of a period (kpis.md 4b)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.api.loop.writes import ERRORS
from flywheel.selectors.kpis import empty_reason_of
from flywheel.selectors.market import market_json, market_read
from flywheel.selectors.measurement import FACTORY
from metering.selectors.usage import window_resolve
from portal.access import Capability
from portal.api.periods import PERIOD_PARAMETERS
from portal.permissions import capability_permission


def _money(help_text: str) -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=30, decimal_places=2, allow_null=True, help_text=help_text
    )


class ConcentrationSerializer(serializers.Serializer):
    top1 = serializers.FloatField(help_text="the largest tenant's share of revenue")
    top5 = serializers.FloatField(help_text="the five largest tenants' share")
    hhi = serializers.FloatField(help_text="Σ share², 0-1")
    grade = serializers.ChoiceField(
        choices=["highly concentrated", "moderately concentrated", "unconcentrated"],
        help_text="2023 US merger guidelines: above 0.18 high, 0.10-0.18 moderate",
    )


class QuadrantTenantSerializer(serializers.Serializer):
    tenant = serializers.CharField(help_text="slug")
    name = serializers.CharField()
    revenue = _money("the tenant's revenue in the period")
    paid_tokens = serializers.IntegerField(help_text="input + output tokens of paid usage")
    x = serializers.FloatField(help_text="share of the paid tokens")
    y = serializers.DecimalField(
        max_digits=30,
        decimal_places=10,
        allow_null=True,
        help_text="revenue per million paid tokens (null without paid tokens)",
    )
    label = serializers.ChoiceField(
        choices=["anchor", "volume", "premium", "long tail"], allow_null=True
    )


class QuadrantSerializer(serializers.Serializer):
    x_median = serializers.FloatField(allow_null=True)
    y_median = serializers.DecimalField(max_digits=30, decimal_places=10, allow_null=True)
    tenants = QuadrantTenantSerializer(many=True)


class RetentionSerializer(serializers.Serializer):
    lookback_months = serializers.ChoiceField(choices=[12, 3, 1])
    month = serializers.CharField(help_text="M, YYYY-MM: the last whole month")
    base_month = serializers.CharField(help_text="M − lookback")
    nrr = serializers.FloatField(allow_null=True, help_text="net revenue retention")
    grr = serializers.FloatField(allow_null=True, help_text="gross revenue retention")
    reason = serializers.CharField(allow_null=True, help_text="why there is no figure")


class CohortRowSerializer(serializers.Serializer):
    cohort = serializers.CharField(help_text="the first month with revenue, YYYY-MM")
    tenants = serializers.IntegerField()
    revenue = serializers.ListField(child=_money("money"), help_text="per month of `months`")


class CohortsSerializer(serializers.Serializer):
    months = serializers.ListField(child=serializers.CharField())
    partial_months = serializers.ListField(
        child=serializers.CharField(), help_text="months the period holds only part of"
    )
    rows = CohortRowSerializer(many=True)


class RevenueSourceSerializer(serializers.Serializer):
    to = serializers.DateTimeField()
    source = serializers.ChoiceField(
        choices=["ledger", "rating"],
        help_text="ledger: a whole closed month; rating: the unrounded rating otherwise",
    )


RevenueSourceSerializer._declared_fields["from"] = serializers.DateTimeField()


class MarketSerializer(serializers.Serializer):
    """GET /api/v1/market (kpis.md 4b): ratios as numbers, money as decimal strings."""

    to = serializers.DateTimeField(help_text="end of the window measured (excluded)")
    data_until = serializers.DateTimeField()
    empty_reason = serializers.CharField(allow_null=True)
    currency = serializers.CharField()
    revenue = _money("Σ of the tenants' revenue")
    revenue_sources = RevenueSourceSerializer(many=True)
    tenants = serializers.IntegerField(help_text="tenants with revenue in the period")
    concentration = ConcentrationSerializer(allow_null=True)
    quadrant = QuadrantSerializer()
    mrr_month = serializers.CharField(allow_null=True, help_text="the last whole month")
    mrr = _money("that month's revenue")
    mrr_source = serializers.CharField(allow_null=True, help_text="ledger or rating, as above")
    arr = _money("MRR × 12")
    retention = RetentionSerializer(many=True)
    cohorts = CohortsSerializer()
    rating_errors = serializers.DictField(child=serializers.CharField())


MarketSerializer._declared_fields["from"] = serializers.DateTimeField()


class MarketView(APIView):
    """Concentration (top 1, top 5, HHI and its grade), the consumption × value quadrant,
    MRR and ARR run-rate, NRR and GRR per lookback, and revenue by cohort, over [from, to)
    (default this month so far). Revenue is the ledger's for whole closed months, the
    rating's otherwise (kpis.md 4b)."""

    permission_classes = [capability_permission(read=Capability.READ_FACTORY)]

    @extend_schema(
        parameters=PERIOD_PARAMETERS,
        responses={200: MarketSerializer, 400: ERRORS, 403: ERRORS},
    )
    def get(self, request):
        window = window_resolve(request.query_params)
        body = market_json(market_read(window))
        body["empty_reason"] = empty_reason_of(window=window, scope=FACTORY)
        return Response(body)
