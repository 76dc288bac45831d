from metering.models.factory import (
    CapacitySample,
    Deployment,
    DeploymentVersion,
    ModelAlias,
    Pool,
    ServedModel,
)
from metering.models.sla import (
    Incident,
    IncidentImpact,
    IncidentSeverity,
    IncidentStatus,
    IncidentUpdate,
    MaintenanceWindow,
)
from metering.models.telemetry import (
    EngineHourly,
    GpuHourly,
    ScrapeTarget,
    TelemetryKind,
    TelemetryPushState,
)
from metering.models.usage import (
    LATENCY_BUCKETS_MS,
    ChangedHour,
    DailyUsage,
    EventKey,
    FoldMark,
    HourlyUsage,
    RollupPending,
    UsageEvent,
)

__all__ = [
    "LATENCY_BUCKETS_MS",
    "CapacitySample",
    "ChangedHour",
    "DailyUsage",
    "Deployment",
    "DeploymentVersion",
    "EngineHourly",
    "EventKey",
    "FoldMark",
    "GpuHourly",
    "HourlyUsage",
    "ModelAlias",
    "Pool",
    "RollupPending",
    "ScrapeTarget",
    "ServedModel",
    "TelemetryKind",
    "TelemetryPushState",
    "UsageEvent",
]


__all__ += [
    "Incident",
    "IncidentImpact",
    "IncidentSeverity",
    "IncidentStatus",
    "IncidentUpdate",
    "MaintenanceWindow",
]
