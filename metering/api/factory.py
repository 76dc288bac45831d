from decimal import Decimal

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.validators import UniqueValidator
from rest_framework.views import APIView

from metering.domain.factory import points_from_csv, points_from_json
from metering.models import Deployment, DeploymentVersion, Pool, ServedModel
from metering.selectors.factory import curve_json, curve_list, curve_r_ref_for
from metering.services.factory import (
    VersionSpec,
    curves_import,
    deployment_create,
    deployment_version_add,
    pool_write,
    served_model_aliases_set,
)
from portal.access import Capability
from portal.api.errors import content_type_check
from portal.api.fields import AwareDateTimeField, ModelSerializer
from portal.api.views import AuditedModelViewSet
from portal.errors import FieldError
from portal.permissions import capability_permission


class PoolSerializer(ModelSerializer):
    """A pool; `in_service_from` (default: its first capacity sample or usage hour, stored
    once seen) and `retired_at` bound the time it counts (kpis.md section 0)."""

    class Meta:
        model = Pool
        fields = ["slug", "name", "gpu_type", "gpu_count", "site", "in_service_from", "retired_at"]

    def validate(self, attrs):
        since = attrs.get("in_service_from", getattr(self.instance, "in_service_from", None))
        until = attrs.get("retired_at", getattr(self.instance, "retired_at", None))
        if since and until and until <= since:
            raise serializers.ValidationError({"retired_at": ["must be after in_service_from"]})
        return attrs


class AliasesField(serializers.ListField):
    """Alias names in, alias names out (from the model's related aliases)."""

    def to_representation(self, data):
        return sorted(alias.alias for alias in data.all())


INT_MAX = 2**31 - 1  # the largest value of an integer column

# Model and deployment names carry versions and pools: "llama-3.3-70b", "llama-3.3-70b@h100-a".
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"

NAME_HELP = "letters, digits and . _ @ - (e.g. llama-3.3-70b@h100-a)"


def name_field(model, max_length: int) -> serializers.RegexField:
    return serializers.RegexField(
        NAME_PATTERN,
        max_length=max_length,
        help_text=NAME_HELP,
        error_messages={"invalid": f"Use {NAME_HELP}."},
        validators=[UniqueValidator(queryset=model.objects.all())],
    )


class ServedModelSerializer(serializers.ModelSerializer):
    slug = name_field(ServedModel, 100)
    aliases = AliasesField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text="Engine names that resolve to this model (vLLM model_name, batch `model`).",
    )

    class Meta:
        model = ServedModel
        fields = ["slug", "name", "aliases"]


class DeploymentVersionSerializer(ModelSerializer):
    r_ref_from_curve = serializers.BooleanField(
        write_only=True,
        default=False,
        help_text="read r_ref off the model's reference curves on the pool's GPU type at "
        "slo_tpot_ms (kpis.md 6c); the derivation is kept in r_ref_derivation",
    )

    class Meta:
        model = DeploymentVersion
        fields = [
            "effective_from",
            "r_ref",
            "r_ref_from_curve",
            "r_ref_derivation",
            "w_in",
            "slo_ttft_ms",
            "slo_tpot_ms",
            "slo_ttft_ms_priority",
            "slo_tpot_ms_priority",
            "slo_min_tokens_per_s",
            "slo_target",
        ]
        read_only_fields = ["r_ref_derivation"]
        extra_kwargs = {
            "r_ref": {"required": False},
            "slo_ttft_ms_priority": {
                "help_text": "priority requests' TTFT threshold (ms); null: the standard one"
            },
            "slo_tpot_ms_priority": {
                "help_text": "priority requests' TPOT threshold (ms); null: the standard one"
            },
            "slo_target": {
                "min_value": Decimal("0.00001"),
                "max_value": Decimal("0.99999"),
                "help_text": "share of requests that must be compliant (SLO burn alerts)",
            },
        }


class DeploymentSerializer(serializers.ModelSerializer):
    slug = name_field(Deployment, 150)
    model = serializers.SlugRelatedField(slug_field="slug", queryset=ServedModel.objects.all())
    pool = serializers.SlugRelatedField(slug_field="slug", queryset=Pool.objects.all())
    r_ref = serializers.DecimalField(
        max_digits=14,
        decimal_places=4,
        min_value=Decimal("0.0001"),
        write_only=True,
        help_text="output tokens/s per GPU",
    )
    w_in = serializers.DecimalField(
        max_digits=8, decimal_places=6, min_value=Decimal(0), default=Decimal(0), write_only=True
    )
    slo_ttft_ms = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True, write_only=True
    )
    slo_tpot_ms = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True, write_only=True
    )
    slo_ttft_ms_priority = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True, write_only=True
    )
    slo_tpot_ms_priority = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True, write_only=True
    )
    versions = DeploymentVersionSerializer(many=True, read_only=True)

    class Meta:
        model = Deployment
        fields = [
            "slug",
            "model",
            "pool",
            "r_ref",
            "w_in",
            "slo_ttft_ms",
            "slo_tpot_ms",
            "slo_ttft_ms_priority",
            "slo_tpot_ms_priority",
            "versions",
        ]


class CapacitySampleSerializer(serializers.Serializer):
    pool = serializers.SlugRelatedField(slug_field="slug", queryset=Pool.objects.all())
    time = AwareDateTimeField()
    interval_s = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True
    )
    gpus_installed = serializers.IntegerField(min_value=0, max_value=10_000_000)
    gpus_healthy = serializers.IntegerField(min_value=0, max_value=10_000_000)
    gpus_busy = serializers.IntegerField(min_value=0, max_value=10_000_000)
    power_w = serializers.DecimalField(
        max_digits=14, decimal_places=3, min_value=Decimal(0), required=False, allow_null=True
    )

    def validate(self, attrs):
        if attrs["gpus_healthy"] > attrs["gpus_installed"]:
            raise serializers.ValidationError({"gpus_healthy": "must not exceed gpus_installed"})
        if attrs["gpus_busy"] > attrs["gpus_healthy"]:
            raise serializers.ValidationError({"gpus_busy": "must not exceed gpus_healthy"})
        return attrs


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

    def object_save(self, serializer):
        fields = serializer.validated_data
        serializer.instance = pool_write(stored=serializer.instance, fields=fields)
        return serializer.instance


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
                slo_ttft_ms_priority=data.get("slo_ttft_ms_priority"),
                slo_tpot_ms_priority=data.get("slo_tpot_ms_priority"),
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
        if data.pop("r_ref_from_curve"):
            if "r_ref" in data:
                raise FieldError("r_ref", "give r_ref or r_ref_from_curve, not both")
            data["r_ref"], data["r_ref_derivation"] = curve_r_ref_for(
                deployment=deployment, slo_tpot_ms=data.get("slo_tpot_ms")
            )
        elif "r_ref" not in data:
            raise FieldError("r_ref", "required (or r_ref_from_curve: true)")
        version = deployment_version_add(
            deployment=deployment,
            effective_from=data.pop("effective_from"),
            spec=VersionSpec(**data),
            by=request.user,
        )
        return Response(DeploymentVersionSerializer(version).data, status=status.HTTP_201_CREATED)


class ReferenceCurvesView(APIView):
    """Reference curves (kpis.md 6c, data-formats.md section 9): GET every curve with its
    Pareto front (production units) and R_ref at each model's TPOT SLO, or at
    `slo_tpot_ms`; POST a CSV export (text/csv) or a JSON array of points, which replaces
    the points of every curve it names. A point without `token_basis` is refused naming it
    (with its CSV line or JSON index); nothing of a refused import is stored."""

    permission_classes = [FactoryPermission]

    @extend_schema(
        parameters=[
            OpenApiParameter("slo_tpot_ms", int, description="read R_ref at this TPOT SLO"),
            OpenApiParameter("model", str, description="one served model's curves"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        slo = request.query_params.get("slo_tpot_ms")
        slo_tpot_ms = None
        if slo:
            if not slo.isdigit() or not 0 < int(slo) <= 100_000:
                raise FieldError("slo_tpot_ms", "must be a whole number of ms from 1 to 100000")
            slo_tpot_ms = int(slo)
        model = request.query_params.get("model") or None
        curves = curve_list(slo_tpot_ms=slo_tpot_ms, model=model)
        return Response({"curves": [curve_json(curve) for curve in curves]})

    @extend_schema(
        request={"text/csv": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        responses={201: OpenApiTypes.OBJECT},
    )
    def post(self, request):
        content_type_check(request=request, allowed=("text/csv", "application/json"))
        if request.content_type.startswith("text/csv"):
            try:
                text = request.body.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise FieldError("", "the CSV must be UTF-8") from None
            points = points_from_csv(text)
        else:
            points = points_from_json(request.data)
        stored = curves_import(points=points, by=request.user)
        names = {(row.model_id, row.gpu_type, row.tp, row.precision) for row in stored}
        return Response(
            {"points": len(stored), "curves": len(names)}, status=status.HTTP_201_CREATED
        )
