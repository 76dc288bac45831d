"""Cost models, factory costs (effective-dated, create-only once in force) and TFOM."""

from decimal import Decimal, InvalidOperation

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.api.serializers import CostModelSerializer, FactoryCostsSerializer, TfomSerializer
from flywheel.measurement import FACTORY, FactoryData
from flywheel.models import CostModel, FactoryCosts
from flywheel.services.costs import (
    CostError,
    cost_model_create,
    cost_version_delete,
    factory_costs_create,
)
from flywheel.services.tfom import TfomError, tfom_json, tfom_measure
from flywheel.tfom import DEFAULT_BASELINE_TEF
from portal.access import Capability
from portal.periods import period_from_query
from portal.permissions import capability_permission

CostPermission = capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY)
ERRORS = OpenApiResponse(
    OpenApiTypes.OBJECT, description='{"errors": [{"field": ..., "message": ...}]}'
)


class CostVersionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Create-only once in force: a version is never edited, and only deleted before its
    effective_from (a mistake caught in time); later terms are a new version."""

    permission_classes = [CostPermission]

    def perform_create(self, serializer):
        try:
            serializer.instance = self.create_version(serializer.validated_data)
        except CostError as error:
            raise serializers.ValidationError({error.field: [error.message]}) from None

    def perform_destroy(self, instance):
        try:
            cost_version_delete(version=instance, by=self.request.user)
        except CostError as error:
            raise serializers.ValidationError({error.field: [error.message]}) from None


@extend_schema(responses={400: ERRORS, 403: ERRORS})
class CostModelViewSet(CostVersionViewSet):
    """Per-pool TCO inputs (capex, depreciation, power, PUE, electricity, hosting), effective-dated."""

    serializer_class = CostModelSerializer
    queryset = CostModel.objects.select_related("pool")
    filterset_fields = {"pool__slug": ["exact"]}

    def create_version(self, data):
        return cost_model_create(**data, by=self.request.user)


@extend_schema(responses={400: ERRORS, 403: ERRORS})
class FactoryCostsViewSet(CostVersionViewSet):
    """Factory-level monthly costs (staff, SG&A), effective-dated."""

    serializer_class = FactoryCostsSerializer
    queryset = FactoryCosts.objects.all()

    def create_version(self, data):
        return factory_costs_create(**data, by=self.request.user)


def _baseline_tef(value: str | None) -> Decimal:
    if not value:
        return DEFAULT_BASELINE_TEF
    try:
        baseline = Decimal(value)
    except InvalidOperation:
        baseline = None
    if baseline is None or not baseline.is_finite() or baseline <= 0:
        raise serializers.ValidationError(
            {"baseline_tef": ["must be a positive number, e.g. 0.30"]}
        )
    return baseline


class TfomView(APIView):
    """Every TFOM figure of kpis.md sections 4-5 for the factory or one pool over [from, to)
    (default: this month so far): the KPI keys plus the P&L, unit economics, ROI, payback
    and equivalent GPUs against `baseline_tef` (default 0.30)."""

    permission_classes = [capability_permission(read=Capability.READ_FACTORY)]

    @extend_schema(
        parameters=[
            OpenApiParameter("scope", str, description="'factory' (default) or a pool slug"),
            OpenApiParameter("from", str, description="RFC 3339 or YYYY-MM-DD"),
            OpenApiParameter("to", str, description="RFC 3339 or YYYY-MM-DD (excluded)"),
            OpenApiParameter("baseline_tef", float, description="TEF_0, default 0.30"),
        ],
        responses={200: TfomSerializer, 400: ERRORS, 403: ERRORS},
    )
    def get(self, request):
        period = period_from_query(request.query_params)
        scope = request.query_params.get("scope") or FACTORY
        baseline = _baseline_tef(request.query_params.get("baseline_tef"))
        data = FactoryData(start=period.start, end=period.end)
        try:
            tfom = tfom_measure(
                scope=scope,
                start=period.start,
                end=period.end,
                baseline_tef=baseline,
                data=data,
            )
        except TfomError as error:
            raise serializers.ValidationError({error.field: [error.message]}) from None
        return Response({**tfom_json(tfom), "rating_errors": data.rating_errors})
