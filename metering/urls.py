"""metering's pages."""

from django.urls import path

from metering.views import sla, telemetry, usage

urlpatterns = [
    path("usage/", usage.usage, name="usage"),
    path("metering/", telemetry.metering, name="metering"),
    path("incidents/", sla.incidents, name="incidents"),
    path("incidents/<int:pk>/", sla.incident_detail, name="incident-page"),
    path("incidents/<int:pk>/updates/", sla.incident_update, name="incident-page-update"),
    path("incidents/history/", sla.incident_history_page, name="incident-history"),
    path("incidents/maintenance/", sla.maintenance, name="maintenance"),
    path(
        "incidents/maintenance/<int:pk>/cancel/",
        sla.maintenance_cancel,
        name="maintenance-cancel",
    ),
    path("status/", sla.status_page, name="status"),
]
