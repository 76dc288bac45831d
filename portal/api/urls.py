from django.urls import path

from portal.api.alerts import AlertRuleViewSet, AlertViewSet
from portal.api.notify import DeliveryReplayView, WebhookEndpointViewSet
from portal.api.projects import ProjectViewSet
from portal.api.routers import Router
from portal.api.views import AuditEntryViewSet, TenantViewSet

router = Router()
router.register("tenants", TenantViewSet, basename="tenant")
router.register("audit", AuditEntryViewSet, basename="audit")
router.register("webhook-endpoints", WebhookEndpointViewSet, basename="webhook-endpoint")
router.register("alert-rules", AlertRuleViewSet, basename="alert-rule")
router.register("alerts", AlertViewSet, basename="alert")
router.register(r"tenants/(?P<tenant>[-a-zA-Z0-9_]+)/projects", ProjectViewSet, basename="project")
urlpatterns = [
    *router.urls,
    path("deliveries/<int:pk>/replay", DeliveryReplayView.as_view(), name="delivery-replay"),
]
