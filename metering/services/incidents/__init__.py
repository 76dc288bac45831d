"""Writes of SLA incidents and maintenance windows. Every write leaves an audit entry.

An incident's record (title, severity, opening impact, scope, start, postmortem) may be
corrected at any time; its status moves only forward, through timestamped public updates,
and `resolved_at` is set by the update that resolves it. Maintenance windows are announced
before they start and never change once started, so they cannot hide an outage after the
fact.
"""

from metering.services.incidents.incident import (
    STATUS_ORDER,
    incident_create,
    incident_edit,
    incident_update_add,
)
from metering.services.incidents.maintenance import (
    maintenance_window_cancel,
    maintenance_window_create,
    maintenance_window_edit,
)

__all__ = [
    "STATUS_ORDER",
    "incident_create",
    "incident_edit",
    "incident_update_add",
    "maintenance_window_cancel",
    "maintenance_window_create",
    "maintenance_window_edit",
]
