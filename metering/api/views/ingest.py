"""Ingestion: usage event batches (native, CloudEvents, OpenAI Batch) and capacity samples."""

from django.core.exceptions import RequestDataTooBig
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from metering.api.serializers import (
    CapacitySampleSerializer,
    ErrorsSerializer,
    IngestResultSerializer,
    UsageEventDoc,
)
from metering.ingest.body import (
    MAX_EVENTS,
    BatchError,
    PayloadTooLarge,
    decode_batch,
    decompress_body,
)
from metering.ingest.formats import cloudevents_to_items, merge_errors, openai_batch_to_items
from metering.ingest.validation import FieldError, validate_events, validate_json_batch
from metering.services.factory import CapacityIn, capacity_upsert
from metering.services.ingest import IngestConflict, IngestRejected, usage_ingest
from portal import clock
from portal.access import Capability
from portal.api.errors import errors_response, flatten
from portal.models import Scope
from portal.permissions import capability_permission

IngestPermission = capability_permission(
    read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY
)
ERROR_RESPONSES = {400: ErrorsSerializer, 403: ErrorsSerializer, 413: ErrorsSerializer}


def _body(request) -> bytes | Response:
    try:
        return request.body
    except RequestDataTooBig:
        return errors_response(
            [{"field": "", "message": "request body is larger than 32 MiB"}],
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )


def _field_errors(errors: list[FieldError]) -> Response:
    return errors_response([e.as_dict() for e in errors], status.HTTP_400_BAD_REQUEST)


def _content_type_error(request, allowed: tuple[str, ...]) -> Response | None:
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type not in allowed:
        return errors_response(
            [
                {
                    "field": "Content-Type",
                    "message": f"must be one of {', '.join(allowed)} (got {content_type or 'none'!r})",
                }
            ],
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
        )
    return None


def ingest_items(items: list, conversion_errors: list[FieldError] | None = None) -> Response:
    """Validate raw event dicts and store them all or nothing."""
    now = clock.now()
    events, errors = validate_events(items=items, now=now)
    if conversion_errors is not None:
        errors = merge_errors(conversion=conversion_errors, validation=errors)
    if errors:
        return _field_errors(errors)
    return ingest_events(events, now)


def ingest_events(events: list, now) -> Response:
    """Store validated events all or nothing (received at `now`) and answer."""
    try:
        result = usage_ingest(events=events, received_at=now)
    except IngestRejected as exc:
        return _field_errors(exc.errors)
    except IngestConflict as exc:
        return errors_response(
            [
                {
                    "index": i,
                    "field": "id",
                    "message": "this (source, id) is already stored with a different payload",
                }
                for i in exc.indexes
            ],
            status.HTTP_409_CONFLICT,
        )
    return Response({"accepted": result.accepted, "duplicates": result.duplicates})


class IngestView(APIView):
    write_scope = Scope.INGEST
    permission_classes = [IngestPermission]
    throttle_scope = "ingest"

    def _decoded(self, request):
        body = _body(request)
        if isinstance(body, Response):
            return body
        try:
            return decode_batch(body=body, content_encoding=request.headers.get("Content-Encoding"))
        except PayloadTooLarge as exc:
            return errors_response([{"field": "", "message": exc.message}], 413)
        except BatchError as exc:
            return errors_response([{"field": "", "message": exc.message}], 400)


class UsageEventsView(IngestView):
    """Native JSON batches of usage events (≤ 10,000; gzip accepted)."""

    @extend_schema(
        request={"application/json": UsageEventDoc(many=True)},
        responses={
            200: IngestResultSerializer,
            409: ErrorsSerializer,
            415: ErrorsSerializer,
            **ERROR_RESPONSES,
        },
    )
    def post(self, request):
        refused = _content_type_error(request, ("application/json",))
        if refused:
            return refused
        body = _body(request)
        if isinstance(body, Response):
            return body
        try:
            data = decompress_body(
                body=body, content_encoding=request.headers.get("Content-Encoding")
            )
        except PayloadTooLarge as exc:
            return errors_response([{"field": "", "message": exc.message}], 413)
        except BatchError as exc:
            return errors_response([{"field": "", "message": exc.message}], 400)
        # A batch of valid events is decoded and validated in one pass (no dict per event);
        # any other batch takes the general path, which reports every error.
        now = clock.now()
        events = validate_json_batch(data=data, now=now, max_events=MAX_EVENTS)
        if events is not None:
            return ingest_events(events, now)
        try:
            items = decode_batch(body=data, content_encoding=None)
        except PayloadTooLarge as exc:
            return errors_response([{"field": "", "message": exc.message}], 413)
        except BatchError as exc:
            return errors_response([{"field": "", "message": exc.message}], 400)
        return ingest_items(items)


class CloudEventsView(IngestView):
    """CloudEvents 1.0 batches: dedup on (source, id); tenant from data.tenant, else subject."""

    @extend_schema(
        request={"application/cloudevents-batch+json": OpenApiTypes.OBJECT},
        responses={200: IngestResultSerializer, 409: ErrorsSerializer, **ERROR_RESPONSES},
    )
    def post(self, request):
        refused = _content_type_error(
            request, ("application/cloudevents-batch+json", "application/json")
        )
        if refused:
            return refused
        items = self._decoded(request)
        if isinstance(items, Response):
            return items
        converted, errors = cloudevents_to_items(items=items)
        return ingest_items(converted, errors)


class OpenAIBatchView(IngestView):
    """OpenAI Batch output JSONL (also vLLM run-batch), for one tenant (`?tenant=`)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("tenant", str, required=True),
            OpenApiParameter("pool", str, required=False),
        ],
        request={"application/jsonl": OpenApiTypes.STR},
        responses={200: IngestResultSerializer, 409: ErrorsSerializer, **ERROR_RESPONSES},
    )
    def post(self, request):
        tenant = request.query_params.get("tenant")
        if not tenant:
            return errors_response(
                [{"field": "tenant", "message": "query parameter is required"}], 400
            )
        body = _body(request)
        if isinstance(body, Response):
            return body
        try:
            text = decompress_body(
                body=body, content_encoding=request.headers.get("Content-Encoding")
            )
        except PayloadTooLarge as exc:
            return errors_response([{"field": "", "message": exc.message}], 413)
        except BatchError as exc:
            return errors_response([{"field": "", "message": exc.message}], 400)
        try:
            converted, errors = openai_batch_to_items(
                body=text, tenant=tenant, pool=request.query_params.get("pool") or None
            )
        except PayloadTooLarge as exc:
            return errors_response([{"field": "", "message": exc.message}], 413)
        return ingest_items(converted, errors)


class CapacityView(APIView):
    """Capacity samples of pools (installed ≥ healthy ≥ busy GPUs); all or nothing."""

    write_scope = Scope.INGEST
    permission_classes = [IngestPermission]

    @extend_schema(
        request=CapacitySampleSerializer(many=True),
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
        for index, item in enumerate(request.data):
            serializer = CapacitySampleSerializer(data=item)
            if serializer.is_valid():
                samples.append(
                    CapacityIn(**{"interval_s": None, "power_w": None, **serializer.validated_data})
                )
            else:
                errors += [{"index": index, **e} for e in flatten(serializer.errors)]
        if errors:
            return errors_response(errors, 400)
        created, replaced = capacity_upsert(samples=samples)
        return Response({"created": created, "replaced": replaced})
