"""flywheel's FilterSets, one per resource, shared by its pages and its API."""

import django_filters

from flywheel.models import CostModel, Lever
from portal.filters import PortalFilterSet


class CostModelFilterSet(PortalFilterSet):
    pool = django_filters.CharFilter(field_name="pool__slug", help_text="pool slug")

    class Meta:
        model = CostModel
        fields = ["pool"]


class LeverFilterSet(PortalFilterSet):
    class Meta:
        model = Lever
        fields = ["slug", "source"]
