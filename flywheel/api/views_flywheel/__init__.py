"""The flywheel API: diagnosis, scenarios, cycles, and the lever catalogue, goals and lever
applications (effective-dated records keyed by id, create-only once in force)."""

from flywheel.api.views_flywheel.applications import (
    LeverApplicationSerializer,
    LeverApplicationViewSet,
)
from flywheel.api.views_flywheel.common import FactoryWrite
from flywheel.api.views_flywheel.cycles import CycleRunSerializer, CycleSerializer, CycleViewSet
from flywheel.api.views_flywheel.diagnosis import DiagnosisView
from flywheel.api.views_flywheel.scenarios import (
    GoalInSerializer,
    ScenarioPermission,
    ScenarioSerializer,
    ScenarioView,
)
from flywheel.api.views_flywheel.versions import (
    GoalSerializer,
    GoalViewSet,
    LeverSerializer,
    LeverViewSet,
    VersionViewSet,
)

__all__ = [
    "CycleRunSerializer",
    "CycleSerializer",
    "CycleViewSet",
    "DiagnosisView",
    "FactoryWrite",
    "GoalInSerializer",
    "GoalSerializer",
    "GoalViewSet",
    "LeverApplicationSerializer",
    "LeverApplicationViewSet",
    "LeverSerializer",
    "LeverViewSet",
    "ScenarioPermission",
    "ScenarioSerializer",
    "ScenarioView",
    "VersionViewSet",
]
