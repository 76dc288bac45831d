"""Pages of incidents and maintenance: the operator's board (htmx), an incident's page with
its postmortem, maintenance windows, and the public status page (no login)."""

from .incident_pages import incident_detail, incident_update, incidents
from .maintenance_pages import maintenance, maintenance_cancel
from .status import status_page

__all__ = [
    "incident_detail",
    "incident_update",
    "incidents",
    "maintenance",
    "maintenance_cancel",
    "status_page",
]
