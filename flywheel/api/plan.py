"""GET /api/v1/forecast: a stored forecast with its bands and measured accuracy (kpis.md
6b). The daily forecast job fits them; this reads the last run's. GET /api/v1/capacity-plan
and POST /api/v1/capacity-plan/what-if (kpis.md 6c)."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.api.loop.writes import ERRORS
from flywheel.domain.plan.placement import DEFAULT_TARGET_BUSY
from flywheel.selectors.measurement import FACTORY
from flywheel.selectors.plan import (
    capacity_plan_get,
    forecast_get,
    forecast_json,
    plan_params,
    plan_rows,
    what_if,
)
from portal.access import Capability
from portal.api.negotiation import FileNegotiation
from portal.errors import FieldError
from portal.exports import list_csv
from portal.models import Scope
from portal.permissions import capability_permission


def _value(help_text: str) -> serializers.JSONField:
    """A figure of the metric: tokens an integer, revenue a decimal string (cents)."""
    return serializers.JSONField(help_text=f"{help_text}: tokens an integer, money a string")


class ForecastPointSerializer(serializers.Serializer):
    day = serializers.DateField()
    forecast = _value("the day's forecast")
    p80 = serializers.ListField(child=_value("a bound"), help_text="[low, high]")
    p95 = serializers.ListField(child=_value("a bound"), help_text="[low, high]")


class ForecastMonthSerializer(serializers.Serializer):
    month = serializers.CharField(help_text="YYYY-MM")
    actual = _value("the closed days' sum, as measured")
    forecast = _value("the forecast days' sum")
    total = _value("their sum")
    is_whole = serializers.BooleanField(help_text="the history and the horizon cover it all")


class ForecastSerializer(serializers.Serializer):
    """GET /api/v1/forecast (kpis.md 6b)."""

    scope = serializers.CharField()
    metric = serializers.ChoiceField(choices=["tokens", "revenue"])
    metric_label = serializers.CharField()
    unit = serializers.CharField()
    method = serializers.ChoiceField(choices=["ets", "seasonal_naive_drift", "none"])
    method_label = serializers.CharField()
    note = serializers.CharField(allow_null=True, help_text="why none, or values clipped at 0")
    made_at = serializers.DateTimeField()
    history_start = serializers.DateField()
    forecast_start = serializers.DateField(help_text="the day after the last closed day")
    horizon_days = serializers.IntegerField()
    clipped_at_zero = serializers.BooleanField()
    mape = serializers.FloatField(allow_null=True, help_text="the backtest's, over its origins")
    baseline_mape = serializers.FloatField(allow_null=True, help_text="the seasonal naive's")
    origins = serializers.ListField(child=serializers.DateField())
    accuracy = serializers.CharField(help_text="the accuracy line, in words")
    history = serializers.ListField(child=serializers.DictField())
    points = ForecastPointSerializer(many=True)
    monthly = ForecastMonthSerializer(many=True)


class ForecastView(APIView):
    """The forecast of a scope's daily production or revenue: 90 daily points with their
    80% and 95% bands, monthly sums, the method, and its backtest (`mape` beside the
    seasonal naive's `baseline_mape`, over `origins`)."""

    permission_classes = [capability_permission(read=Capability.READ_FACTORY)]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "scope", str, description="'factory' (default), a pool slug or model:<slug>"
            ),
            OpenApiParameter("metric", str, description="tokens (default) or revenue"),
        ],
        responses={200: ForecastSerializer, 400: ERRORS, 403: ERRORS},
    )
    def get(self, request):
        scope = request.query_params.get("scope") or FACTORY
        metric = request.query_params.get("metric") or "tokens"
        return Response(forecast_json(forecast_get(scope=scope, metric=metric)))


PLAN_CSV_HEADER = (
    "month", "pool", "gpu_type", "installed", "needed", "add", "release", "order_by",
    "busy_gpus", "cost_per_gpu_hour", "month_tokens", "month_revenue", "month_cogs",
    "month_ebitda", "month_gross_margin",
)  # fmt: skip


class CapacityPlanView(APIView):
    """The capacity plan (kpis.md 6c): per month of the horizon, per pool the GPUs needed,
    installed, to add or release and the date to order by; the placement per model; the
    month's COGS, revenue, EBITDA and gross margin; and plan against actual for the months
    that ended (the plan stored at each one's start). The forecast job stores the plan for
    the default terms; other terms are planned on asking. `format=csv`: one row per month
    and pool."""

    permission_classes = [capability_permission(read=Capability.READ_FACTORY)]
    content_negotiation_class = FileNegotiation  # ?format=csv names the file, not a renderer

    @extend_schema(
        parameters=[
            OpenApiParameter("horizon_months", int, description="1–36 (default 12)"),
            OpenApiParameter("target_busy", str, description="0.05–1 (default 0.8)"),
            OpenApiParameter("quantile", str, description="p80 (default), p95 or mean"),
            OpenApiParameter("format", str, description="json (default) or csv"),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: ERRORS, 403: ERRORS},
    )
    def get(self, request):
        horizon, busy, quantile = plan_params(request.query_params)
        plan = capacity_plan_get(horizon_months=horizon, target_busy=busy, quantile=quantile)
        fmt = request.query_params.get("format") or "json"
        if fmt == "csv":
            return list_csv(name="capacity-plan", header=PLAN_CSV_HEADER, rows=plan_rows(plan))
        if fmt != "json":
            raise FieldError("format", "must be json or csv")
        return Response(plan)


class WhatIfSerializer(serializers.Serializer):
    demand = serializers.DictField(
        child=serializers.DecimalField(
            max_digits=20, decimal_places=6, min_value=Decimal(0), max_value=Decimal(10**12)
        ),
        allow_empty=False,
        help_text='peak tok/s per served model slug: {"llama-3.3-70b": 10000}',
    )
    target_busy = serializers.DecimalField(
        max_digits=6, decimal_places=4, min_value=Decimal("0.05"), max_value=Decimal(1),
        default=DEFAULT_TARGET_BUSY,
    )  # fmt: skip
    allow_purchase = serializers.BooleanField(default=False)


class WhatIfView(APIView):
    """A stated peak demand per model planned now (a sales question: "can we take a customer
    needing 10,000 tok/s?"): the placement solved exactly on the pools as installed (with
    GPUs added where capex buys capacity cheapest when `allow_purchase`), the GPUs per pool,
    the cost per hour and per 730-hour month, and the demand that cannot be served."""

    permission_classes = [
        capability_permission(read=Capability.READ_FACTORY, write=Capability.RUN_SCENARIOS)
    ]
    write_scope = Scope.READ  # changes nothing

    @extend_schema(request=WhatIfSerializer, responses={200: OpenApiTypes.OBJECT, 400: ERRORS})
    def post(self, request):
        body = WhatIfSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        return Response(
            what_if(
                demand=dict(data["demand"]),
                target_busy=data["target_busy"],
                allow_purchase=data["allow_purchase"],
            )
        )
