"""Mounts the telemetry routes under /api/v1/ for tests/metering/test_telemetry.py."""

from django.urls import include, path

urlpatterns = [path("api/v1/", include("metering.api.telemetry_urls"))]
