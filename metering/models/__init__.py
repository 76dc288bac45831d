from metering.models.factory import (
    CapacitySample,
    Deployment,
    DeploymentVersion,
    ModelAlias,
    Pool,
    ReferenceCurvePoint,
    ServedModel,
)
from metering.models.ingestion import IngestRejection, SourceSeen
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
    OtlpHourly,
    OtlpMetricState,
    ScrapeTarget,
    TelemetryKind,
    TelemetryPushState,
)
from metering.models.usage import (
    DailyUsage,
    EventKey,
    FiveMinuteUsage,
    FoldMark,
    FoldPending,
    HourlyUsage,
    IncompleteRawMonth,
    RefoldPending,
    RollupDelta,
    UsageChange,
    UsageEvent,
)

__all__ = [
    "CapacitySample",
    "DailyUsage",
    "Deployment",
    "DeploymentVersion",
    "EngineHourly",
    "EventKey",
    "FiveMinuteUsage",
    "FoldMark",
    "FoldPending",
    "GpuHourly",
    "HourlyUsage",
    "IncompleteRawMonth",
    "IngestRejection",
    "ModelAlias",
    "OtlpHourly",
    "OtlpMetricState",
    "Pool",
    "ReferenceCurvePoint",
    "RefoldPending",
    "RollupDelta",
    "ScrapeTarget",
    "ServedModel",
    "SourceSeen",
    "TelemetryKind",
    "TelemetryPushState",
    "UsageChange",
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
