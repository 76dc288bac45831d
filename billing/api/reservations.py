"""Reservations (kpis.md 3d) and the service tiers' multipliers: operators and finance write;
a tenant's members and tokens read their own reservations, investors none (aggregates only,
through the KPIs)."""

from decimal import Decimal

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from billing.api.pricing import CommercialRead
from billing.domain.reservations import TERMS, HourFigures, by_day
from billing.filters import ReservationFilterSet
from billing.models import Reservation, ServiceTierMultiplier
from billing.models.reservations import MULTIPLIED_TIER_CHOICES
from billing.selectors.reservations import (
    reservation_list,
    reservation_status,
    reservation_utilization,
    tier_multiplier_list,
)
from billing.services.reservations import (
    reservation_cancel,
    reservation_create,
    reservation_raise,
    service_tier_create,
)
from metering.selectors.factory import deployment_list
from portal import clock
from portal.access import Capability, tenant_get
from portal.api.fields import AwareDateTimeField, ModelSerializer
from portal.api.periods import PERIOD_PARAMETERS
from portal.api.views import EffectiveDatedViewSet
from portal.errors import FieldError
from portal.models import Tenant
from portal.money import fraction_to_decimal, money_str, round_half_up
from portal.periods import period_resolve
from portal.permissions import capability_permission


class ReservationSerializer(ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", queryset=Tenant.objects.all())
    deployment = serializers.SlugRelatedField(
        slug_field="slug", queryset=deployment_list(), help_text="deployment slug"
    )
    gpus = serializers.IntegerField(
        min_value=1,
        max_value=1_000_000,
        write_only=True,
        help_text="GPUs of the deployment's pool reserved (read: the latest version's)",
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
    effective_from = AwareDateTimeField()


class CancelIn(serializers.Serializer):
    at = AwareDateTimeField()


def figures_row(figures: HourFigures, currency: str) -> dict:
    """One bucket of a reservation's utilization as the API gives it: tokens whole (tok,
    output-token units), money in the currency's minor unit, utilization to 6 decimals."""
    utilization = figures.utilization

    def money(value) -> str | None:
        return money_str(amount=fraction_to_decimal(value), currency=currency)

    return {
        "start": figures.start.isoformat().replace("+00:00", "Z"),
        "cap": round(figures.cap),
        "covered": round(figures.covered),
        "utilization": None
        if utilization is None
        else str(round_half_up(amount=fraction_to_decimal(utilization), quantum=Decimal("1e-6"))),
        "fee": money(figures.fee),
        "covered_realized": money(figures.covered_realized),
        "unused": money(figures.unused),
    }


UTILIZATION_PARAMETERS = [
    *PERIOD_PARAMETERS,
    OpenApiParameter("granularity", str, description="hour or day (default day)"),
]


class ReservationStatusOut(serializers.Serializer):
    reservation = serializers.IntegerField()
    tenant = serializers.CharField(help_text="tenant slug")
    deployment = serializers.CharField(help_text="deployment slug")
    gpus = serializers.IntegerField(help_text="GPUs reserved now")
    capacity_tok_s = serializers.CharField(help_text="GPUs × R_ref (tok/s)")
    current_tok_s = serializers.CharField(help_text="the last complete 5 minutes' rate (tok/s)")
    headroom_tok_s = serializers.CharField(help_text="capacity − current (negative: beyond it)")
    as_of = serializers.DateTimeField(help_text="end of the 5 minutes measured")


class ReservationViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):  # fmt: skip
    """Reservations: dedicated GPUs of a deployment's pool for a tenant (kpis.md 3d). PATCH
    raises `gpus` from `effective_from` (never lowers); `cancel` ends a `none` one."""

    serializer_class = ReservationSerializer
    permission_classes = [CommercialRead]
    filterset_class = ReservationFilterSet
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

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "tenant", str, description="tenant slug (default: all; 404 for one you may not see)"
            )
        ],
        responses={200: ReservationStatusOut(many=True)},
    )
    @action(detail=False, methods=["get"], pagination_class=None, filter_backends=[])
    def status(self, request):
        """Per reservation in force: capacity (tok/s), the last complete 5 minutes' rate
        (tok/s) and the headroom, for gateways that route overage to shared capacity."""
        tenant = None
        if slug := request.query_params.get("tenant"):
            tenant = tenant_get(user=request.user, slug=slug)
        rows = reservation_status(
            user=request.user, now=clock.now(), tenant_id=tenant.pk if tenant else None
        )

        def plain(value: Decimal) -> str:
            return str(round_half_up(amount=value, quantum=Decimal("0.01")))

        return Response(
            [
                {
                    "reservation": row["reservation"].pk,
                    "tenant": row["reservation"].tenant.slug,
                    "deployment": row["reservation"].deployment.slug,
                    "gpus": row["gpus"],
                    "capacity_tok_s": plain(row["capacity"]),
                    "current_tok_s": plain(row["current"]),
                    "headroom_tok_s": plain(row["headroom"]),
                    "as_of": row["as_of"].isoformat().replace("+00:00", "Z"),
                }
                for row in rows
            ]
        )

    @extend_schema(parameters=UTILIZATION_PARAMETERS, responses={200: dict})
    @action(detail=True, methods=["get"])
    def utilization(self, request, pk=None):
        """Per hour or day of the period: cap and covered tok, utilization, fee, covered
        realized amount and unused fee (kpis.md 3d), and their totals."""
        reservation = self.get_object()
        granularity = request.query_params.get("granularity", "day")
        if granularity not in ("hour", "day"):
            raise FieldError("granularity", "must be hour or day")
        window = period_resolve(request.query_params)
        hours = reservation_utilization(reservation, start=window.start, end=window.end)
        rows = hours if granularity == "hour" else by_day(hours)
        total = sum(hours[1:], hours[0]) if hours else None
        currency = reservation.currency
        return Response(
            {
                "reservation": reservation.pk,
                "from": window.start.isoformat().replace("+00:00", "Z"),
                "to": window.end.isoformat().replace("+00:00", "Z"),
                "granularity": granularity,
                "rows": [figures_row(row, currency) for row in rows],
                "total": None if total is None else figures_row(total, currency),
            }
        )


class ServiceTierSerializer(ModelSerializer):
    tier = serializers.ChoiceField(source="service_tier", choices=MULTIPLIED_TIER_CHOICES)
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
