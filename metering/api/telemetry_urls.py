"""Telemetry routes, relative to /api/v1/ (included from metering/api/urls.py)."""

from django.urls import path

from metering.api.telemetry import ScrapeTargetViewSet, TelemetryPrometheusView
from portal.api.routers import Router

router = Router()
router.register("scrape-targets", ScrapeTargetViewSet, basename="scrape-target")

urlpatterns = [
    path("telemetry/prometheus", TelemetryPrometheusView.as_view(), name="telemetry-prometheus"),
    *router.urls,
]
