from collections.abc import Callable
from datetime import UTC, date, datetime, time

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.views import APIView

from metering.api.factory import INT_MAX, CapacitySampleSerializer
from metering.domain.usage.body import MAX_EVENTS, decode_batch, decompress_body
from metering.domain.usage.fields import SERVICE_TIERS, STANDARD, time_window
from metering.domain.usage.formats import (
    cloudevents_to_items,
    openai_batch_error_names,
    openai_batch_to_items,
)
from metering.domain.usage.json_batch import validate_json_batch
from metering.models import IngestRejection, Pool
from metering.selectors.ingestion import rejection_list
from metering.selectors.usage import USAGE_SUMS, usage_list, window_resolve
from metering.services.factory import CapacityIn, capacity_upsert
from metering.services.usage.ingest import Batch, Sender, batch_ingest, refusals_recorded
from portal import clock
from portal.access import Capability, own_gateway
from portal.api.errors import content_type_check, errors_response, flatten
from portal.api.pagination import Pagination
from portal.api.periods import PERIOD_PARAMETERS
from portal.formatting import rfc3339
from portal.models import Scope
from portal.permissions import UnboundToken, capability_permission
from portal.projects import project_slugs


def _tokens(*, required: bool = True, help_text: str = "") -> serializers.IntegerField:
    """A token count of an event: 0 up to an integer column's largest value."""
    return serializers.IntegerField(
        min_value=0, max_value=INT_MAX, required=required, help_text=help_text or None
    )


class UsageEventDoc(serializers.Serializer):
    """Documentation of one usage event (validated by hand for speed, not by this class)."""

    id = serializers.CharField(max_length=128, help_text="Idempotency key, unique per source")
    source = serializers.CharField(max_length=128, required=False, default="default")
    time = serializers.DateTimeField(help_text="Request end, RFC 3339 with a zone")
    tenant = serializers.SlugField()
    model = serializers.CharField(help_text="Served model slug or alias")
    pool = serializers.SlugField(required=False)
    project = serializers.SlugField(
        max_length=64,
        required=False,
        help_text="A slug of the tenant's projects; an unknown one is created at its first "
        "event (up to 1,000 a tenant). Default: the token's bound project, else the "
        "tenant's (none)",
    )
    input_tokens = _tokens()
    cached_tokens = _tokens(required=False, help_text="Of input_tokens: read from the prompt cache")
    cache_write_tokens = _tokens(
        required=False,
        help_text=(
            "Of input_tokens - cached_tokens: written to the prompt cache (priced as its own "
            "class when a cache_write price exists, else as input)"
        ),
    )
    output_tokens = _tokens()
    reasoning_tokens = _tokens(
        required=False,
        help_text=(
            "Of output_tokens: the reasoning part (priced as its own class when a "
            "reasoning price exists, else as output)"
        ),
    )
    ttft_ms = serializers.FloatField(min_value=0, required=False)
    tpot_ms = serializers.FloatField(min_value=0, required=False)
    latency_ms = serializers.FloatField(min_value=0, required=False)
    status = serializers.ChoiceField(choices=["ok", "error"], required=False, default="ok")
    requests = serializers.IntegerField(
        min_value=1,
        max_value=1_000_000,
        required=False,
        default=1,
        help_text=(
            "Requests of this outcome the event stands for (a pre-aggregated or sampled "
            "record): the token counts are their totals, the latencies their means"
        ),
    )
    service_tier = serializers.ChoiceField(
        choices=list(SERVICE_TIERS),
        required=False,
        default=STANDARD,
        help_text=(
            "The tier it was served at: its price (a tier's own, else standard × the tier's "
            "multiplier) and its latency SLO (priority: the deployment's priority thresholds; "
            "flex and batch: none) follow it"
        ),
    )


class IngestResultSerializer(serializers.Serializer):
    accepted = serializers.IntegerField()
    duplicates = serializers.IntegerField()


class ErrorItemSerializer(serializers.Serializer):
    index = serializers.IntegerField(required=False)
    field = serializers.CharField()
    message = serializers.CharField()


class ErrorsSerializer(serializers.Serializer):
    errors = ErrorItemSerializer(many=True)


class UsageRowSerializer(serializers.Serializer):
    period_start = serializers.DateTimeField()
    tenant = serializers.CharField()
    project = serializers.CharField(help_text="project slug; (none) for usage without one")
    model = serializers.CharField()
    pool = serializers.CharField()
    service_tier = serializers.CharField(help_text="standard, priority, flex or batch")
    requests = serializers.IntegerField()
    errors = serializers.IntegerField()
    input_tokens = serializers.IntegerField(help_text="Cached and cache-write included")
    cached_tokens = serializers.IntegerField()
    cache_write_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField(help_text="Reasoning included")
    reasoning_tokens = serializers.IntegerField()


IngestPermission = capability_permission(
    read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY
)


class UsageIngestPermission(IngestPermission):  # type: ignore[valid-type,misc]
    """Usage is sent by the factory's gateways (operators' tokens) and by a tenant's own
    gateway: a member's `ingest` token bound to its own tenant (portal.access.own_gateway),
    whose records the ingestion service holds to that tenant (Sender.bound_tenant)."""

    def has_permission(self, request, view) -> bool:
        if super().has_permission(request, view):
            return True
        return request.method not in SAFE_METHODS and own_gateway(request.user, request.auth)


ERROR_RESPONSES = {400: ErrorsSerializer, 403: ErrorsSerializer, 413: ErrorsSerializer}


class IngestView(APIView):
    """An ingestion path: it decodes its format and answers; the ingestion service does the
    rest (metering.services.usage.ingest)."""

    write_scope = Scope.INGEST
    permission_classes = [UsageIngestPermission]
    throttle_scope = "ingest"

    def sender(self) -> Sender:
        """Who sent the request, as the ingestion service asks."""
        token = self.request.auth
        bound = getattr(token, "bound_tenant", None)
        project = getattr(token, "bound_project", None)
        return Sender(
            path=self.request.path,
            token_prefix=getattr(token, "prefix", ""),
            bound_tenant=bound.slug if bound is not None else None,
            bound_project=project.slug if project is not None else None,
        )

    def ingest(self, decode: Callable[[], Batch]) -> Response:
        """A native batch (`decode`, the format's), all or nothing, answered with what was
        stored."""
        sender = self.sender()
        with refusals_recorded(sender):
            batch = decode()
        result = batch_ingest(sender=sender, batch=batch)
        return Response({"accepted": result.accepted, "duplicates": result.duplicates})


class UsageEventsView(IngestView):
    """Native JSON batches of usage events (≤ 10,000; gzip accepted)."""

    @extend_schema(
        request={"application/json": UsageEventDoc(many=True)},
        examples=[
            OpenApiExample(
                "Two requests",
                value=[
                    {
                        "id": "req-7f3a",
                        "time": "2026-12-01T08:15:02Z",
                        "tenant": "acme",
                        "model": "llama-3.3-70b",
                        "input_tokens": 1812,
                        "cached_tokens": 1024,
                        "output_tokens": 412,
                        "ttft_ms": 310,
                        "tpot_ms": 28,
                    },
                    {
                        "id": "req-7f3b",
                        "time": "2026-12-01T08:15:04Z",
                        "tenant": "acme",
                        "model": "llama-3.3-70b",
                        "input_tokens": 950,
                        "output_tokens": 0,
                        "status": "error",
                    },
                ],
                request_only=True,
            )
        ],
        responses={
            200: IngestResultSerializer,
            409: ErrorsSerializer,
            415: ErrorsSerializer,
            **ERROR_RESPONSES,
        },
    )
    def post(self, request):
        def decode() -> Batch:
            content_type_check(request=request, allowed=("application/json",))
            encoding = request.headers.get("Content-Encoding")
            data = decompress_body(body=request.body, content_encoding=encoding)
            # A batch of valid events is decoded and validated in one pass (no dict per
            # event); any other batch takes the general path, which reports every error.
            events = validate_json_batch(data=data, now=clock.now(), max_events=MAX_EVENTS)
            if events is not None:
                return Batch(events=events)
            return Batch(items=decode_batch(body=data, content_encoding=None))

        return self.ingest(decode)


class CloudEventsView(IngestView):
    """CloudEvents 1.0 batches: dedup on (source, id); tenant from data.tenant, else subject."""

    @extend_schema(
        request={"application/cloudevents-batch+json": OpenApiTypes.OBJECT},
        responses={200: IngestResultSerializer, 409: ErrorsSerializer, **ERROR_RESPONSES},
    )
    def post(self, request):
        def decode() -> Batch:
            content_type_check(
                request=request,
                allowed=("application/cloudevents-batch+json", "application/json"),
            )
            encoding = request.headers.get("Content-Encoding")
            items = decode_batch(body=request.body, content_encoding=encoding)
            converted, errors = cloudevents_to_items(items=items)
            return Batch(items=converted, errors=errors)

        return self.ingest(decode)


class OpenAIBatchView(IngestView):
    """OpenAI Batch output JSONL (also vLLM run-batch), for one tenant (`?tenant=`)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "tenant", str, description="Required unless the token is bound to a tenant"
            ),
            OpenApiParameter("pool", str, required=False),
            OpenApiParameter(
                "project",
                str,
                required=False,
                description="The tenant's project every line is metered to (kpis.md 3e); "
                "default: the token's bound project, else the tenant's (none)",
            ),
        ],
        request={"application/jsonl": OpenApiTypes.STR},
        responses={200: IngestResultSerializer, 409: ErrorsSerializer, **ERROR_RESPONSES},
    )
    def post(self, request):
        tenant = self.sender().tenant_of(request.query_params.get("tenant"))

        def decode() -> Batch:
            encoding = request.headers.get("Content-Encoding")
            text = decompress_body(body=request.body, content_encoding=encoding)
            converted, errors = openai_batch_to_items(
                body=text,
                tenant=tenant,
                pool=request.query_params.get("pool") or None,
                project=request.query_params.get("project") or None,
            )
            return Batch(
                items=converted,
                errors=errors,
                names=lambda found: openai_batch_error_names(body=text, errors=found),
            )

        return self.ingest(decode)


class _PoolSlugField(serializers.SlugRelatedField):
    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:  # PostgreSQL text cannot hold it
            raise serializers.ValidationError("must not contain NUL (U+0000) characters")
        return super().to_internal_value(data)


class _CapacitySampleIn(CapacitySampleSerializer):
    """A capacity sample as ingested: its time inside the ingestion window (context
    `window`, one for the whole batch) and a pool slug that can be looked up."""

    def get_fields(self):
        fields = super().get_fields()
        fields["pool"] = _PoolSlugField(slug_field="slug", queryset=Pool.objects.all())
        return fields

    def validate_time(self, value):
        problem = self.context["window"].problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


class CapacityView(APIView):
    """Capacity samples of pools (installed ≥ healthy ≥ busy GPUs); all or nothing; not
    from a token bound to a tenant."""

    write_scope = Scope.INGEST
    permission_classes = [IngestPermission, UnboundToken]

    @extend_schema(
        request=CapacitySampleSerializer(many=True),
        examples=[
            OpenApiExample(
                "A pool at 08:15",
                value=[
                    {
                        "pool": "h100-a",
                        "time": "2026-12-01T08:15:00Z",
                        "interval_s": 900,
                        "gpus_installed": 512,
                        "gpus_healthy": 497,
                        "gpus_busy": 281,
                    }
                ],
                request_only=True,
            )
        ],
        responses={
            200: inline_serializer(
                "CapacityResult",
                {"created": serializers.IntegerField(), "replaced": serializers.IntegerField()},
            ),
            **ERROR_RESPONSES,
        },
    )
    def post(self, request):
        if not isinstance(request.data, list):
            return errors_response([{"field": "", "message": "body must be a JSON array"}], 400)
        if len(request.data) > 10_000:
            return errors_response([{"field": "", "message": "at most 10,000 samples"}], 413)
        errors, samples = [], []
        context = {"window": time_window(now=clock.now())}
        for index, item in enumerate(request.data):
            serializer = _CapacitySampleIn(data=item, context=context)
            if serializer.is_valid():
                samples.append(CapacityIn(**serializer.validated_data))
            else:
                errors += [{"index": index, **e} for e in flatten(serializer.errors)]
        if errors:
            return errors_response(errors, 400)
        created, replaced = capacity_upsert(samples=samples)
        return Response({"created": created, "replaced": replaced})


class UsageListView(APIView):
    """Usage per hour or day, tenant, project, model and pool (tenants see only their own
    rows)."""

    permission_classes = [capability_permission(read=Capability.READ_TENANT_DATA)]
    pagination_class = Pagination  # documents the paginated envelope in the schema

    @extend_schema(
        parameters=[
            OpenApiParameter("tenant", str),
            OpenApiParameter("model", str),
            OpenApiParameter("pool", str),
            OpenApiParameter("project", str, description="project slug, or (none)"),
            *PERIOD_PARAMETERS,
            OpenApiParameter("granularity", str, enum=["hour", "day"]),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int),
        ],
        responses={200: UsageRowSerializer(many=True), 400: ErrorsSerializer},
    )
    def get(self, request):
        granularity = request.query_params.get("granularity", "day")
        if granularity not in ("hour", "day"):
            return errors_response(
                [{"field": "granularity", "message": 'must be "hour" or "day"'}], 400
            )
        # The window a read measures (kpis.md section 0), as /api/v1/kpis and the pages.
        period = window_resolve(request.query_params).period
        rows = usage_list(
            user=request.user,
            period=period,
            granularity=granularity,
            filters=request.query_params,
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        slugs = project_slugs({row["project_id"] for row in page})
        return paginator.get_paginated_response([_usage_row(r, slugs) for r in page])


def _usage_row(row: dict, projects: dict[int, str]) -> dict:
    start = row["period_start"]
    if isinstance(start, date) and not isinstance(start, datetime):
        start = datetime.combine(start, time.min, tzinfo=UTC)
    return {
        "period_start": rfc3339(start),
        "tenant": row["tenant__slug"],
        "project": projects[row["project_id"]],
        "model": row["deployment__model__slug"],
        "pool": row["deployment__pool__slug"],
        "service_tier": row["service_tier"],
        **{name: row[name] for name in USAGE_SUMS},
    }


class RejectionSerializer(serializers.ModelSerializer):
    class Meta:
        model = IngestRejection
        fields = ["id", "at", "path", "token_prefix", "source", "status", "received", "rejected",
                  "errors"]  # fmt: skip


class RejectionListView(APIView):
    """The ingestion debugger: batches refused whole and OTLP exports with rejected spans,
    kept 7 days (no payload), newest first (operators)."""

    permission_classes = [capability_permission(read=Capability.READ_INGESTION)]
    pagination_class = Pagination

    @extend_schema(responses={200: RejectionSerializer(many=True)})
    def get(self, request):
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rejection_list(), request, view=self)
        return paginator.get_paginated_response(RejectionSerializer(page, many=True).data)
