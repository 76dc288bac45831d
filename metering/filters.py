"""metering's FilterSets, one per resource, shared by its pages and its API."""

from metering.models import ScrapeTarget
from portal.filters import PortalFilterSet


class ScrapeTargetFilterSet(PortalFilterSet):
    class Meta:
        model = ScrapeTarget
        fields = ["kind", "enabled", "last_status"]
