"""Reservations (kpis.md 3d) and the service tiers' multipliers: operators and finance write;
a tenant's members and tokens read their own reservations, investors none (aggregates only,
through the KPIs)."""

from decimal import Decimal

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from billing.api.pricing import CommercialRead
from billing.domain.reservations import TERMS
from billing.models import Reservation, ServiceTierMultiplier
from billing.selectors.reservations import reservation_list, tier_multiplier_list
from billing.services.reservations import (
    reservation_cancel,
    reservation_create,
    reservation_raise,
    service_tier_create,
)
from metering.domain.usage.fields import SERVICE_TIERS, STANDARD
from metering.selectors.factory import deployment_list
from portal.access import Capability
from portal.api.fields import ModelSerializer
from portal.api.views import EffectiveDatedViewSet
from portal.models import Tenant
from portal.permissions import capability_permission


class ReservationSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", queryset=Tenant.objects.all())
    deployment = serializers.SlugRelatedField(
        slug_field="slug", queryset=deployment_list(), help_text="deployment slug"
    )
    gpus = serializers.IntegerField(
        min_value=1, max_value=1_000_000, help_text="GPUs of the deployment's pool reserved"
    )
    hourly_rate = serializers.DecimalField(
        max_digits=20, decimal_places=10, min_value=Decimal(0), help_text="money per GPU-hour"
    )
    term = serializers.ChoiceField(choices=list(TERMS))
    versions = serializers.SerializerMethodField(help_text="[[effective_from, gpus], ...]")

    class Meta:
        model = Reservation
        fields = [
            "id", "tenant", "deployment", "gpus", "hourly_rate", "currency", "term", "starts_at",
            "ends_at", "cancelled_at", "versions",
        ]  # fmt: skip
        read_only_fields = ["currency", "ends_at", "cancelled_at"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        versions = sorted(instance.gpus.all(), key=lambda v: v.effective_from)
        data["gpus"] = versions[-1].gpus if versions else None
        return data

    def get_versions(self, reservation) -> list[list]:
        return [
            [v.effective_from.isoformat(), v.gpus]
            for v in sorted(reservation.gpus.all(), key=lambda v: v.effective_from)
        ]


class RaiseIn(serializers.Serializer):
    gpus = serializers.IntegerField(min_value=1, max_value=1_000_000)
    effective_from = serializers.DateTimeField()


class CancelIn(serializers.Serializer):
    at = serializers.DateTimeField()


class ReservationViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):  # fmt: skip
    """Reservations: dedicated GPUs of a deployment's pool for a tenant (kpis.md 3d). PATCH
    raises `gpus` from `effective_from` (never lowers); `cancel` ends a `none` one."""

    serializer_class = ReservationSerializer
    permission_classes = [CommercialRead]
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self):
        return reservation_list(user=self.request.user)

    def perform_create(self, serializer):
        serializer.instance = reservation_create(**serializer.validated_data, by=self.request.user)

    @extend_schema(request=RaiseIn, responses={200: ReservationSerializer})
    def partial_update(self, request, *args, **kwargs):
        reservation = self.get_object()
        body = RaiseIn(data=request.data)
        body.is_valid(raise_exception=True)
        reservation_raise(reservation=reservation, **body.validated_data, by=request.user)
        return Response(ReservationSerializer(self.get_queryset().get(pk=reservation.pk)).data)

    @extend_schema(request=CancelIn, responses={200: ReservationSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        reservation = self.get_object()
        body = CancelIn(data=request.data)
        body.is_valid(raise_exception=True)
        reservation_cancel(reservation=reservation, at=body.validated_data["at"], by=request.user)
        return Response(
            ReservationSerializer(self.get_queryset().get(pk=reservation.pk)).data,
            status=status.HTTP_200_OK,
        )


class ServiceTierSerializer(ModelSerializer):
    tier = serializers.ChoiceField(
        source="service_tier", choices=[t for t in SERVICE_TIERS if t != STANDARD]
    )
    multiplier = serializers.DecimalField(max_digits=10, decimal_places=6, min_value=Decimal(0))

    class Meta:
        model = ServiceTierMultiplier
        fields = ["id", "tier", "multiplier", "effective_from"]
        validators = []  # the service reports a duplicate version on effective_from


class ServiceTierViewSet(EffectiveDatedViewSet):
    """The tiers' multipliers of the standard tier's prices, effective-dated (defaults:
    priority 1.75, flex 0.5, batch 0.5)."""

    serializer_class = ServiceTierSerializer
    permission_classes = [
        capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_COMMERCIAL)
    ]
    create_service = staticmethod(service_tier_create)

    def get_queryset(self):
        return tier_multiplier_list()
