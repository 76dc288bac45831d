from .factory import CapacitySample, Deployment, DeploymentVersion, ModelAlias, Pool, ServedModel
from .usage import (
    LATENCY_BUCKETS_MS,
    DailyUsage,
    EventKey,
    HourlyUsage,
    RollupPending,
    UsageEvent,
)

__all__ = [
    "LATENCY_BUCKETS_MS",
    "CapacitySample",
    "DailyUsage",
    "Deployment",
    "DeploymentVersion",
    "EventKey",
    "HourlyUsage",
    "ModelAlias",
    "Pool",
    "RollupPending",
    "ServedModel",
    "UsageEvent",
]
