"""OTLP/HTTP trace exports to a running portal (data-formats.md 6b): the OpenTelemetry SDK's
own exporter (protobuf) and the same spans as OTLP/JSON, each sent twice (an exporter
retry); OTLP's partial rule; tokens bound to a tenant."""

import base64
import gzip
import json
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from google.protobuf import json_format
from google.rpc.status_pb2 import Status as RpcStatus
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from rest_framework.test import APIClient

from metering.models import CapacitySample, IngestRejection, UsageEvent
from metering.services.usage.rollup import usage_fold
from portal.services import token_create
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.django_db(transaction=True)

TRACES = "/api/v1/otlp/v1/traces"


def _ns(moment) -> int:
    return int(moment.timestamp()) * 1_000_000_000


def _spans(now, *, service="gateway-a", tenant_on="span", spans=None):
    """Finished SDK spans: chat calls of two tenants with the current and the legacy names,
    a failed call, and a span without GenAI usage (ignored)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("gateway")
    end = now - timedelta(minutes=30)
    for i, (attributes, failed) in enumerate(spans if spans is not None else CALLS):
        attributes = dict(attributes)
        if tenant_on != "span":
            attributes.pop("tenant.id", None)
        span = tracer.start_span("chat", start_time=_ns(end) - 2_000_000_000 + i)
        span.set_attributes(attributes)
        if failed:
            span.set_status(Status(StatusCode.ERROR, "upstream 503"))
        span.end(end_time=_ns(end) + i)
    provider.shutdown()
    return memory.get_finished_spans()


CHAT = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "llama-70b"}
CALLS = [
    # current names: cached and cache-write inside input, reasoning inside output
    ({**CHAT, "tenant.id": "tenant-a", "gen_ai.response.model": "llama-70b",
      "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.cache_read.input_tokens": 500,
      "gen_ai.usage.cache_creation.input_tokens": 300, "gen_ai.usage.output_tokens": 200,
      "gen_ai.usage.reasoning.output_tokens": 120,
      "gen_ai.server.time_to_first_token": 0.25}, False),
    # legacy names (vLLM, older instrumentations), another tenant
    ({**CHAT, "tenant.id": "tenant-b", "gen_ai.usage.prompt_tokens": 400,
      "gen_ai.usage.completion_tokens": 50, "gen_ai.usage.cached_tokens": 100}, False),
    # a failed call without usage: an error event with zero tokens
    ({**CHAT, "tenant.id": "tenant-a"}, True),
    # not a GenAI call: ignored
    ({"http.request.method": "GET", "tenant.id": "tenant-a"}, False),
]  # fmt: skip


def _json_body(spans) -> bytes:
    """The spans as OTLP/JSON: protobuf's JSON mapping with hex trace and span ids."""
    message = json_format.MessageToDict(encode_spans(spans))
    for resource in message["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(message).encode()


def _post(url, token, body, content_type, *, gzipped=False):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
    if gzipped:
        body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
    request = urllib.request.Request(url + TRACES, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _usage(token_client, users):
    usage_fold()
    api = token_client(users["operator"], scopes=["read"])
    rows = api.get("/api/v1/usage?from=2026-12-16&to=2026-12-17&page_size=100").json()
    names = ("requests", "errors", "input_tokens", "cached_tokens", "cache_write_tokens",
             "output_tokens", "reasoning_tokens")  # fmt: skip
    return {row["tenant"]: tuple(row[name] for name in names) for row in rows["results"]}


@pytest.fixture
def portal(live_server, users, tenant_a, tenant_b, now):
    make_deployment()
    _, token = token_create(user=users["operator"], name="gateway", scopes=["ingest"])
    return live_server.url, token


def test_the_sdk_exporter_and_otlp_json_meter_each_span_once(portal, now, token_client, users):
    url, token = portal
    spans = _spans(now)
    exporter = OTLPSpanExporter(endpoint=url + TRACES, headers={"Authorization": f"Bearer {token}"})
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert exporter.export(spans) == SpanExportResult.SUCCESS  # a retry: duplicates
    for gzipped in (False, True):  # the same spans as JSON: the same events
        status, body = _post(url, token, _json_body(spans), "application/json", gzipped=gzipped)
        assert status == 200, body
        answer = json.loads(body)
        assert answer["partialSuccess"]["errorMessage"] == "1 span without GenAI usage ignored"
        assert "rejectedSpans" not in answer["partialSuccess"]

    assert UsageEvent.objects.count() == 3
    assert _usage(token_client, users) == {
        # requests, errors, input, cached, cache-write, output, reasoning
        "tenant-a": (2, 1, 1000, 500, 300, 200, 120),
        "tenant-b": (1, 0, 400, 100, 0, 50, 0),
    }
    event = UsageEvent.objects.get(input_tokens=1000)
    assert (event.ttft_ms, event.latency_ms) == (250.0, 2000.0)
    assert event.tpot_ms == pytest.approx((2000 - 250) / 199)


def test_an_invalid_span_is_reported_and_its_neighbours_are_stored(portal, now):
    url, token = portal
    calls = [
        CALLS[0],
        ({**CHAT, "tenant.id": "tenant-a", "gen_ai.usage.input_tokens": 10,
          "gen_ai.usage.output_tokens": 20, "gen_ai.usage.reasoning.output_tokens": 21}, False),
        ({**CHAT, "tenant.id": "ghost", "gen_ai.usage.input_tokens": 1}, False),
        CALLS[1],
    ]  # fmt: skip
    status, body = _post(url, token, encode_spans(_spans(now, spans=calls)).SerializeToString(),
                         "application/x-protobuf")  # fmt: skip

    assert status == 200
    answer = ExportTraceServiceResponse.FromString(body)
    assert answer.partial_success.rejected_spans == 2
    assert answer.partial_success.error_message == (
        "span 1: reasoning_tokens must not exceed output_tokens (20); "
        "span 2: tenant unknown tenant 'ghost'"
    )
    assert sorted(UsageEvent.objects.values_list("input_tokens", flat=True)) == [400, 1000]
    [kept] = IngestRejection.objects.all()  # for the ingestion debugger
    assert (kept.status, kept.source, kept.received, kept.rejected) == (
        200, "otlp:gateway-a", 4, 2,
    )  # fmt: skip
    assert [error["index"] for error in kept.errors] == [1, 2]


def test_a_bound_token_meters_spans_without_a_tenant_to_its_tenant(
    portal, now, users, tenant_a, token_client
):
    url, unbound = portal
    _, bound = token_create(
        user=users["operator"], name="acme gateway", scopes=["ingest"], bound_tenant=tenant_a
    )
    spans = _spans(now, tenant_on="none", spans=CALLS[:2])

    status, body = _post(url, unbound, encode_spans(spans).SerializeToString(),
                         "application/x-protobuf")  # fmt: skip
    answer = ExportTraceServiceResponse.FromString(body)
    assert status == 200
    assert answer.partial_success.rejected_spans == 2
    assert "span 0: tenant is required: set the span or resource attribute tenant.id" in (
        answer.partial_success.error_message
    )
    assert not UsageEvent.objects.exists()

    status, body = _post(url, bound, encode_spans(spans).SerializeToString(),
                         "application/x-protobuf")  # fmt: skip
    assert status == 200
    assert ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans == 0
    assert set(_usage(token_client, users)) == {"tenant-a"}

    # A bound token never meters another tenant: a span naming one is rejected.
    other = _spans(now, spans=[CALLS[1]], service="gateway-b")
    status, body = _post(url, bound, encode_spans(other).SerializeToString(),
                         "application/x-protobuf")  # fmt: skip
    message = ExportTraceServiceResponse.FromString(body).partial_success.error_message
    assert message == (
        "span 0: tenant this token is bound to tenant 'tenant-a': it meters that tenant only"
    )


def test_an_undecodable_or_oversized_export_is_refused_whole_with_a_status(portal):
    """OTLP/HTTP: a refusal's body is a google.rpc.Status in the request's encoding."""
    url, token = portal
    status, body = _post(url, token, b"\xff\x00not protobuf", "application/x-protobuf")
    assert status == 400
    refusal = RpcStatus.FromString(body)
    assert refusal.code == 3  # INVALID_ARGUMENT
    assert "is not an OTLP protobuf ExportTraceServiceRequest" in refusal.message
    status, body = _post(url, token, b"[1, 2", "application/json")
    assert status == 400
    refusal = json.loads(body)
    assert refusal == {"code": 3, "message": "is not valid JSON: Input data was truncated"}
    status, body = _post(url, "tfp_wrong", b"", "application/x-protobuf")
    assert (status, RpcStatus.FromString(body).code) == (401, 16)  # UNAUTHENTICATED
    status, body = _post(url, "tfp_wrong", b"{}", "application/json")
    assert (status, json.loads(body)["code"]) == (401, 16)
    status, body = _post(url, token, b"\0" * (33 * 1024 * 1024), "application/x-protobuf",
                         gzipped=True)  # fmt: skip
    assert (status, RpcStatus.FromString(body).code) == (413, 3)
    assert not UsageEvent.objects.exists()


def test_a_token_bound_to_a_tenant_cannot_push_pool_telemetry_or_capacity(
    portal, users, tenant_a, now
):
    url, _ = portal
    _, bound = token_create(
        user=users["operator"], name="acme gateway", scopes=["ingest"], bound_tenant=tenant_a
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bound}")
    message = (
        "This token is bound to a tenant: it sends that tenant's usage only, not pools' "
        "telemetry or capacity."
    )
    sample = [{"pool": "h100-a", "time": "2026-12-16T09:00:00Z", "gpus_installed": 8,
               "gpus_healthy": 8, "gpus_busy": 4}]  # fmt: skip
    capacity = client.post("/api/v1/capacity", sample, format="json")
    assert (capacity.status_code, capacity.json()["errors"][0]["message"]) == (403, message)
    push = client.post(
        "/api/v1/telemetry/prometheus?kind=vllm&pool=h100-a",
        "vllm:num_requests_running 1\n",
        content_type="text/plain",
    )
    assert (push.status_code, push.json()["errors"][0]["message"]) == (403, message)
    request = urllib.request.Request(
        url + METRICS, data=b"", method="POST",
        headers={"Authorization": f"Bearer {bound}", "Content-Type": "application/x-protobuf"},
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
    assert RpcStatus.FromString(refused.value.read()).message == message
    assert not CapacitySample.objects.exists()


# --- OTLP metrics: their own telemetry kind, beside the scraped counters ----------------

METRICS = "/api/v1/otlp/v1/metrics"


def _meter(temporality):
    """An SDK meter provider whose reader collects `gen_ai.client.token.usage` with the
    given temporality, as a gateway's SDK exports it."""
    from opentelemetry.sdk.metrics import Histogram, MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader(preferred_temporality={Histogram: temporality})
    provider = MeterProvider(
        metric_readers=[reader], resource=Resource({"service.name": "gateway-a"})
    )
    usage = provider.get_meter("gateway").create_histogram("gen_ai.client.token.usage", "{token}")
    return reader, usage


def _export(url, token, reader) -> int:
    from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics

    body = encode_metrics(reader.get_metrics_data()).SerializeToString()
    request = urllib.request.Request(
        url + METRICS, data=body, method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


@pytest.mark.parametrize("temporality", ["cumulative", "delta"])
def test_an_otlp_metrics_export_reconciles_beside_usage_and_bills_nothing(portal, temporality):
    from opentelemetry.sdk.metrics.export import AggregationTemporality

    from metering.models import HourlyUsage, OtlpHourly
    from metering.selectors.telemetry import reconciliation_list

    url, token = portal
    kind = getattr(AggregationTemporality, temporality.upper())
    reader, usage = _meter(kind)
    model = {"gen_ai.request.model": "llama-70b"}
    usage.record(1000, {**model, "gen_ai.token.type": "input"})
    usage.record(200, {**model, "gen_ai.token.type": "output"})
    assert _export(url, token, reader) == 200
    usage.record(300, {**model, "gen_ai.token.type": "output"})
    assert _export(url, token, reader) == 200

    # Cumulative: the first export is a baseline, the second adds the increase (300);
    # delta: each export is an increase (200, then 300).
    expected = {"cumulative": (0, 300), "delta": (1000, 500)}[temporality]
    [row] = OtlpHourly.objects.all()
    assert (row.source, row.input_tokens, row.output_tokens) == ("otlp:gateway-a", *expected)
    [hour] = reconciliation_list(start=row.hour, end=row.hour + timedelta(hours=1))
    assert (hour.engine_from, hour.otlp_output_tokens, hour.metered_output_tokens) == (
        "otlp", expected[1], 0,
    )  # fmt: skip
    assert not UsageEvent.objects.exists() and not HourlyUsage.objects.exists()  # no billing


def test_a_cumulative_series_that_drops_is_a_reset_counting_its_new_value():
    from metering.domain.telemetry.otlp_metrics import TokenPoint, point_increase

    def point(value, start=1, cumulative=True):
        return TokenPoint("otlp:g", "s", "m", None, "output", start, 10, value, cumulative)

    assert point_increase(point(500), None) == (0.0, {"start": 1, "value": 500})  # baseline
    assert point_increase(point(800), {"start": 1, "value": 500})[0] == 300
    assert point_increase(point(120), {"start": 1, "value": 800})[0] == 120  # lower: a reset
    assert point_increase(point(900, start=2), {"start": 1, "value": 800})[0] == 900  # restart
    assert point_increase(point(70, cumulative=False), {"start": 1, "value": 800}) == (70, None)


def test_server_latency_histograms_exported_over_otlp_feed_the_latency_read(portal):
    """gen_ai.server.time_to_first_token, cumulative: the first export is a baseline, the
    second adds its requests; the latency read takes them where nothing was scraped."""
    from opentelemetry.sdk.metrics import Histogram, MeterProvider
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

    from metering.models import Deployment, OtlpHourly
    from metering.selectors.telemetry import engine_latency_list

    url, token = portal
    reader = InMemoryMetricReader(
        preferred_temporality={Histogram: AggregationTemporality.CUMULATIVE}
    )
    buckets = ExplicitBucketHistogramAggregation(boundaries=[0.1, 0.25, 0.5, 1.0])
    provider = MeterProvider(
        metric_readers=[reader],
        resource=Resource({"service.name": "gateway-a"}),
        views=[View(instrument_name="gen_ai.server.*", aggregation=buckets)],
    )
    ttft = provider.get_meter("gateway").create_histogram("gen_ai.server.time_to_first_token", "s")
    model = {"gen_ai.request.model": "llama-70b"}
    ttft.record(0.2, model)
    assert _export(url, token, reader) == 200  # a baseline
    for seconds in (0.05, 0.2, 0.2, 0.4):
        ttft.record(seconds, model)
    assert _export(url, token, reader) == 200

    [row] = OtlpHourly.objects.all()
    assert row.ttft_histogram["cumulative"] == [1, 3, 4, 4, 4]  # ≤0.1, ≤0.25, ≤0.5, ≤1, +Inf
    assert row.ttft_histogram["count"] == 4
    [hour] = engine_latency_list(
        deployment=Deployment.objects.get(), start=row.hour, end=row.hour + timedelta(hours=1)
    )
    assert hour.requests == 4
    assert hour.ttft_quantiles[0.5] == pytest.approx(0.175)  # inside (0.1, 0.25]: 1 + 2 × 0.5
