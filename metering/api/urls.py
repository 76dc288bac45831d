"""metering's API routes, relative to /api/v1/: one router for the app."""

from django.urls import path

from metering.api import factory, otlp, sla, telemetry, usage
from portal.api.routers import Router

router = Router()
router.register("pools", factory.PoolViewSet, basename="pool")
router.register("models", factory.ServedModelViewSet, basename="served-model")
router.register("deployments", factory.DeploymentViewSet, basename="deployment")
router.register("scrape-targets", telemetry.ScrapeTargetViewSet, basename="scrape-target")
router.register("incidents", sla.IncidentViewSet, basename="incident")
router.register("maintenance", sla.MaintenanceWindowViewSet, basename="maintenance-window")

urlpatterns = [
    path("usage/events", usage.UsageEventsView.as_view(), name="usage-events"),
    path("usage/cloudevents", usage.CloudEventsView.as_view(), name="usage-cloudevents"),
    path("usage/openai-batch", usage.OpenAIBatchView.as_view(), name="usage-openai-batch"),
    path("usage/rejections", usage.RejectionListView.as_view(), name="usage-rejections"),
    path("usage", usage.UsageListView.as_view(), name="usage-list"),
    path("otlp/v1/traces", otlp.OtlpTracesView.as_view(), name="otlp-traces"),
    path("otlp/v1/metrics", otlp.OtlpMetricsView.as_view(), name="otlp-metrics"),
    path("capacity", usage.CapacityView.as_view(), name="capacity"),
    path("reference-curves", factory.ReferenceCurvesView.as_view(), name="reference-curves"),
    path(
        "telemetry/prometheus",
        telemetry.TelemetryPrometheusView.as_view(),
        name="telemetry-prometheus",
    ),
    *router.urls,
]
