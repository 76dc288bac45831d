"""metering's FilterSets, one per resource, shared by its pages and its API."""

import django_filters

from metering.models import HourlyUsage, ScrapeTarget
from portal.filters import PortalFilterSet, TenantFilter


class ScrapeTargetFilterSet(PortalFilterSet):
    class Meta:
        model = ScrapeTarget
        fields = ["kind", "enabled", "last_status"]


class UsageFilterSet(PortalFilterSet):
    """Usage rollups (hourly or daily: the same fields) by tenant, served model and pool."""

    tenant = TenantFilter()
    model = django_filters.CharFilter(
        field_name="deployment__model__slug", help_text="served model slug"
    )
    pool = django_filters.CharFilter(field_name="deployment__pool__slug", help_text="pool slug")

    class Meta:
        model = HourlyUsage
        fields = ["tenant", "model", "pool"]
