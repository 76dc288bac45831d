"""Alert rules and the alerts they raised (architecture.md "Alerts and notifications"):
operators every kind, finance and a tenant's members (and its `notify` tokens) the kinds
open to them on the tenants they may hold, investors none."""

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets

from portal.alert_kinds import KINDS
from portal.alerts import alert_list, rule_create, rule_delete, rule_list, rule_update
from portal.api.notify import NotifyPermission, tenant_slug_field
from portal.errors import FieldError
from portal.models import Alert, AlertRule, Event, Scope


class AlertRuleSerializer(serializers.ModelSerializer):
    kind = serializers.CharField(help_text="budget, slo_burn, … (kpis.md section 3c)")
    tenant = tenant_slug_field(
        "the tenant the rule watches (fixed once created); absent: the factory"
    )
    scope = serializers.JSONField(
        required=False,
        help_text='e.g. {"tenant": "acme", "deployment": "llama-70b"}; the tenant is also `tenant`',
    )
    params = serializers.JSONField(required=False, help_text='e.g. {"amount": "5000.00"}')
    level = serializers.ChoiceField(choices=Event.Level.choices, required=False)

    class Meta:
        model = AlertRule
        fields = ["id", "kind", "tenant", "scope", "params", "level", "enabled", "created_at"]
        read_only_fields = ["created_at"]
        validators = []  # one budget per tenant: the service answers 409 naming the tenant

    def to_internal_value(self, data):
        """The tenant as the contract writes it, in `scope` ({"tenant": slug, ...}), or
        beside it as `tenant`; both must then name the same tenant."""
        scope = data.get("scope") if isinstance(data, dict) else None
        if isinstance(scope, dict) and "tenant" in scope:
            scope = dict(scope)
            named = scope.pop("tenant")
            if "tenant" in data and data["tenant"] != named:
                raise FieldError("scope.tenant", "names another tenant than `tenant`")
            data = {**data, "tenant": named, "scope": scope}
        return super().to_internal_value(data)

    def to_representation(self, instance):
        shown = super().to_representation(instance)
        if instance.tenant_id:
            shown["scope"] = {"tenant": instance.tenant.slug, **(shown["scope"] or {})}
        return shown

    def validate_kind(self, value: str) -> str:
        if value not in KINDS:
            raise serializers.ValidationError(f"one of {', '.join(sorted(KINDS))}")
        return value


class AlertSerializer(serializers.ModelSerializer):
    rule = serializers.IntegerField(source="rule_id")
    kind = serializers.CharField(source="rule.kind")
    scope = serializers.SerializerMethodField()

    class Meta:
        model = Alert
        fields = [
            "id",
            "rule",
            "kind",
            "scope",
            "level",
            "state",
            "threshold",
            "value",
            "figures",
            "window_start",
            "fired_at",
            "resolved_at",
            "summary",
            "link",
        ]

    def get_scope(self, alert: Alert) -> dict:
        rule = alert.rule
        scope = {"tenant": rule.tenant.slug} if rule.tenant_id else {}
        return scope | rule.scope | ({"key": alert.scope_key} if alert.scope_key else {})


class AlertRuleViewSet(viewsets.ModelViewSet):
    """Alert rules (audited): a kind, its scope, its params, level and enabled."""

    serializer_class = AlertRuleSerializer
    permission_classes = [NotifyPermission]
    write_scope = Scope.NOTIFY

    def get_queryset(self):
        return rule_list(user=self.request.user)

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = rule_create(
            kind=data["kind"],
            tenant=data.get("tenant"),
            scope=data.get("scope"),
            params=data.get("params"),
            level=data.get("level", Event.Level.WARNING),
            enabled=data.get("enabled", True),
            by=self.request.user,
        )

    def perform_update(self, serializer):
        changes = dict(serializer.validated_data)
        rule = serializer.instance
        if changes.pop("kind", rule.kind) != rule.kind:
            raise FieldError("kind", "a rule's kind is fixed")
        if changes.pop("tenant", rule.tenant) != rule.tenant:
            raise FieldError("tenant", "a rule's tenant is fixed")
        serializer.instance = rule_update(rule=rule, changes=changes, by=self.request.user)

    def perform_destroy(self, instance):
        rule_delete(rule=instance, by=self.request.user)


@extend_schema_view(
    list=extend_schema(
        parameters=[OpenApiParameter("state", enum=["firing", "resolved"], required=False)]
    )
)
class AlertViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The alerts of the rules the caller may see, newest first (`?state=` firing or
    resolved; all without it)."""

    serializer_class = AlertSerializer
    permission_classes = [NotifyPermission]

    def get_queryset(self):
        state = self.request.query_params.get("state") or None
        if state not in (None, *Alert.State.values):
            raise FieldError("state", "firing or resolved")
        return alert_list(user=self.request.user, state=state)
