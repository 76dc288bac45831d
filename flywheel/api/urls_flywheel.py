from django.urls import path

from flywheel.api import views_flywheel
from portal.api.routers import Router

router = Router()
router.register("levers", views_flywheel.LeverViewSet, basename="lever")
router.register("goals", views_flywheel.GoalViewSet, basename="goal")
router.register(
    "lever-applications", views_flywheel.LeverApplicationViewSet, basename="lever-application"
)
router.register("flywheel/cycles", views_flywheel.CycleViewSet, basename="flywheel-cycle")
urlpatterns = [
    path(
        "flywheel/diagnosis",
        views_flywheel.DiagnosisView.as_view(),
        name="flywheel-diagnosis",
    ),
    path(
        "flywheel/scenarios",
        views_flywheel.ScenarioView.as_view(),
        name="flywheel-scenarios",
    ),
    *router.urls,
]
