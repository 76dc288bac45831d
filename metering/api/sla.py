"""Incidents and maintenance windows API: `/api/v1/incidents` and `/api/v1/maintenance`.

Writes validate with a serializer and call `metering.services.incidents`; reads go through
`metering.sla` (tenant members see only the incidents that touched their tenant)."""

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from metering.api.usage import ErrorsSerializer
from metering.filters import IncidentFilterSet
from metering.models import (
    Deployment,
    Incident,
    IncidentImpact,
    IncidentStatus,
    IncidentUpdate,
    MaintenanceWindow,
    Pool,
)
from metering.selectors.sla.incidents import (
    current_impact,
    incident_queryset,
    maintenance_queryset,
    model_names,
)
from metering.selectors.sla.lists import incident_list, incident_visible_tenants, maintenance_list
from metering.services.sla.incidents import incident_create, incident_edit, incident_update_add
from metering.services.sla.maintenance import (
    maintenance_window_cancel,
    maintenance_window_create,
    maintenance_window_edit,
)
from portal import clock
from portal.access import Capability
from portal.api.fields import AwareDateTimeField, ModelSerializer
from portal.api.periods import PERIOD_PARAMETERS
from portal.models import Tenant
from portal.periods import period_resolve
from portal.permissions import capability_permission

IncidentPermission = capability_permission(
    read=Capability.READ_TENANT_DATA, write=Capability.WRITE_FACTORY
)
# Maintenance windows are configuration: operators and finance read them through the API;
# everyone sees the upcoming ones on the public status page.
MaintenancePermission = capability_permission(
    read=Capability.READ_CONFIGURATION, write=Capability.WRITE_FACTORY
)

WRITE_ERRORS = {400: ErrorsSerializer, 403: ErrorsSerializer, 404: ErrorsSerializer}


def _slugs(queryset, **kwargs):
    return serializers.SlugRelatedField(
        slug_field="slug", queryset=queryset, many=True, required=False, **kwargs
    )


class IncidentUpdateSerializer(ModelSerializer):
    """A public update: the status from `time` on, and the impact when it changed."""

    impact = serializers.ChoiceField(
        choices=IncidentImpact.choices,
        required=False,
        allow_blank=True,
        allow_null=True,
        default="",
        help_text="New impact from `time` on; empty, null or absent: unchanged.",
    )
    time = AwareDateTimeField(required=False, help_text="Default: now.")
    message = serializers.CharField(required=False, allow_blank=True, default="")
    # Plain values: a choice set distinct from the incident's own, so the schema names
    # each enum after its component instead of colliding with other "status" enums.
    status = serializers.ChoiceField(choices=IncidentStatus.values)

    class Meta:
        model = IncidentUpdate
        fields = ["id", "time", "status", "impact", "message"]
        read_only_fields = ["id"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["impact"] = data["impact"] or None
        return data


class IncidentSerializer(ModelSerializer):
    deployments = _slugs(
        Deployment.objects.all(), help_text="Deployment slugs; with `pools` empty: every one."
    )
    pools = _slugs(Pool.objects.all(), help_text="Pool slugs: every deployment on them.")
    tenants = _slugs(
        Tenant.objects.all(),
        help_text="Tenant slugs; empty: every tenant that used the deployments that month.",
    )
    impact = serializers.ChoiceField(
        choices=IncidentImpact.choices,
        help_text="The opening impact, from started_at; later changes are updates.",
    )
    current_impact = serializers.SerializerMethodField()
    models = serializers.SerializerMethodField(help_text="Served models concerned (empty: all).")
    status = serializers.ChoiceField(
        choices=IncidentStatus.choices,
        required=False,
        default=IncidentStatus.INVESTIGATING,
        help_text="On creation only; afterwards it changes by posting updates.",
    )
    resolved_at = AwareDateTimeField(
        required=False,
        allow_null=True,
        help_text="On creation: records a past incident. Afterwards: a correction only.",
    )
    message = serializers.CharField(
        write_only=True, required=False, allow_blank=True, default="", help_text="First update."
    )
    updates = IncidentUpdateSerializer(many=True, read_only=True)

    class Meta:
        model = Incident
        fields = [
            "id",
            "title",
            "severity",
            "impact",
            "current_impact",
            "status",
            "deployments",
            "pools",
            "tenants",
            "models",
            "started_at",
            "resolved_at",
            "cause",
            "remediation",
            "message",
            "updates",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]

    def get_current_impact(self, obj) -> str:
        return current_impact(obj)

    def get_models(self, obj) -> list[str]:
        return model_names(obj)

    def validate(self, attrs):
        if self.instance is not None:
            refused = {
                "status": "changes by posting an update to /api/v1/incidents/<id>/updates",
                "message": "is posted as an update to /api/v1/incidents/<id>/updates",
            }
            errors = {f: m for f, m in refused.items() if f in self.initial_data}
            if errors:
                raise serializers.ValidationError(errors)
        return attrs

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is not None:
            data["tenants"] = incident_visible_tenants(incident=instance, user=request.user)
        return data


INCIDENT_ORDERING = IncidentFilterSet.base_filters["ordering"]


def _period(request):
    """The records' filter: the period as asked (upcoming windows lie past now)."""
    params = request.query_params
    return period_resolve(params).requested if {"period", "from", "to"} & set(params) else None


@extend_schema_view(
    list=extend_schema(
        description=(
            "Incidents, newest first. Without `from`/`to`, all of them (an open incident "
            "may have started long ago). Tenant members see those that touched their tenant."
        ),
        parameters=[
            OpenApiParameter(
                "status",
                str,
                enum=["open", *IncidentStatus.values],
                description="`open`: unresolved",
            ),
            OpenApiParameter(
                "impact",
                str,
                enum=IncidentImpact.values,
                description="Only those whose worst impact (opening or any update's) it is",
            ),
            OpenApiParameter(
                "deployment", str, description="Only those naming the deployment or its pool"
            ),
            *PERIOD_PARAMETERS,
            OpenApiParameter("tenant", str, description="Only incidents that touched it"),
            OpenApiParameter("month", str, description="Only those active in it, YYYY-MM"),
            OpenApiParameter(
                "ordering",
                str,
                enum=[value for value, _ in INCIDENT_ORDERING.extra["choices"]],
                description=INCIDENT_ORDERING.extra["help_text"],
            ),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int),
        ],
        responses={
            200: IncidentSerializer(many=True),
            400: ErrorsSerializer,
            403: ErrorsSerializer,
        },
    ),
    retrieve=extend_schema(responses={200: IncidentSerializer, 404: ErrorsSerializer}),
    create=extend_schema(responses={201: IncidentSerializer, **WRITE_ERRORS}),
    partial_update=extend_schema(
        description="Correct the record; the status changes only through updates.",
        responses={200: IncidentSerializer, **WRITE_ERRORS},
    ),
)
class IncidentViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """SLA incidents: open, update in public, resolve; postmortem fields."""

    serializer_class = IncidentSerializer
    permission_classes = [IncidentPermission]
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self):
        if self.action != "list":
            return incident_list(user=self.request.user)
        return incident_list(
            user=self.request.user,
            filters=self.request.query_params,
            period=_period(self.request),
        )

    def _fresh(self, incident: Incident) -> Incident:
        return incident_queryset().get(pk=incident.pk)

    def perform_create(self, serializer):
        serializer.instance = self._fresh(
            incident_create(**serializer.validated_data, by=self.request.user)
        )

    def perform_update(self, serializer):
        serializer.instance = self._fresh(
            incident_edit(
                incident=serializer.instance, **serializer.validated_data, by=self.request.user
            )
        )

    @extend_schema(
        request=IncidentUpdateSerializer,
        responses={201: IncidentSerializer, **WRITE_ERRORS},
        description="Post a public update (status, message, optional impact change).",
    )
    @action(detail=True, methods=["post"], serializer_class=IncidentUpdateSerializer)
    def updates(self, request, pk=None):
        incident = self.get_object()
        serializer = IncidentUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = {
            **serializer.validated_data,
            "impact": serializer.validated_data.get("impact") or "",
        }
        incident_update_add(incident=incident, **data, by=request.user)
        return Response(
            IncidentSerializer(self._fresh(incident), context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )


class MaintenanceWindowSerializer(ModelSerializer):
    deployments = _slugs(
        Deployment.objects.all(), help_text="Deployment slugs; with `pools` empty: every one."
    )
    pools = _slugs(Pool.objects.all(), help_text="Pool slugs: every deployment on them.")
    models = serializers.SerializerMethodField(help_text="Served models concerned (empty: all).")

    class Meta:
        model = MaintenanceWindow
        fields = [
            "id",
            "title",
            "description",
            "deployments",
            "pools",
            "models",
            "starts_at",
            "ends_at",
            "announced_at",
        ]
        read_only_fields = ["id"]
        extra_kwargs = {
            "announced_at": {
                "required": False,
                "help_text": "When tenants were told (default now): before `starts_at`, not "
                "in the future. A past window is imported with the `announced_at` it had.",
            }
        }

    def get_models(self, obj) -> list[str]:
        return model_names(obj)


@extend_schema_view(
    list=extend_schema(
        description="Maintenance windows by start; `upcoming=true`: those not over yet.",
        parameters=[
            *PERIOD_PARAMETERS,
            OpenApiParameter("upcoming", bool),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int),
        ],
        responses={200: MaintenanceWindowSerializer(many=True), 403: ErrorsSerializer},
    ),
    retrieve=extend_schema(responses={200: MaintenanceWindowSerializer, 404: ErrorsSerializer}),
    create=extend_schema(
        description="Announce maintenance (it must start in the future), or import a past "
        "window with the `announced_at` it had; none may start in a closed month.",
        responses={201: MaintenanceWindowSerializer, **WRITE_ERRORS},
    ),
    partial_update=extend_schema(
        description="Change a window that has not started.",
        responses={200: MaintenanceWindowSerializer, **WRITE_ERRORS},
    ),
    destroy=extend_schema(
        description="Cancel a window that has not started.",
        responses={204: None, **WRITE_ERRORS},
    ),
)
class MaintenanceWindowViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Announced maintenance windows, excluded from uptime; fixed once started."""

    serializer_class = MaintenanceWindowSerializer
    permission_classes = [MaintenancePermission]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        if self.action != "list":
            return maintenance_queryset()
        upcoming = self.request.query_params.get("upcoming") in ("true", "1")
        return maintenance_list(
            period=_period(self.request), upcoming_at=clock.now() if upcoming else None
        )

    def perform_create(self, serializer):
        window = maintenance_window_create(**serializer.validated_data, by=self.request.user)
        serializer.instance = maintenance_queryset().get(pk=window.pk)

    def perform_update(self, serializer):
        window = maintenance_window_edit(
            window=serializer.instance, **serializer.validated_data, by=self.request.user
        )
        serializer.instance = maintenance_queryset().get(pk=window.pk)

    def perform_destroy(self, instance):
        maintenance_window_cancel(window=instance, by=self.request.user)
