from django import forms
from django.db.models import QuerySet
from django.urls import reverse

from portal.alert_kinds import Kind
from portal.errors import FieldError
from portal.models import Project, Scope, Tenant
from portal.money import money_parse
from portal.periods import validate_years
from portal.projects import SLUG_MAX_LENGTH, no_project_message

UTC_HELP = "UTC, e.g. 2026-05-01 14:30."
UTC_EXAMPLE = "2026-11-19 03:00 UTC"  # how a time is typed and shown in a form
PROJECT_OPTIONS = "bound-project-options"  # the datalist of the token form's project input


class UtcDateTimeField(forms.DateTimeField):
    """A time typed and shown as ISO UTC ("2026-11-19 03:00 UTC"; the zone may be left
    out, the "T" of the API's spelling put in), never in the browser's locale (a
    datetime-local input shows the reader's own)."""

    input_formats = ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"]

    def to_python(self, value):
        if isinstance(value, str):
            value = value.strip().removesuffix("UTC").removesuffix("Z").strip()
        return super().to_python(value)


def utc_datetime_field(
    label: str, *, required: bool, help_text: str = UTC_HELP, seconds: bool = False, **options
) -> forms.DateTimeField:
    """A form's time field: typed and shown as UtcDateTimeField reads it, within the years
    the portal takes."""
    shown = "%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC"
    example = "2026-11-19 03:00:00 UTC" if seconds else UTC_EXAMPLE
    return UtcDateTimeField(
        label=label,
        required=required,
        help_text=help_text,
        validators=[validate_years],
        widget=forms.DateTimeInput(
            attrs={"placeholder": example, "size": len(example), "autocomplete": "off"},
            format=shown,
        ),
        **options,
    )


class MoneyFormField(forms.CharField):
    """A money input on a page, as the API takes it (portal.money.money_parse), thousands
    separators allowed: "60,000.00"."""

    def __init__(self, *, positive=False, signed=False, **kwargs):
        self.rule = {"positive": positive, "signed": signed}
        super().__init__(**kwargs)

    def to_python(self, value):
        text = super().to_python(value).replace(",", "")
        if text in self.empty_values:
            return None
        try:
            return money_parse(text, field="", **self.rule)
        except FieldError as error:
            raise forms.ValidationError(error.message) from None


def open_tenant_field(**options) -> forms.ModelChoiceField:
    """An optional choice of one tenant that is not closed, by name, sent as its slug."""
    field = forms.ModelChoiceField(
        queryset=Tenant.objects.exclude(status=Tenant.Status.CLOSED).order_by("name"),
        required=False,
        to_field_name="slug",
        **options,
    )
    field.label_from_instance = lambda tenant: tenant.name
    return field


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, label="Name", help_text="What the token is for.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, label="Scopes"
    )
    bound_tenant = open_tenant_field(
        label="Bind to tenant",
        empty_label="— not bound —",
        help_text="An ingest token for a tenant's own gateway: it meters that tenant only.",
    )

    bound_project = forms.CharField(
        required=False,
        max_length=SLUG_MAX_LENGTH,
        label="Bind to project",
        help_text="And to one of that tenant's projects, by its slug: its events without a "
        "project are that project's, naming another is refused.",
        widget=forms.TextInput(attrs={"list": PROJECT_OPTIONS, "autocomplete": "off"}),
    )

    def __init__(
        self,
        *args,
        allowed: frozenset[str],
        projects: QuerySet[Project],
        own_tenant: Tenant | None = None,
        **kwargs,
    ):
        """`projects`: those the user may bind a token to; `own_tenant`: a member's tenant,
        which its ingest tokens are bound to (no choice of tenant). A member chooses among its
        own tenant's projects; an operator names a project of the tenant it chose, by its slug
        (every tenant's projects are thousands), the chosen tenant's offered as it types."""
        super().__init__(*args, **kwargs)
        self.fields["scopes"].choices = [c for c in Scope.choices if c[0] in allowed]
        self.own_tenant = own_tenant
        self.projects = projects
        if own_tenant is not None:
            self.fields["bound_project"] = forms.ModelChoiceField(
                queryset=projects,
                required=False,
                label="Bind to project",
                empty_label="— not bound —",
                help_text="And to one of your projects: its events without a project are that "
                "project's, naming another is refused.",
            )
            self.fields["bound_project"].label_from_instance = lambda p: p.name
        if Scope.INGEST not in allowed or own_tenant is not None:
            # A member's ingest token is bound to its own tenant, no choice: the page says
            # so; it chooses one of its projects beside it.
            del self.fields["bound_tenant"]
        else:  # choosing a tenant loads its projects into the project's suggestions
            self.fields["bound_tenant"].widget.attrs.update(
                {
                    "hx-get": reverse("tokens"),
                    "hx-trigger": "change",
                    "hx-select": f"#{PROJECT_OPTIONS}",
                    "hx-target": f"#{PROJECT_OPTIONS}",
                    "hx-swap": "outerHTML",
                }
            )
        if Scope.INGEST not in allowed:
            del self.fields["bound_project"]

    def project_options(self) -> list[tuple[str, str]]:
        """(slug, name) of the projects of the tenant the operator's form has chosen (sent,
        or asked for by the tenant's select), which the project's input suggests."""
        if "bound_tenant" not in self.fields:
            return []
        chosen = (
            self.data.get("bound_tenant") if self.is_bound else self.initial.get("bound_tenant")
        )
        if not chosen:
            return []
        rows = self.projects.filter(tenant__slug=chosen).order_by("slug")
        return list(rows.values_list("slug", "name"))

    def clean(self):
        """The operator's project: one of the chosen tenant's (projects_bindable's), by its
        slug; refused naming `bound_project` otherwise (another tenant's slug too), and
        naming `bound_tenant` when no tenant is chosen."""
        data = super().clean()
        if "bound_tenant" not in self.fields or "bound_project" not in data:
            return data
        slug, data["bound_project"] = data["bound_project"], None
        if not slug:
            return data
        tenant = data.get("bound_tenant")
        if tenant is None:
            if "bound_tenant" not in self.errors:
                self.add_error("bound_tenant", f"Choose the tenant of project {slug!r}.")
            return data
        project = self.projects.filter(tenant=tenant, slug=slug).first()
        if project is None:
            self.add_error("bound_project", no_project_message(slug=slug, tenant=tenant.slug))
        else:
            data["bound_project"] = project
        return data


def _event_type_choices(types: list[str]) -> list[tuple[str, str]]:
    from portal.events import EVENT_TYPES

    return [(t, f"{t}: {EVENT_TYPES[t]}") for t in types]


class EndpointForm(forms.Form):
    """A new webhook endpoint (the service checks the URL and who may hold it)."""

    url = forms.CharField(max_length=2000, label="URL", help_text="https://…, where we POST")
    description = forms.CharField(max_length=200, required=False, label="Description")
    event_types = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label="Event types",
        help_text="Nothing ticked: every type.",
    )
    tenant = open_tenant_field(label="For", empty_label="the factory")

    def __init__(self, *args, event_types: list[str], staff: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["event_types"].choices = _event_type_choices(event_types)
        if not staff:
            del self.fields["tenant"]  # a member's endpoint is its tenant's


class EmailForm(forms.Form):
    """The event types a user receives by email."""

    event_types = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple, required=False, label="Email me on"
    )

    def __init__(self, *args, event_types: list[str], **kwargs):
        # Its own element ids: the endpoint form on the same page has an event_types field
        # too, and a label must name its own checkbox.
        kwargs.setdefault("auto_id", "email_%s")
        super().__init__(*args, **kwargs)
        self.fields["event_types"].choices = _event_type_choices(event_types)


# The alerts page's new-rule form: its fields are the chosen kind's (portal.alert_kinds.Kind).


def rule_params(kind: Kind, data) -> dict:
    """A rule's params from a form's `params.<name>` fields (blank: the default); a value
    that is not of its type is a FieldError naming it."""
    params: dict = {}
    for param in kind.params:
        field_name = f"params.{param.name}"
        value = (data.get(field_name) or "").strip()
        if not value:
            continue
        try:
            if param.type == "int":
                params[param.name] = int(value.replace(",", "").replace("_", ""))
            elif param.type == "percents":
                params[param.name] = [int(part) for part in value.replace(" ", "").split(",")]
            else:
                params[param.name] = value
        except ValueError:
            wanted = (
                "whole numbers, comma-separated" if param.type == "percents" else "a whole number"
            )
            raise FieldError(field_name, wanted) from None
    return params


def rule_scope(kind: Kind, value: str) -> dict:
    """The scope a form names: its one key's value (an option's, typed as the option is),
    or {} for the whole of the rule's tenant or factory."""
    value = (value or "").strip()
    if not value or not kind.scope_keys:
        return {}
    key = next(iter(kind.scope_keys))
    options = kind.scope_options() if kind.scope_options else []
    return {key: next((option for option, _ in options if str(option) == value), value)}
