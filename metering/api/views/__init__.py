"""Metering API views: the factory's resources, usage ingestion and the usage list."""

from .factory import DeploymentViewSet, PoolViewSet, ServedModelViewSet
from .ingest import CapacityView, CloudEventsView, OpenAIBatchView, UsageEventsView
from .usage import UsageListView

__all__ = [
    "CapacityView",
    "CloudEventsView",
    "DeploymentViewSet",
    "OpenAIBatchView",
    "PoolViewSet",
    "ServedModelViewSet",
    "UsageEventsView",
    "UsageListView",
]
