"""Webhook endpoints, their deliveries and replays (architecture.md "Alerts and
notifications"): operators and finance for the factory and any tenant, a tenant's members
and its `notify` tokens for their own tenant, investors none."""

from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.access import Capability, user_may, user_role, user_tenant
from portal.delivery import delivery_replay
from portal.events import EVENT_TYPES
from portal.models import (
    ApiToken,
    Delivery,
    DeliveryAttempt,
    Role,
    Scope,
    Tenant,
    WebhookEndpoint,
)
from portal.webhooks import (
    EndpointForbidden,
    deliveries_of,
    endpoint_create,
    endpoint_delete,
    endpoint_list,
    endpoint_rotate,
    endpoint_update,
)


class NotifyPermission(permissions.BasePermission):
    """Signed in with a role that may (not investors); a token reads with `read` or
    `notify` and writes with `notify`."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if isinstance(request.auth, ApiToken):
            safe = request.method in permissions.SAFE_METHODS
            needed = {Scope.READ, Scope.NOTIFY} if safe else {Scope.NOTIFY}
            if not needed & set(request.auth.scopes):
                self.message = "This token lacks the 'notify' scope."
                return False
        self.message = "Your role may not do this."
        return user_may(request.user, Capability.NOTIFY)


class TenantSlugField(serializers.SlugRelatedField):
    """A tenant by slug; a member naming any tenant but its own is refused (403) before the
    slug is looked up, so the answer says nothing of which tenants exist."""

    def to_internal_value(self, data):
        user = self.context["request"].user
        own = user_tenant(user)
        if user_role(user) is Role.TENANT and (own is None or data != own.slug):
            raise EndpointForbidden("tenant", "a member names its own tenant only")
        return super().to_internal_value(data)


def tenant_slug_field(help_text: str) -> TenantSlugField:
    """An optional tenant by slug (absent: the factory), checked as TenantSlugField says."""
    return TenantSlugField(
        slug_field="slug",
        queryset=Tenant.objects.all(),
        required=False,
        allow_null=True,
        help_text=help_text,
    )


class WebhookEndpointSerializer(serializers.ModelSerializer):
    event_types = serializers.ListField(
        child=serializers.ChoiceField(choices=sorted(EVENT_TYPES)),
        required=False,
        default=list,
        help_text="the event types delivered (empty: every type)",
    )
    tenant = tenant_slug_field(
        "a tenant's own endpoint (fixed once created); absent: the factory's"
    )

    class Meta:
        model = WebhookEndpoint
        fields = [
            "id",
            "url",
            "description",
            "event_types",
            "tenant",
            "enabled",
            "disabled_reason",
            "previous_secret_until",
            "created_at",
        ]
        read_only_fields = ["disabled_reason", "previous_secret_until", "created_at"]
        extra_kwargs = {"url": {"validators": []}}  # the service's URL rule names the field


class WebhookEndpointCreatedSerializer(WebhookEndpointSerializer):
    secret = serializers.CharField(read_only=True, help_text="whsec_…: shown this once")

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]


class DeliveryAttemptSerializer(serializers.ModelSerializer):
    time = serializers.DateTimeField(source="at", help_text="when the attempt began")

    class Meta:
        model = DeliveryAttempt
        fields = ["time", "status_code", "latency_ms", "response", "error"]


class DeliverySerializer(serializers.ModelSerializer):
    webhook_id = serializers.CharField(source="event.webhook_id")
    type = serializers.CharField(source="event.type")
    attempts = DeliveryAttemptSerializer(
        source="attempt_log", many=True, read_only=True, help_text="every attempt, oldest first"
    )

    class Meta:
        model = Delivery
        fields = [
            "id",
            "webhook_id",
            "type",
            "state",
            "next_attempt_at",
            "delivered_at",
            "attempts",
        ]


class WebhookEndpointViewSet(viewsets.ModelViewSet):
    """Webhook endpoints; the secret is in the creation's answer only; `rotate` makes a new
    one, the old signing beside it for 24 h."""

    serializer_class = WebhookEndpointSerializer
    permission_classes = [NotifyPermission]
    write_scope = Scope.NOTIFY

    def get_queryset(self):
        return endpoint_list(user=self.request.user)

    def get_serializer_class(self):
        return (
            WebhookEndpointCreatedSerializer
            if self.action == "create"
            else super().get_serializer_class()
        )

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = endpoint_create(
            url=data["url"],
            event_types=data.get("event_types", []),
            tenant=data.get("tenant"),
            description=data.get("description", ""),
            enabled=data.get("enabled", True),
            by=self.request.user,
        )

    def perform_update(self, serializer):
        changes = dict(serializer.validated_data)
        tenant = changes.pop("tenant", serializer.instance.tenant)
        if tenant != serializer.instance.tenant:
            raise serializers.ValidationError({"tenant": ["an endpoint's tenant is fixed"]})
        serializer.instance = endpoint_update(
            endpoint=serializer.instance, changes=changes, by=self.request.user
        )

    def perform_destroy(self, instance):
        endpoint_delete(endpoint=instance, by=self.request.user)

    @extend_schema(request=None, responses={200: WebhookEndpointCreatedSerializer})
    @action(detail=True, methods=["post"])
    def rotate(self, request, pk=None):
        """A new secret, in this answer only; the old one keeps signing for 24 h."""
        endpoint = endpoint_rotate(endpoint=self.get_object(), by=request.user)
        return Response(WebhookEndpointCreatedSerializer(endpoint).data)

    @extend_schema(responses={200: DeliverySerializer(many=True)})
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None):
        """The endpoint's deliveries, newest first, each with its attempts."""
        page = self.paginate_queryset(deliveries_of(endpoint=self.get_object()))
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)


class DeliveryReplayView(APIView):
    """Deliver again, with the same webhook-id."""

    permission_classes = [NotifyPermission]
    write_scope = Scope.NOTIFY

    @extend_schema(request=None, responses={202: DeliverySerializer})
    def post(self, request, pk: int):
        endpoints = endpoint_list(user=request.user)
        delivery = get_object_or_404(
            Delivery.objects.select_related("event", "endpoint"), pk=pk, endpoint__in=endpoints
        )
        delivery = delivery_replay(delivery=delivery, by=request.user)
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
