from .routers import Router
from .views import AuditEntryViewSet, TenantViewSet

router = Router()
router.register("tenants", TenantViewSet, basename="tenant")
router.register("audit", AuditEntryViewSet, basename="audit")
urlpatterns = router.urls
