from django.urls import path

from metering import views

urlpatterns = [
    path("usage/", views.usage, name="usage"),
    path("metering/", views.metering, name="metering"),
]

from metering import views_incidents  # noqa: E402

urlpatterns += [
    path("incidents/", views_incidents.incidents, name="incidents"),
    path("incidents/<int:pk>/", views_incidents.incident_detail, name="incident-page"),
    path(
        "incidents/<int:pk>/updates/", views_incidents.incident_update, name="incident-page-update"
    ),
    path("incidents/maintenance/", views_incidents.maintenance, name="maintenance"),
    path(
        "incidents/maintenance/<int:pk>/cancel/",
        views_incidents.maintenance_cancel,
        name="maintenance-cancel",
    ),
    path("status/", views_incidents.status_page, name="status"),
]
