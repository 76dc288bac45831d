from django.db import transaction
from rest_framework import mixins, viewsets

from portal.access import Capability, tenant_list
from portal.api.serializers import AuditEntrySerializer, TenantSerializer
from portal.audit import audit_list
from portal.filters import AuditEntryFilterSet, TenantFilterSet
from portal.permissions import capability_permission
from portal.services import audited_save, object_delete
from portal.versions import version_delete


class EffectiveDatedViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Effective-dated versions (portal.versions): create-only once in force, never
    edited, deleted only before they take effect, audited as their model names them
    (`audit_type`). Subclasses name their app's service in `create_service` (called with
    the version's fields and `by`, the acting user); the service's FieldError is the API's
    400 naming the field."""

    create_service = None  # staticmethod(<app>_create)

    def version_fields(self, data: dict) -> dict:
        """The service's keyword arguments from the validated data: as they are, unless a
        subclass fills defaults or converts nested values."""
        return data

    def perform_create(self, serializer):
        fields = self.version_fields(serializer.validated_data)
        serializer.instance = self.create_service(**fields, by=self.request.user)

    def perform_destroy(self, instance):
        version_delete(version=instance, by=self.request.user)


class AuditedModelViewSet(viewsets.ModelViewSet):
    """CRUD whose every write leaves an audit entry with the object before and after; a
    slug, once referred to, never changes."""

    audit_type = ""

    def object_save(self, serializer):
        """Store the object (a subclass calls its app's service) and return it."""
        return serializer.save()

    def perform_create(self, serializer):
        audited_save(
            store=lambda: self.object_save(serializer),
            actor=self.request.user,
            object_type=self.audit_type,
        )

    def perform_update(self, serializer):
        audited_save(
            store=lambda: self.object_save(serializer),
            actor=self.request.user,
            object_type=self.audit_type,
            before=serializer.instance,
            slug=serializer.validated_data.get("slug"),
        )

    @transaction.atomic
    def perform_destroy(self, instance):
        object_delete(obj=instance, actor=self.request.user, object_type=self.audit_type)


class TenantViewSet(AuditedModelViewSet):
    """Tenants, keyed by slug (configuration): operators write, operators and finance read."""

    serializer_class = TenantSerializer
    lookup_field = "slug"
    audit_type = "tenant"
    permission_classes = [
        capability_permission(read=Capability.READ_CONFIGURATION, write=Capability.WRITE_FACTORY)
    ]
    filterset_class = TenantFilterSet

    def get_queryset(self):
        return tenant_list(user=self.request.user)


class AuditEntryViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The audit log (operators)."""

    serializer_class = AuditEntrySerializer
    permission_classes = [capability_permission(read=Capability.READ_AUDIT)]
    filterset_class = AuditEntryFilterSet

    def get_queryset(self):
        return audit_list(user=self.request.user)
