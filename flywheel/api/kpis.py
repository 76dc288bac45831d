from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from rest_framework import renderers
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.api.metrics import counters_exposition
from flywheel.domain.counters import metric_names
from flywheel.domain.kpis import KPIS
from flywheel.selectors.kpis import KPI_FIGURES, kpis_get, kpis_json, period_measure, window_json
from flywheel.selectors.loop.shapes import rfc3339
from flywheel.selectors.measurement import FACTORY
from metering.selectors.usage import window_resolve
from portal.access import Capability
from portal.api.periods import PERIOD_PARAMETERS
from portal.permissions import capability_permission

KpiRead = capability_permission(read=Capability.READ_FACTORY)

# The KPIs published as gauges, as declared (flywheel.domain.kpis: those with a `gauge`).
GAUGES = [(kpi.key, kpi.gauge) for kpi in KPIS if kpi.gauge]


def metrics_published() -> set[str]:
    """The name of every metric /metrics publishes: the KPI gauges and the counters."""
    return {f"tokenfactory_{name}" for name, _ in GAUGES} | metric_names()


class KpiView(APIView):
    """Every KPI of kpis.md for the factory or one pool over [from, to) (default: this
    month so far): whole measured days from their snapshots, the rest measured live."""

    permission_classes = [KpiRead]

    @extend_schema(
        parameters=[
            OpenApiParameter("scope", str, description="'factory' (default) or a pool slug"),
            *PERIOD_PARAMETERS,
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request):
        window = window_resolve(request.query_params)
        scope = request.query_params.get("scope") or FACTORY
        body = window_json(window=window, scope=scope, figures=KPI_FIGURES) or {
            **kpis_get(scope=scope, start=window.start, end=window.to),
            "empty_reason": None,
        }
        return Response({**body, "data_until": rfc3339(window.data_until)})


class PrometheusRenderer(renderers.BaseRenderer):
    media_type = "text/plain"
    format = "prometheus"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, bytes):
            return data
        errors = data.get("errors", []) if isinstance(data, dict) else []
        return "".join(f"# error: {e['message']}\n" for e in errors).encode()


class MetricsView(APIView):
    """This month's KPIs per scope in Prometheus text format: the window a read of
    `period=this_month` measures (kpis.md section 0), through the one KPI read, so every
    gauge is the figure GET /api/v1/kpis returns; and the counters (flywheel.api.metrics)."""

    permission_classes = [KpiRead]
    renderer_classes = [PrometheusRenderer]

    @extend_schema(responses={(200, "text/plain"): OpenApiTypes.STR})
    def get(self, request):
        window = window_resolve({})
        figures = {}
        if window_json(window=window, scope=FACTORY, figures=KPI_FIGURES) is None:
            measured = period_measure(start=window.start, end=window.to)
            figures = {FACTORY: kpis_json(measured.factory)} | {
                pool.slug: kpis_json(kpis) for pool, _, kpis in measured.pools
            }
        registry = CollectorRegistry()
        for name, help_text in GAUGES:
            gauge = Gauge(f"tokenfactory_{name}", help_text, ["scope"], registry=registry)
            for scope, values in sorted(figures.items()):
                if values.get(name) is not None:
                    gauge.labels(scope=scope).set(values[name])
        body = generate_latest(registry) + counters_exposition()
        return Response(body, content_type=CONTENT_TYPE_LATEST)
