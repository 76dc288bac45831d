"""The factory's resources: pools, served models and deployments (with their versions)."""

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from metering.api.serializers import (
    DeploymentSerializer,
    DeploymentVersionSerializer,
    PoolSerializer,
    ServedModelSerializer,
)
from metering.models import Deployment, Pool, ServedModel
from metering.services.factory import (
    VersionSpec,
    deployment_create,
    deployment_version_add,
    served_model_aliases_set,
)
from portal.access import Capability
from portal.api.views import AuditedModelViewSet
from portal.permissions import capability_permission

FactoryPermission = capability_permission(
    read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY
)


class PoolViewSet(AuditedModelViewSet):
    """GPU pools, keyed by slug."""

    queryset = Pool.objects.all()
    serializer_class = PoolSerializer
    lookup_field = "slug"
    audit_type = "pool"
    permission_classes = [FactoryPermission]


class ServedModelViewSet(AuditedModelViewSet):
    """Served models, keyed by slug, with their engine aliases."""

    queryset = ServedModel.objects.prefetch_related("aliases")
    serializer_class = ServedModelSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[^/]+"  # slugs may hold dots: llama-3.3-70b
    audit_type = "served_model"
    permission_classes = [FactoryPermission]

    def perform_create(self, serializer):
        aliases = serializer.validated_data.pop("aliases", [])
        with transaction.atomic():
            super().perform_create(serializer)
            served_model_aliases_set(
                model=serializer.instance, aliases=aliases, by=self.request.user
            )

    def perform_update(self, serializer):
        aliases = serializer.validated_data.pop("aliases", None)
        with transaction.atomic():
            super().perform_update(serializer)
            if aliases is not None:
                served_model_aliases_set(
                    model=serializer.instance, aliases=aliases, by=self.request.user
                )


class DeploymentViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Deployments (a model on a pool). R_ref, w_in and SLO change by adding a version."""

    queryset = Deployment.objects.select_related("model", "pool").prefetch_related("versions")
    serializer_class = DeploymentSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[^/]+"  # llama-3.3-70b@h100-a
    permission_classes = [FactoryPermission]

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = deployment_create(
            slug=data["slug"],
            model=data["model"],
            pool=data["pool"],
            by=self.request.user,
            spec=VersionSpec(
                r_ref=data["r_ref"],
                w_in=data.get("w_in", 0),
                slo_ttft_ms=data.get("slo_ttft_ms"),
                slo_tpot_ms=data.get("slo_tpot_ms"),
            ),
        )

    @extend_schema(
        request=DeploymentVersionSerializer, responses={201: DeploymentVersionSerializer}
    )
    @action(detail=True, methods=["post"], serializer_class=DeploymentVersionSerializer)
    def versions(self, request, slug=None):
        deployment = self.get_object()
        serializer = DeploymentVersionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        version = deployment_version_add(
            deployment=deployment,
            effective_from=data.pop("effective_from"),
            spec=VersionSpec(**data),
            by=request.user,
        )
        return Response(DeploymentVersionSerializer(version).data, status=status.HTTP_201_CREATED)
