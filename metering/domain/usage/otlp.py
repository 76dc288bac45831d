"""OTLP/HTTP trace exports as usage events: GenAI spans (data-formats.md section 6b).

Pure Python, no Django. Decoding uses `opentelemetry-proto` (protobuf, and OTLP/JSON
through protobuf's JSON mapping, trace and span ids being hex there), so a span sent as
JSON and as protobuf is the same span. ``spans_to_items`` turns each span that carries
`gen_ai.usage.*` attributes (or a failed GenAI call) into the raw event dict of
``validation.validate_events``, under the current and the legacy attribute names; its
indexes count every span of the request in order (resource, scope, span), so an error
names the span a client sent.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final, NamedTuple, TypeGuard, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc.status_pb2 import Status as RpcStatus
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from metering.domain.usage.body import MAX_EVENTS, BatchError, PayloadTooLarge, json_parsed
from metering.domain.usage.fields import REQUIRED, EventError

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"

SOURCE_PREFIX: Final = "otlp:"
UNKNOWN_SERVICE: Final = "unknown_service"  # the SDKs' default service.name

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

ExportT = TypeVar("ExportT", bound=Message)

# Event field -> the attributes that carry it, current name first (data-formats.md 6b).
TOKEN_ATTRIBUTES: Final = {
    "input_tokens": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
    "output_tokens": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
    "cached_tokens": ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cached_tokens"),
    "cache_write_tokens": ("gen_ai.usage.cache_creation.input_tokens",),
    "reasoning_tokens": ("gen_ai.usage.reasoning.output_tokens",),
}
MODEL_ATTRIBUTES: Final = ("gen_ai.response.model", "gen_ai.request.model")
TTFT_ATTRIBUTES: Final = ("gen_ai.server.time_to_first_token", "gen_ai.latency.time_to_first_token")
TPOT_ATTRIBUTE: Final = "gen_ai.server.time_per_output_token"
E2E_ATTRIBUTE: Final = "gen_ai.latency.e2e"
OPERATION_ATTRIBUTE: Final = "gen_ai.operation.name"
TIER_ATTRIBUTES: Final = (
    "openai.response.service_tier",
    "gen_ai.openai.response.service_tier",
)
# OpenAI's names of its tiers as the portal names them (data-formats.md 6b); any other
# value is left as it is, for validation to accept (priority, flex, batch) or refuse.
TIER_NAMES: Final = {"default": "standard", "scale": "priority"}
USAGE_PREFIX: Final = "gen_ai.usage."

NO_TENANT = (
    "is required: set the span or resource attribute {attribute}, or send with an ingest "
    "token bound to the tenant"
)


class Spans(NamedTuple):
    """What a trace export holds: per span index the raw event (None: not a usage event,
    or one that could not be converted), the conversion errors, the spans ignored, and the
    sources of its usage spans."""

    items: list[dict[str, Any] | None]
    errors: list[EventError]
    ignored: int
    sources: set[str]


def traces_decode(*, body: bytes, content_type: str) -> ExportTraceServiceRequest:
    """An ExportTraceServiceRequest from an OTLP/HTTP body (already decompressed), protobuf
    or JSON; BatchError when it cannot be decoded, PayloadTooLarge past MAX_EVENTS spans."""
    request = export_decode(
        ExportTraceServiceRequest(), body=body, content_type=content_type, prepare=_ids_as_base64
    )
    count = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
    if count > MAX_EVENTS:
        raise PayloadTooLarge(f"an export holds at most {MAX_EVENTS} spans; this one has {count}")
    return request


def export_decode(
    request: ExportT,
    *,
    body: bytes,
    content_type: str,
    prepare: Callable[[dict], dict] | None = None,
) -> ExportT:
    """`request`, an empty OTLP export message, read from an OTLP/HTTP body (already
    decompressed): protobuf, or OTLP/JSON (a JSON object, `prepare`d for protobuf's JSON
    mapping). BatchError naming the message when the body is not one."""
    message = request.DESCRIPTOR.name
    if content_type == PROTOBUF:
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise BatchError(f"is not an OTLP protobuf {message}: {exc}") from exc
        return request
    decoded = json_object(body, message=message)
    if prepare is not None:
        decoded = prepare(decoded)
    try:
        json_format.ParseDict(decoded, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise BatchError(f"is not an OTLP/JSON {message}: {exc}") from exc
    return request


def export_encode(response: Message, *, content_type: str) -> bytes:
    """An OTLP export response, encoded as its request was (protobuf or OTLP/JSON)."""
    if content_type == PROTOBUF:
        return response.SerializeToString()
    return json_format.MessageToJson(response, indent=None).encode()


# The gRPC code of an OTLP/HTTP refusal (google.rpc.Code), by its HTTP status.
GRPC_CODES: Final = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 413: 3, 415: 3, 429: 8, 503: 14}
GRPC_INTERNAL: Final = 13


def status_encode(*, http_status: int, errors: list[dict], content_type: str) -> bytes:
    """A refused export's answer as OTLP/HTTP says: a google.rpc.Status (its gRPC code, a
    message naming each error's field), encoded as the request was (protobuf, else
    OTLP/JSON)."""
    message = "; ".join(
        f"{error['field']}: {error['message']}" if error.get("field") else str(error["message"])
        for error in errors
    )
    status = RpcStatus(code=GRPC_CODES.get(http_status, GRPC_INTERNAL), message=message)
    return export_encode(status, content_type=PROTOBUF if content_type == PROTOBUF else JSON)


def json_object(body: bytes, *, message: str) -> dict:
    """An OTLP/JSON body decoded (BatchError when it is not a JSON object)."""
    decoded, problem = json_parsed(body)
    if problem:
        raise BatchError(problem)
    if type(decoded) is not dict:
        raise BatchError(f"must be a JSON object (an {message})")
    return decoded


def _ids_as_base64(decoded: dict) -> dict:
    """OTLP/JSON writes trace and span ids in hex; protobuf's JSON mapping reads bytes as
    base64. Ids that are not hex are left as they are (the parse names them)."""
    for resource in _list(decoded.get("resourceSpans")):
        for scope in _list(resource.get("scopeSpans") if type(resource) is dict else None):
            for span in _list(scope.get("spans") if type(scope) is dict else None):
                if type(span) is not dict:
                    continue
                for key in ("traceId", "spanId", "parentSpanId"):
                    value = span.get(key)
                    if type(value) is str:
                        with contextlib.suppress(ValueError):
                            span[key] = base64.b64encode(bytes.fromhex(value)).decode()
    return decoded


def _list(value: Any) -> list:
    return value if type(value) is list else []


def traces_response(*, rejected: int, message: str, content_type: str) -> bytes:
    """The ExportTraceServiceResponse: partial_success when spans were rejected (or, with 0
    rejected, a message saying what was ignored), encoded as the request was."""
    response = ExportTraceServiceResponse()
    if rejected or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    return export_encode(response, content_type=content_type)


def spans_to_items(
    *,
    request: ExportTraceServiceRequest,
    tenant_attribute: str,
    pool_attribute: str,
    bound_tenant: str | None,
    project_attribute: str = "tokenfactory.project",
) -> Spans:
    """Usage events from the spans of a trace export (data-formats.md 6b): id = hex trace
    id + "-" + hex span id, source = "otlp:" + the resource's service.name, time = the
    span's end; tenant = the span attribute `tenant_attribute`, else that resource
    attribute, else `bound_tenant`; pool from `pool_attribute` likewise, and the project
    from `project_attribute` (none: the token's bound project, or the tenant's `(none)`,
    as the ingestion service gives it); model = the
    response's, else the request's; token counts from the current attribute names, else
    the legacy ones (absent: 0); latencies in ms (ttft from its attribute, latency the
    span's duration, tpot from its attribute or (latency − ttft) / (output − 1)); the
    service tier from OpenAI's response attribute (`default` is standard, `scale`
    priority); status ERROR → an `error` event. A span with no usage attribute is a usage event only when it
    is a failed GenAI call; other spans are ignored and counted."""
    items: list[dict[str, Any] | None] = []
    errors: list[EventError] = []
    ignored = 0
    sources: set[str] = set()
    for index, (resource, span) in enumerate(_spans(request)):
        attributes = attributes_of(span.attributes)
        is_error = span.status.code == Status.STATUS_CODE_ERROR
        has_usage = any(key.startswith(USAGE_PREFIX) for key in attributes)
        if not has_usage and not (is_error and OPERATION_ATTRIBUTE in attributes):
            items.append(None)
            ignored += 1
            continue
        item, problems = _span_item(
            span, attributes, resource, is_error, tenant_attribute, pool_attribute, bound_tenant
        )
        project = attributes.get(project_attribute, resource.get(project_attribute))
        if project is not None:
            item["project"] = project
        errors.extend(EventError(index, field, message) for field, message in problems)
        items.append(None if problems else item)
        sources.add(item["source"])
    return Spans(items, errors, ignored, sources)


def _spans(request: ExportTraceServiceRequest) -> Iterator[tuple[dict[str, Any], Span]]:
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield resource, span


def attributes_of(pairs: list[KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("array_value", "kvlist_value", "bytes_value"):
        return kind  # never a valid count, model or slug: validation names the field
    return getattr(value, kind)


def _first(attributes: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in attributes:
            return attributes[name]
    return None


def _span_item(
    span: Span,
    attributes: dict[str, Any],
    resource: dict[str, Any],
    is_error: bool,
    tenant_attribute: str,
    pool_attribute: str,
    bound_tenant: str | None,
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    service = resource.get("service.name")
    item: dict[str, Any] = {
        "source": SOURCE_PREFIX
        + (service if type(service) is str and service else UNKNOWN_SERVICE),
        "id": f"{span.trace_id.hex()}-{span.span_id.hex()}",
        "status": "error" if is_error else "ok",
    }
    if len(span.trace_id) != 16 or len(span.span_id) != 8:
        problems.append(("id", "trace_id must be 16 bytes and span_id 8"))
    if span.end_time_unix_nano:
        item["time"] = _EPOCH + timedelta(microseconds=span.end_time_unix_nano // 1000)
    else:
        problems.append(("time", f"{REQUIRED}: the span's end_time_unix_nano"))
    tenant = attributes.get(tenant_attribute, resource.get(tenant_attribute, bound_tenant))
    if tenant is None:
        problems.append(("tenant", NO_TENANT.format(attribute=tenant_attribute)))
    item["tenant"] = tenant
    pool = attributes.get(pool_attribute, resource.get(pool_attribute))
    if pool is not None:
        item["pool"] = pool
    item["model"] = _first(attributes, MODEL_ATTRIBUTES)
    for field, names in TOKEN_ATTRIBUTES.items():
        count = _first(attributes, names)
        item[field] = 0 if count is None else count
    latency_ms = None
    if span.start_time_unix_nano and span.end_time_unix_nano >= span.start_time_unix_nano:
        latency_ms = (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6
    elif _is_number(e2e := attributes.get(E2E_ATTRIBUTE)):
        latency_ms = e2e * 1000
    ttft = _first(attributes, TTFT_ATTRIBUTES)
    ttft_ms = ttft * 1000 if _is_number(ttft) else ttft
    tpot = attributes.get(TPOT_ATTRIBUTE)
    tpot_ms = tpot * 1000 if _is_number(tpot) else tpot
    output = item["output_tokens"]
    if (
        tpot_ms is None
        and _is_number(ttft_ms)
        and latency_ms is not None
        and type(output) is int
        and output > 1
        and latency_ms >= ttft_ms
    ):
        tpot_ms = (latency_ms - ttft_ms) / (output - 1)
    for field, value in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("latency_ms", latency_ms)):
        if value is not None:
            item[field] = value
    tier = _first(attributes, TIER_ATTRIBUTES)
    if tier is not None:
        item["service_tier"] = TIER_NAMES.get(tier, tier) if type(tier) is str else tier
    return item, problems


def _is_number(value: Any) -> TypeGuard[float]:  # an int or a float
    return type(value) in (int, float)
