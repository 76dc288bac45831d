"""Pages of incidents and maintenance: the operator's board (htmx), an incident's page with
its postmortem, maintenance windows, and the public status page (no login)."""

from metering.views_incidents.incident_pages import incident_detail, incident_update, incidents
from metering.views_incidents.maintenance_pages import maintenance, maintenance_cancel
from metering.views_incidents.status import status_page

__all__ = [
    "incident_detail",
    "incident_update",
    "incidents",
    "maintenance",
    "maintenance_cancel",
    "status_page",
]
