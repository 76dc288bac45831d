"""flywheel's FilterSets, one per resource, shared by its pages and its API."""

import django_filters

from flywheel.models import CostModel, Lever
from metering.selectors.factory import pool_list
from portal.filters import PortalFilterSet


class CostModelFilterSet(PortalFilterSet):
    pool = django_filters.ModelChoiceFilter(
        queryset=pool_list(), to_field_name="slug", help_text="pool slug"
    )

    class Meta:
        model = CostModel
        fields = ["pool"]


class LeverFilterSet(PortalFilterSet):
    class Meta:
        model = Lever
        fields = ["slug", "source"]
