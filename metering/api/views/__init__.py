"""Metering API views: the factory's resources, usage ingestion and the usage list."""

from metering.api.views.factory import DeploymentViewSet, PoolViewSet, ServedModelViewSet
from metering.api.views.ingest import (
    CapacityView,
    CloudEventsView,
    OpenAIBatchView,
    UsageEventsView,
)
from metering.api.views.usage import UsageListView

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
