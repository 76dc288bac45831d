"""Incident and maintenance routes, relative to /api/v1/ (included from metering/api/urls.py)."""

from portal.api.routers import Router

from .incidents import IncidentViewSet, MaintenanceWindowViewSet

router = Router()
router.register("incidents", IncidentViewSet, basename="incident")
router.register("maintenance", MaintenanceWindowViewSet, basename="maintenance-window")

urlpatterns = router.urls
