"""The flywheel API: diagnosis, scenarios, cycles, and the lever catalogue, goals and lever
applications (effective-dated records keyed by id, create-only once in force)."""

from .applications import LeverApplicationSerializer, LeverApplicationViewSet
from .common import FactoryWrite
from .cycles import CycleRunSerializer, CycleSerializer, CycleViewSet
from .diagnosis import DiagnosisView
from .scenarios import GoalInSerializer, ScenarioPermission, ScenarioSerializer, ScenarioView
from .versions import GoalSerializer, GoalViewSet, LeverSerializer, LeverViewSet, VersionViewSet

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
