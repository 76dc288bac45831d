"""GET /api/v1/forecast: a stored forecast with its bands and measured accuracy (kpis.md
6b). The daily forecast job fits them; this reads the last run's."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.api.loop.writes import ERRORS
from flywheel.selectors.measurement import FACTORY
from flywheel.selectors.plan import forecast_get, forecast_json
from portal.access import Capability
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
