"""flywheel's pages, and /metrics for Prometheus."""

from django.urls import path

from flywheel.api.kpis import MetricsView
from flywheel.views import chargeback, loop, market, plan, tfom

urlpatterns = [
    path("investor/", tfom.investor, name="investor"),
    path("reports/tfom/", tfom.tfom_reports, name="tfom-reports"),
    path("flywheel/", loop.flywheel, name="flywheel"),
    path("cockpit/", market.cockpit, name="cockpit"),
    path("projects/", chargeback.projects, name="projects"),
    path("capacity-plan/", plan.capacity_plan, name="capacity-plan-page"),
    path("metrics", MetricsView.as_view(), name="metrics"),
]
