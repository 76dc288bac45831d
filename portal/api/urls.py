from portal.api.routers import Router
from portal.api.views import AuditEntryViewSet, TenantViewSet

router = Router()
router.register("tenants", TenantViewSet, basename="tenant")
router.register("audit", AuditEntryViewSet, basename="audit")
urlpatterns = router.urls
