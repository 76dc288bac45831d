"""Reads of SLA data: incidents and maintenance windows, per tenant-month uptime, SLO
attainment and SLA delivery rate σ (kpis.md 3 and 3b), and the public status page.

The arithmetic lives in the pure `metering.uptime`; this module only gathers its inputs
from the database. Credit tiers, credit amounts and contracts belong to billing, which
calls `sla_month_list` (or `sla_month_get`) and applies its contract's tiers to `uptime`.
Tenant scoping of incidents happens here, in `incident_list`, and nowhere else.
"""

from metering.sla.incidents import (
    IMPACT_RANK,
    current_impact,
    deployment_slugs,
    incident_queryset,
    maintenance_queryset,
    model_names,
    peak_impact,
    timeline_of,
)
from metering.sla.lists import incident_list, incident_visible_tenants, maintenance_list
from metering.sla.months import SlaMonth, sla_month_get, sla_month_list
from metering.sla.status import (
    STATUS_DAYS,
    ModelStatus,
    StatusDay,
    incident_history,
    status_overview,
)

__all__ = [
    "IMPACT_RANK",
    "STATUS_DAYS",
    "ModelStatus",
    "SlaMonth",
    "StatusDay",
    "current_impact",
    "deployment_slugs",
    "incident_history",
    "incident_list",
    "incident_queryset",
    "incident_visible_tenants",
    "maintenance_list",
    "maintenance_queryset",
    "model_names",
    "peak_impact",
    "sla_month_get",
    "sla_month_list",
    "status_overview",
    "timeline_of",
]
