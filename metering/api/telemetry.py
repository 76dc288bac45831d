"""Telemetry API: Prometheus pushes (vLLM, SGLang, dcgm-exporter) and scrape targets."""

import re

from django.core.exceptions import RequestDataTooBig
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import permissions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from metering.api.usage import ErrorsSerializer
from metering.domain.usage.body import BatchError, PayloadTooLarge, decompress_body
from metering.filters import ScrapeTargetFilterSet
from metering.models import Deployment, Pool, ScrapeTarget, TelemetryKind
from metering.services.telemetry.ingest import (
    DEFAULT_PUSH_SOURCE,
    MAX_EXPOSITION_BYTES,
    telemetry_ingest,
)
from portal import clock
from portal.access import Capability, user_role
from portal.api.errors import content_type_check, errors_response
from portal.api.views import AuditedModelViewSet
from portal.models import Role, Scope
from portal.permissions import UnboundToken, capability_permission

_SOURCE = re.compile(r"[-a-zA-Z0-9_.:]{1,128}")
_TEXT_TYPES = ("text/plain", "")
_MAX_MIB = MAX_EXPOSITION_BYTES // (1024 * 1024)

PushPermission = capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY)


class TelemetrySkippedSerializer(serializers.Serializer):
    family = serializers.CharField()
    reason = serializers.CharField()


class TelemetryPushResultSerializer(serializers.Serializer):
    families = serializers.IntegerField(help_text="Metric families parsed and kept.")
    skipped = TelemetrySkippedSerializer(
        many=True, help_text="Families skipped and why; never fatal to the others."
    )
    unknown_models = serializers.ListField(
        child=serializers.CharField(),
        help_text="Engine model names that resolve to no deployment of the pool (not stored).",
    )


class TelemetryPrometheusView(APIView):
    """A Prometheus text exposition pushed for a pool; stored like a scrape of it."""

    write_scope = Scope.INGEST
    permission_classes = [PushPermission, UnboundToken]
    throttle_scope = "ingest"

    @extend_schema(
        operation_id="telemetry_prometheus_push",
        summary="Push a Prometheus exposition (vLLM, SGLang or dcgm-exporter)",
        description=(
            "The body is the text of a `/metrics` page (≤ 8 MiB, gzip accepted). Counter and "
            "histogram increases since the previous push of the same pool, kind and `source` "
            "are added into the current UTC hour; the first push is a baseline. Engine model "
            "names resolve to deployments of the pool through the served models' aliases or "
            "slugs. A malformed family is skipped and listed, never fatal. Needs a token with "
            "the `ingest` scope."
        ),
        parameters=[
            OpenApiParameter("kind", str, required=True, enum=TelemetryKind.values),
            OpenApiParameter("pool", str, required=True, description="Pool slug."),
            OpenApiParameter(
                "source",
                str,
                required=False,
                description=(
                    "Names the pushing process (default `default`); each engine or exporter "
                    "pushing to one pool needs its own, as its counters are diffed separately."
                ),
            ),
        ],
        request={"text/plain": OpenApiTypes.STR},
        responses={
            200: TelemetryPushResultSerializer,
            400: ErrorsSerializer,
            401: ErrorsSerializer,
            403: ErrorsSerializer,
            413: ErrorsSerializer,
            415: ErrorsSerializer,
        },
    )
    def post(self, request):
        if _declared_length(request) > MAX_EXPOSITION_BYTES:
            return _too_large()
        errors = []
        kind = request.query_params.get("kind", "")
        if kind not in TelemetryKind.values:
            errors.append(
                {"field": "kind", "message": f"must be one of {', '.join(TelemetryKind.values)}"}
            )
        pool_slug = request.query_params.get("pool", "")
        pool = None
        if "\x00" in pool_slug:  # PostgreSQL text cannot hold it: never looked up
            errors.append({"field": "pool", "message": "must not contain NUL (U+0000) characters"})
        elif pool_slug:
            pool = Pool.objects.filter(slug=pool_slug).first()
            if pool is None:
                errors.append({"field": "pool", "message": f"no pool {pool_slug!r}"})
        else:
            errors.append({"field": "pool", "message": "query parameter is required"})
        source = request.query_params.get("source") or DEFAULT_PUSH_SOURCE
        if not _SOURCE.fullmatch(source):
            errors.append(
                {
                    "field": "source",
                    "message": "must be 1 to 128 letters, digits, '-', '_', '.' or ':'",
                }
            )
        content_type_check(request=request, allowed=_TEXT_TYPES, expected="text/plain")
        if errors:
            return errors_response(errors, status.HTTP_400_BAD_REQUEST)
        try:
            body = decompress_body(
                body=request.body,
                content_encoding=request.headers.get("Content-Encoding"),
                max_bytes=MAX_EXPOSITION_BYTES,
            )
            text = body.decode("utf-8-sig")
        except (RequestDataTooBig, PayloadTooLarge):
            return _too_large()
        except BatchError as exc:
            return errors_response([{"field": "body", "message": exc.message}], 400)
        except UnicodeDecodeError:
            return errors_response([{"field": "body", "message": "must be UTF-8 text"}], 400)
        result = telemetry_ingest(text=text, kind=kind, pool=pool, now=clock.now(), source=source)
        return Response(
            {
                "families": result.families,
                "skipped": [{"family": name, "reason": reason} for name, reason in result.skipped],
                "unknown_models": list(result.unknown_models),
            }
        )


def _declared_length(request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _too_large() -> Response:
    return errors_response(
        [{"field": "body", "message": f"the exposition is larger than {_MAX_MIB} MiB"}],
        status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


class ScrapeTargetSerializer(serializers.ModelSerializer):
    pool = serializers.SlugRelatedField(slug_field="slug", queryset=Pool.objects.all())
    deployment = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=Deployment.objects.all(),
        required=False,
        allow_null=True,
        help_text="Engines only: every model of the page counts for it. Empty: resolve "
        "model_name through the served models' aliases and slugs on the pool.",
    )
    timeout_s = serializers.IntegerField(min_value=1, max_value=20, default=5)

    class Meta:
        model = ScrapeTarget
        # Set by the portal and the scraper (its last visit): shown, never written.
        read_only_fields = [
            "last_scraped_at",
            "last_status",
            "last_error",
            "consecutive_failures",
            "last_skipped",
            "last_unknown_models",
            "created_at",
        ]
        fields = [
            "id",
            "url",
            "kind",
            "pool",
            "deployment",
            "enabled",
            "timeout_s",
            *read_only_fields,
        ]

    def validate(self, attrs):
        instance = self.instance

        def current(name):
            return attrs[name] if name in attrs else getattr(instance, name, None)

        kind, pool, deployment = current("kind"), current("pool"), current("deployment")
        if deployment is not None and kind == TelemetryKind.DCGM:
            raise serializers.ValidationError({"deployment": "must be empty for a dcgm target"})
        if deployment is not None and pool is not None and deployment.pool_id != pool.pk:
            raise serializers.ValidationError(
                {"deployment": f"runs on pool {deployment.pool.slug!r}, not {pool.slug!r}"}
            )
        return attrs

    def update(self, instance, validated_data):
        if any(
            name in validated_data and validated_data[name] != getattr(instance, name)
            for name in ("url", "kind")
        ):
            instance.state = {}  # another exposition: the previous baseline does not apply
        return super().update(instance, validated_data)


class ScrapeTargetPermission(
    capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY)
):
    """Operators write (token scope `admin`); operators and finance read (scope `read`)."""

    def has_permission(self, request, view) -> bool:
        if not super().has_permission(request, view):
            return False
        if request.method in permissions.SAFE_METHODS:
            self.message = "Your role may not do this."
            return user_role(request.user) in (Role.OPERATOR, Role.FINANCE)
        return True


@extend_schema_view(
    list=extend_schema(responses={200: ScrapeTargetSerializer(many=True), 403: ErrorsSerializer}),
    retrieve=extend_schema(responses={200: ScrapeTargetSerializer, 403: ErrorsSerializer}),
    create=extend_schema(
        responses={201: ScrapeTargetSerializer, 400: ErrorsSerializer, 403: ErrorsSerializer}
    ),
    update=extend_schema(
        responses={200: ScrapeTargetSerializer, 400: ErrorsSerializer, 403: ErrorsSerializer}
    ),
    partial_update=extend_schema(
        responses={200: ScrapeTargetSerializer, 400: ErrorsSerializer, 403: ErrorsSerializer}
    ),
    destroy=extend_schema(responses={204: None, 403: ErrorsSerializer}),
)
class ScrapeTargetViewSet(AuditedModelViewSet):
    """Prometheus `/metrics` URLs scraped every 30 s, with their last status. Changing the
    URL or kind restarts from a baseline."""

    queryset = ScrapeTarget.objects.select_related("pool", "deployment").order_by("pk")
    serializer_class = ScrapeTargetSerializer
    audit_type = "scrape_target"
    permission_classes = [ScrapeTargetPermission]
    filterset_class = ScrapeTargetFilterSet
