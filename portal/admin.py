"""The Django admin for the records operators fix by hand, on the portal's roles (not
Django's staff flag): operators and finance sign in with their portal login and see the
records they may read; a write needs the capability its API needs (pools and tenants:
WRITE_FACTORY). Every write goes through the same rules as the API: the fields are
checked by the API's serializer, the object is stored by the app's service and audited
(portal.services.audited_save, object_delete). Effective-dated records (prices,
contracts, deployment versions) and append-only ones are read-only here: a change is a
new version, through the API or the page that owns it."""

from functools import update_wrapper

from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from rest_framework import serializers

from portal.access import Capability, user_may
from portal.api.serializers import TenantSerializer
from portal.errors import FieldError
from portal.models import Tenant
from portal.services import audited_save, object_delete, slug_change_check


class PortalAdminSite(admin.AdminSite):
    site_header = "Token Factory: records"
    site_title = "Token Factory records"
    index_title = "Records operators fix by hand"
    site_url = "/"

    def has_permission(self, request) -> bool:
        return request.user.is_active and user_may(request.user, Capability.READ_CONFIGURATION)

    def admin_view(self, view, cacheable=False):
        """Every admin page: a signed-in user whose role may not read configuration is
        refused (403) there and then, never sent round the sign-in."""
        inner = super().admin_view(view, cacheable)

        def guarded(request, *args, **kwargs):
            if request.user.is_authenticated and not self.has_permission(request):
                raise PermissionDenied
            return inner(request, *args, **kwargs)

        return update_wrapper(guarded, inner)

    def login(self, request, extra_context=None):
        """The portal's own sign-in (its lockout and roles), then back to the page asked
        for; a signed-in user whose role may not read configuration is refused (403)."""
        wanted = request.GET.get("next") or reverse("admin:index", current_app=self.name)
        if not url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()}):
            wanted = reverse("admin:index", current_app=self.name)
        if not request.user.is_authenticated:
            return redirect_to_login(wanted, "/login/")
        if not self.has_permission(request):
            raise PermissionDenied
        return redirect(wanted)


site = PortalAdminSite(name="admin")


class _RolesOnly:
    """Permissions from the portal's roles (portal.access), not Django's staff flags; no
    bulk action (each deletion is audited on its own); the audit log (AuditEntry) is the
    one record of changes, so the admin keeps no log of its own."""

    actions = None

    def has_view_permission(self, request, obj=None) -> bool:
        return user_may(request.user, Capability.READ_CONFIGURATION)

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request)

    def history_view(self, request, object_id, extra_context=None):
        """A record's history is the audit log's."""
        return redirect(f"/audit/?object_type={getattr(self, 'audit_type', '')}")

    def log_addition(self, request, obj, message):
        pass

    def log_change(self, request, obj, message):
        pass

    def log_deletions(self, request, queryset):
        pass


class AuditedAdmin(_RolesOnly, admin.ModelAdmin):
    """A record written as the API writes it: the API's `serializer` checks the fields (its
    errors are the form's), `write(checked, stored)` stores it through the app's service
    (default: the serializer's save, as the API's), audited as `audit_type`; written by
    the roles holding `capability`."""

    serializer: type[serializers.Serializer]
    audit_type = ""
    capability = Capability.WRITE_FACTORY

    def has_add_permission(self, request) -> bool:
        return user_may(request.user, self.capability)

    def has_change_permission(self, request, obj=None) -> bool:
        return user_may(request.user, self.capability)

    def has_delete_permission(self, request, obj=None) -> bool:
        return user_may(request.user, self.capability)

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        serializer, rules_check = self.serializer, self.rules_check

        class Checked(form):
            def clean(self):
                data = super().clean()
                fields = {
                    name: getattr(value, "slug", value)  # a related record by its slug
                    for name, value in data.items()
                    if name in serializer.Meta.fields
                }
                self.checked = serializer(instance=obj, data=fields, partial=obj is not None)
                if not self.checked.is_valid():
                    for name, errors in self.checked.errors.items():
                        self.add_error(name if name in self.fields else None, errors)
                    return data
                try:
                    rules_check(self.checked, obj)
                except FieldError as error:  # a service's rule, named as the API names it
                    self.add_error(
                        error.field if error.field in self.fields else None, error.message
                    )
                return data

        return Checked

    def rules_check(self, checked, stored) -> None:
        """Refuse (FieldError) what the write would refuse, before it: a slug already
        referred to; a subclass adds its service's checks."""
        slug = checked.validated_data.get("slug")
        if stored is not None and slug is not None:
            slug_change_check(obj=stored, slug=slug)

    def write(self, checked, stored):
        return checked.save()

    def save_model(self, request, obj, form, change):
        stored = type(obj).objects.get(pk=obj.pk) if change else None
        checked = form.checked  # checked by the form's clean (the serializer, `rules_check`)
        saved = audited_save(
            store=lambda: self.write(checked, stored),
            actor=request.user,
            object_type=self.audit_type,
            before=stored,
            slug=checked.validated_data.get("slug"),
        )
        obj.pk = saved.pk

    @transaction.atomic
    def delete_model(self, request, obj):
        object_delete(obj=obj, actor=request.user, object_type=self.audit_type)


class _NoWrites:
    """Nothing added, changed or deleted here."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReadOnlyAdmin(_RolesOnly, _NoWrites, admin.ModelAdmin):
    """Effective-dated or append-only records: read here, never written (a change is a
    new version, through the API or the page that owns it)."""


class ReadOnlyInline(_NoWrites, admin.TabularInline):
    """Records shown under the one they belong to (an effective-dated record's versions),
    read only as that record is."""

    extra = 0


@admin.register(Tenant, site=site)
class TenantAdmin(AuditedAdmin):
    serializer = TenantSerializer
    audit_type = "tenant"
    list_display = ("slug", "name", "status", "billing_name")
    list_filter = ("status",)
    search_fields = ("slug", "name", "billing_name")
    fields = ("slug", "name", "status", "billing_name", "billing_address")
