from django import forms

from portal.models import Scope, Tenant


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, label="Name", help_text="What the token is for.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, label="Scopes"
    )
    bound_tenant = forms.ModelChoiceField(
        queryset=Tenant.objects.exclude(status=Tenant.Status.CLOSED).order_by("name"),
        required=False,
        to_field_name="slug",
        label="Bind to tenant",
        empty_label="— not bound —",
        help_text="An ingest token for a tenant's own gateway: it meters that tenant only.",
    )

    def __init__(self, *args, allowed: frozenset[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["scopes"].choices = [c for c in Scope.choices if c[0] in allowed]
        if Scope.INGEST not in allowed:
            del self.fields["bound_tenant"]
