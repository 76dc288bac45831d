"""OTLP/HTTP ingestion: an OpenTelemetry SDK or collector exports to `<portal>/api/v1/otlp`
(architecture.md "Ingestion"). OTLP's rule holds here, unlike the native all-or-nothing
batches: a request that cannot be decoded, is not authorized or is too large is refused
whole; otherwise every valid span is stored and every invalid one is counted in
`partial_success`, its message naming the span's index and field."""

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema

from metering.api.usage import ERROR_RESPONSES, IngestView
from metering.domain.telemetry.otlp_metrics import (
    latency_points,
    metrics_decode,
    metrics_response,
    token_points,
)
from metering.domain.usage.body import decompress_body
from metering.domain.usage.fields import EventError
from metering.domain.usage.otlp import (
    JSON,
    PROTOBUF,
    spans_to_items,
    status_encode,
    traces_decode,
    traces_response,
)
from metering.services.telemetry.otlp import otlp_metrics_ingest
from metering.services.usage.ingest import Batch, batch_ingest, refusals_recorded
from portal import clock
from portal.api.errors import content_type_check
from portal.permissions import UnboundToken

MESSAGES_SHOWN = 10  # errors spelled out in partial_success.error_message

# Either endpoint's exchange: an export in protobuf or JSON, answered in its media type,
# a refusal too (a google.rpc.Status).
otlp_schema = extend_schema(
    request={PROTOBUF: OpenApiTypes.BINARY, JSON: OpenApiTypes.OBJECT},
    responses={
        (code, media): OpenApiTypes.BINARY if media == PROTOBUF else OpenApiTypes.OBJECT
        for code in (200, *ERROR_RESPONSES)
        for media in (PROTOBUF, JSON)
    },
)


class OtlpView(IngestView):
    """An OTLP/HTTP endpoint: its refusals (400, 401, 403, 413, 415, 429…) are answered as
    the OTLP/HTTP specification says, a google.rpc.Status in the request's encoding, with
    the same status code and headers as every API refusal."""

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        errors = getattr(response, "data", None)
        if response.status_code < 400 or not isinstance(errors, dict) or "errors" not in errors:
            return response
        content_type = request.content_type.split(";")[0].strip().lower()
        answer = HttpResponse(
            status_encode(
                http_status=response.status_code,
                errors=errors["errors"],
                content_type=content_type,
            ),
            status=response.status_code,
            content_type=PROTOBUF if content_type == PROTOBUF else JSON,
        )
        for header in ("Retry-After", "WWW-Authenticate"):
            if header in response:
                answer[header] = response[header]
        return answer


class OtlpTracesView(OtlpView):
    """GenAI spans as usage events (data-formats.md 6b), protobuf or JSON, gzip accepted."""

    @otlp_schema
    def post(self, request):
        sender = self.sender()
        with refusals_recorded(sender):
            content_type, body = _body(request)
            spans = spans_to_items(
                request=traces_decode(body=body, content_type=content_type),
                tenant_attribute=settings.OTLP_TENANT_ATTRIBUTE,
                pool_attribute=settings.OTLP_POOL_ATTRIBUTE,
                bound_tenant=sender.bound_tenant,
                project_attribute=settings.OTLP_PROJECT_ATTRIBUTE,
            )
        batch = Batch(items=spans.items, errors=spans.errors, sources=spans.sources)
        result = batch_ingest(sender=sender, batch=batch, partial=True)
        return HttpResponse(
            traces_response(
                rejected=len({error.index for error in result.rejected}),
                message=_message(list(result.rejected), spans.ignored),
                content_type=content_type,
            ),
            content_type=content_type,
        )


def _body(request) -> tuple[str, bytes]:
    """The export's media type (protobuf or JSON) and its decompressed bytes."""
    content_type_check(request=request, allowed=(PROTOBUF, JSON))
    content_type = request.content_type.split(";")[0].strip().lower()
    encoding = request.headers.get("Content-Encoding")
    return content_type, decompress_body(body=request.body, content_encoding=encoding)


def _message(rejected: list[EventError], ignored: int) -> str:
    """partial_success.error_message: the first errors, each naming its span and field, and
    how many spans carried no GenAI usage (ignored, not errors)."""
    parts = [f"span {e.index}: {e.field} {e.message}" for e in rejected[:MESSAGES_SHOWN]]
    if len(rejected) > MESSAGES_SHOWN:
        parts.append(f"and {len(rejected) - MESSAGES_SHOWN} more errors")
    if ignored:
        parts.append(f"{ignored} span{'s' if ignored != 1 else ''} without GenAI usage ignored")
    return "; ".join(parts)


class OtlpMetricsView(OtlpView):
    """GenAI token-usage metrics (data-formats.md 6b, "Metrics"): their own telemetry kind
    per source, for reconciliation; billing never reads them. Pool telemetry: a token bound
    to a tenant may not send it."""

    permission_classes = [*OtlpView.permission_classes, UnboundToken]

    @otlp_schema
    def post(self, request):
        with refusals_recorded(self.sender()):
            content_type, body = _body(request)
            export = metrics_decode(body=body, content_type=content_type)
        pool_attribute = settings.OTLP_POOL_ATTRIBUTE
        otlp_metrics_ingest(
            points=token_points(request=export, pool_attribute=pool_attribute),
            latencies=latency_points(request=export, pool_attribute=pool_attribute),
            now=clock.now(),
        )
        return HttpResponse(metrics_response(content_type=content_type), content_type=content_type)
