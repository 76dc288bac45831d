"""flywheel's API routes, relative to /api/v1/: one router for the app."""

from django.urls import path

from flywheel.api import chargeback, kpis, market, plan, tfom
from flywheel.api.loop import applications, cycles, diagnosis, scenarios, versions
from portal.api.routers import Router

router = Router()
router.register("cost-models", tfom.CostModelViewSet, basename="cost-model")
router.register("factory-costs", tfom.FactoryCostsViewSet, basename="factory-costs")
router.register("levers", versions.LeverViewSet, basename="lever")
router.register("goals", versions.GoalViewSet, basename="goal")
router.register(
    "lever-applications", applications.LeverApplicationViewSet, basename="lever-application"
)
router.register("flywheel/cycles", cycles.CycleViewSet, basename="flywheel-cycle")

urlpatterns = [
    path("kpis", kpis.KpiView.as_view(), name="kpis"),
    path("tfom", tfom.TfomView.as_view(), name="tfom"),
    path("market", market.MarketView.as_view(), name="market"),
    path("forecast", plan.ForecastView.as_view(), name="forecast"),
    path("chargeback", chargeback.ChargebackView.as_view(), name="chargeback"),
    path("capacity-plan", plan.CapacityPlanView.as_view(), name="capacity-plan"),
    path("capacity-plan/what-if", plan.WhatIfView.as_view(), name="capacity-plan-what-if"),
    path("flywheel/diagnosis", diagnosis.DiagnosisView.as_view(), name="flywheel-diagnosis"),
    path("flywheel/scenarios", scenarios.ScenarioView.as_view(), name="flywheel-scenarios"),
    *router.urls,
]
