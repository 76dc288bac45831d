from rest_framework import serializers

from portal.models import ApiToken, AuditEntry, Tenant


class TenantSerializer(serializers.ModelSerializer):
    class Meta:
        model = Tenant
        fields = ["slug", "name", "status", "billing_name", "billing_address", "created_at"]
        read_only_fields = ["created_at"]


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "scopes", "created_at", "last_used_at", "revoked_at"]
        read_only_fields = fields


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(
        source="actor.username", default=None, allow_null=True, read_only=True
    )

    class Meta:
        model = AuditEntry
        fields = ["id", "at", "actor", "action", "object_type", "object_id", "before", "after"]
        read_only_fields = fields
