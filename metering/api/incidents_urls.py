"""Incident and maintenance routes, relative to /api/v1/ (included from metering/api/urls.py)."""

from metering.api.incidents import IncidentViewSet, MaintenanceWindowViewSet
from portal.api.routers import Router

router = Router()
router.register("incidents", IncidentViewSet, basename="incident")
router.register("maintenance", MaintenanceWindowViewSet, basename="maintenance-window")

urlpatterns = router.urls
