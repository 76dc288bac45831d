from django.urls import include, path

from metering.api import views
from portal.api.routers import Router

router = Router()
router.register("pools", views.PoolViewSet, basename="pool")
router.register("models", views.ServedModelViewSet, basename="served-model")
router.register("deployments", views.DeploymentViewSet, basename="deployment")

urlpatterns = [
    path("usage/events", views.UsageEventsView.as_view(), name="usage-events"),
    path("usage/cloudevents", views.CloudEventsView.as_view(), name="usage-cloudevents"),
    path("usage/openai-batch", views.OpenAIBatchView.as_view(), name="usage-openai-batch"),
    path("usage", views.UsageListView.as_view(), name="usage-list"),
    path("capacity", views.CapacityView.as_view(), name="capacity"),
    path("", include("metering.api.telemetry_urls")),
    path("", include("metering.api.incidents_urls")),
    *router.urls,
]
