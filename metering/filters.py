"""metering's FilterSets, one per resource, shared by its pages and its API."""

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet

from metering.models import (
    Deployment,
    HourlyUsage,
    Incident,
    IncidentImpact,
    IncidentStatus,
    Pool,
    ScrapeTarget,
    ServedModel,
)
from metering.selectors.sla.incidents import (
    incidents_touching,
    overlapping_period,
    worst_impact_is,
)
from portal import clock
from portal.access import tenant_get
from portal.errors import FieldError
from portal.filters import Ordering, PortalFilterSet, TenantFilter
from portal.models import Project
from portal.periods import Period, month_parse, next_month
from portal.projects import NONE, NONE_ID


class ScrapeTargetFilterSet(PortalFilterSet):
    class Meta:
        model = ScrapeTarget
        fields = ["kind", "enabled", "last_status"]


class UsageFilterSet(PortalFilterSet):
    """Usage rollups (hourly or daily: the same fields) by tenant, served model and pool."""

    tenant = TenantFilter()
    model = django_filters.ModelChoiceFilter(
        field_name="deployment__model",
        queryset=ServedModel.objects.all(),
        to_field_name="slug",
        help_text="served model slug",
    )
    pool = django_filters.ModelChoiceFilter(
        field_name="deployment__pool",
        queryset=Pool.objects.all(),
        to_field_name="slug",
        help_text="pool slug",
    )
    project = django_filters.CharFilter(
        method="filter_project", help_text="project slug; (none) for usage without one"
    )

    class Meta:
        model = HourlyUsage
        fields = ["tenant", "model", "pool", "project"]

    def filter_project(self, queryset, name, value):
        """Rows of the projects of that slug (of the tenants the rows are scoped to), or
        the (none)'s (kpis.md 3e)."""
        if value == NONE:
            return queryset.filter(project_id=NONE_ID)
        return queryset.filter(project_id__in=Project.objects.filter(slug=value).values("pk"))


class MonthField(forms.CharField):
    """A calendar month, YYYY-MM, cleaned to its period."""

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return None
        try:
            start = month_parse(value)
        except FieldError as error:
            raise ValidationError(error.message) from None
        return Period(start, next_month(start))


class MonthFilter(django_filters.Filter):
    field_class = MonthField


class TouchedTenantFilter(TenantFilter):
    """Incidents that touched the tenant named by slug (kpis.md 3b); 404 for a tenant the
    user may not see."""

    def filter(self, qs: QuerySet, value: str) -> QuerySet:
        if not value:
            return qs
        tenant = tenant_get(user=self.parent.user, slug=value)
        return incidents_touching(qs, tenant=tenant, now=clock.now())


class IncidentFilterSet(PortalFilterSet):
    """The incident history's filters, shared by its page and the API (each optional)."""

    status = django_filters.ChoiceFilter(
        choices=[("open", "open (not resolved)"), *IncidentStatus.choices],
        empty_label="any status",
        method="filter_status",
        label="Status",
    )
    impact = django_filters.ChoiceFilter(
        choices=IncidentImpact.choices,
        empty_label="any worst impact",
        method="filter_impact",
        label="Impact",
        help_text="those whose worst impact (opening or any update's) it is",
    )
    deployment = django_filters.ModelChoiceFilter(
        queryset=Deployment.objects.order_by("slug"),
        to_field_name="slug",
        empty_label="any deployment",
        method="filter_deployment",
        label="Deployment",
        help_text="those naming the deployment or its pool",
    )
    tenant = TouchedTenantFilter(label="Tenant")
    month = MonthFilter(method="filter_month", label="Month", help_text="YYYY-MM")
    ordering = Ordering(
        fields={"id": "id", "status": "status", "started_at": "started_at",
                "resolved_at": "resolved_at"},
    )  # fmt: skip

    class Meta:
        model = Incident
        fields = ["status", "impact", "deployment", "tenant", "month"]

    def filter_status(self, queryset, name, value):
        if value == "open":
            return queryset.exclude(status=IncidentStatus.RESOLVED)
        return queryset.filter(status=value)

    def filter_impact(self, queryset, name, value):
        return worst_impact_is(queryset, value)

    def filter_deployment(self, queryset, name, value):
        named = Incident.objects.filter(
            Q(deployments__slug=value.slug) | Q(pools__deployments__slug=value.slug)
        )
        return queryset.filter(pk__in=named.values("pk"))

    def filter_month(self, queryset, name, value):
        return overlapping_period(queryset, value.start, value.end)
