"""The incident and maintenance forms, and how a service's errors land on their fields."""

from django import forms
from django.core.exceptions import ValidationError

from metering.models import (
    Deployment,
    IncidentImpact,
    IncidentSeverity,
    IncidentStatus,
    Pool,
)
from portal.forms import utc_datetime_field
from portal.models import Tenant


def _scope_fields() -> dict:
    return {
        "deployments": forms.ModelMultipleChoiceField(
            queryset=Deployment.objects.select_related("model", "pool").order_by("slug"),
            required=False,
            widget=forms.CheckboxSelectMultiple,
            to_field_name="slug",
            help_text="Nothing ticked (and no pool): every deployment.",
        ),
        "pools": forms.ModelMultipleChoiceField(
            queryset=Pool.objects.order_by("slug"),
            required=False,
            widget=forms.CheckboxSelectMultiple,
            to_field_name="slug",
            help_text="Every deployment on the pool.",
        ),
    }


class PlainForm(forms.Form):
    """Labels without a trailing colon, as on the other pages."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


class TenantsField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj) -> str:
        return obj.name


class IncidentForm(PlainForm):
    title = forms.CharField(max_length=200)
    severity = forms.ChoiceField(choices=IncidentSeverity.choices, initial=IncidentSeverity.SEV2)
    impact = forms.ChoiceField(choices=IncidentImpact.choices, initial=IncidentImpact.MAJOR_OUTAGE)
    tenants = TenantsField(
        queryset=Tenant.objects.order_by("name"),
        required=False,
        to_field_name="slug",
        widget=forms.SelectMultiple(attrs={"size": 4}),
        help_text="Nothing selected: every tenant that used the deployments.",
    )
    started_at = utc_datetime_field(
        "Started at", required=False, help_text="UTC, e.g. 2026-11-19 03:00; empty: now."
    )
    message = forms.CharField(
        required=False,
        label="First update",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Public, shown on the status page.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields.update(_scope_fields())
        self.order_fields(["title", "severity", "impact", "deployments", "pools", "tenants"])


class IncidentEditForm(IncidentForm):
    """The record and its postmortem; the status changes through updates."""

    started_at = utc_datetime_field("Started at", required=True, seconds=True)
    resolved_at = utc_datetime_field("Resolved at", required=False, seconds=True)
    cause = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    remediation = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        del self.fields["message"]
        self.fields["impact"].label = "Opening impact"
        self.fields["impact"].help_text = "From the start; later changes are updates."


class IncidentUpdateForm(PlainForm):
    status = forms.ChoiceField(choices=IncidentStatus.choices)
    impact = forms.ChoiceField(
        choices=[("", "Unchanged"), *IncidentImpact.choices], required=False, label="Impact"
    )
    message = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class MaintenanceForm(PlainForm):
    title = forms.CharField(max_length=200)
    starts_at = utc_datetime_field("Starts at", required=True)
    ends_at = utc_datetime_field("Ends at", required=True)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields.update(_scope_fields())
        self.order_fields(["title", "starts_at", "ends_at", "deployments", "pools"])


def service_errors_to_form(form: forms.Form, exc: ValidationError) -> None:
    """Put a service's errors next to their fields (the API shows the same messages)."""
    for field, errors in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, errors)
