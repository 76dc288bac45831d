"""OTLP/HTTP metric exports: the GenAI token-usage metrics of gateways and SDKs (data-formats.md
section 6b, "Metrics"). They feed reconciliation, never billing (billing counts events only).

Pure Python, no Django. Decoding uses `opentelemetry-proto`. Read: the
`gen_ai.client.token.usage` histograms (their sum is the tokens) and the newer
`gen_ai.client.inference.usage.*` counters, per model and `gen_ai.token.type`, and the server
latency histograms (`gen_ai.server.time_to_first_token`, `.time_per_output_token`), cumulative
or delta. A cumulative series is diffed against its previous value (per source): a lower value
(or a new start time) is a reset, and counts the new value as the increase; a series seen
for the first time is a baseline (data-formats.md section 0, as for Prometheus counters).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, Final, NamedTuple

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, Metric

from metering.domain.telemetry.histogram_json import histogram_from_json, histogram_to_json
from metering.domain.telemetry.histograms import Histogram, histogram_delta
from metering.domain.usage.otlp import (
    MODEL_ATTRIBUTES,
    SOURCE_PREFIX,
    UNKNOWN_SERVICE,
    attributes_of,
    export_decode,
    export_encode,
)

# Metric and attribute names (not secrets).
TOKEN_HISTOGRAM: Final = "gen_ai.client.token.usage"  # noqa: S105
TOKEN_COUNTERS: Final = "gen_ai.client.inference.usage."  # noqa: S105
TOKEN_TYPE: Final = "gen_ai.token.type"  # noqa: S105
# gen_ai.token.type values (and the legacy ones) -> the direction counted
TOKEN_TYPES: Final = {
    "input": "input",
    "output": "output",
    "prompt": "input",
    "completion": "output",
}


# Server latency histograms (seconds) -> the engine figure they stand for.
LATENCY_HISTOGRAMS: Final = {
    "gen_ai.server.time_to_first_token": "ttft",
    "gen_ai.server.time_per_output_token": "tpot",
}


class LatencyPoint(NamedTuple):
    """One data point of a server latency histogram of one model (seconds)."""

    source: str
    series: str
    model: str
    pool: str | None
    name: str  # "ttft" | "tpot"
    start_ns: int
    time_ns: int
    histogram: Histogram
    is_cumulative: bool


class TokenPoint(NamedTuple):
    """One data point of a token-usage metric: tokens in one direction of one model."""

    source: str  # "otlp:" + service.name
    series: str  # the point's identity within its source (metric, attributes)
    model: str
    pool: str | None
    direction: str  # "input" | "output"
    start_ns: int
    time_ns: int
    value: float
    is_cumulative: bool


def metrics_decode(*, body: bytes, content_type: str) -> ExportMetricsServiceRequest:
    """An ExportMetricsServiceRequest from an OTLP/HTTP body, protobuf or JSON; BatchError
    when it cannot be decoded."""
    return export_decode(ExportMetricsServiceRequest(), body=body, content_type=content_type)


def metrics_response(*, content_type: str) -> bytes:
    return export_encode(ExportMetricsServiceResponse(), content_type=content_type)


def token_points(*, request: ExportMetricsServiceRequest, pool_attribute: str) -> list[TokenPoint]:
    """The token-usage points of an export; other metrics and points without a model or a
    known token type are left out."""
    points = []
    for resource, metric in _metrics(request):
        source = _source(resource)
        for attributes, start, time, value, cumulative in _points(metric):
            merged = {**resource, **attributes}
            model = _model(merged)
            direction = _direction(metric.name, merged.get(TOKEN_TYPE))
            if model is None or direction is None:
                continue
            pool = merged.get(pool_attribute)
            series = _series(metric.name, attributes)
            points.append(
                TokenPoint(
                    source, series, model, pool if type(pool) is str else None, direction,
                    start, time, value, cumulative,
                )
            )  # fmt: skip
    return points


def latency_points(
    *, request: ExportMetricsServiceRequest, pool_attribute: str
) -> list[LatencyPoint]:
    """The server TTFT and TPOT histogram points of an export, per model."""
    points = []
    for resource_metrics in request.resource_metrics:
        resource = attributes_of(resource_metrics.resource.attributes)
        source = _source(resource)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                name = LATENCY_HISTOGRAMS.get(metric.name)
                if name is None or metric.WhichOneof("data") != "histogram":
                    continue
                cumulative = metric.histogram.aggregation_temporality == _CUMULATIVE
                for point in metric.histogram.data_points:
                    attributes = attributes_of(point.attributes)
                    merged = {**resource, **attributes}
                    model = _model(merged)
                    bounds, counts = list(point.explicit_bounds), list(point.bucket_counts)
                    if model is None or len(counts) != len(bounds) + 1:
                        continue
                    pool = merged.get(pool_attribute)
                    points.append(
                        LatencyPoint(
                            source, _series(metric.name, attributes), model,
                            pool if type(pool) is str else None, name,
                            point.start_time_unix_nano, point.time_unix_nano,
                            _histogram(bounds, counts, point.sum), cumulative,
                        )
                    )  # fmt: skip
    return points


def _histogram(bounds: list[float], counts: list[int], total: float) -> Histogram:
    """An OTLP explicit-bucket histogram (per-bucket counts, the last above every bound) as
    the cumulative buckets the engine histograms keep."""
    running, buckets = 0.0, []
    for edge, count in zip([*bounds, math.inf], counts, strict=True):
        running += count
        buckets.append((float(edge), running))
    return Histogram(buckets=tuple(buckets), sum=total, count=running)


def latency_increase(
    point: LatencyPoint, previous: Mapping[str, Any] | None
) -> tuple[Histogram, dict[str, Any] | None]:
    """As point_increase, for a histogram: histogram_delta over the previous value of the
    same start time (a baseline first, a reset counting the new value)."""
    if not point.is_cumulative:
        return point.histogram, None
    state = {"start": point.start_ns, "histogram": histogram_to_json(point.histogram)}
    before = None
    if previous is not None and previous.get("start") == point.start_ns:
        before = histogram_from_json(previous.get("histogram"))
    elif previous is not None:  # another start: the series restarted
        return point.histogram, state
    return histogram_delta(previous=before, current=point.histogram), state


def _source(resource: Mapping[str, Any]) -> str:
    service = resource.get("service.name")
    return SOURCE_PREFIX + (service if type(service) is str and service else UNKNOWN_SERVICE)


def _model(attributes: Mapping[str, Any]) -> str | None:
    return next((attributes[n] for n in MODEL_ATTRIBUTES if type(attributes.get(n)) is str), None)


def _series(name: str, attributes: Mapping[str, Any]) -> str:
    return name + "|" + "|".join(f"{k}={v}" for k, v in sorted(attributes.items()))


_CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


def _metrics(request: ExportMetricsServiceRequest) -> Iterator[tuple[dict[str, Any], Metric]]:
    for resource_metrics in request.resource_metrics:
        resource = attributes_of(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == TOKEN_HISTOGRAM or metric.name.startswith(TOKEN_COUNTERS):
                    yield resource, metric


def _points(metric: Metric) -> Iterator[tuple[dict[str, Any], int, int, float, bool]]:
    kind = metric.WhichOneof("data")
    if kind == "histogram":
        is_cumulative = metric.histogram.aggregation_temporality == _CUMULATIVE
        for point in metric.histogram.data_points:
            yield (attributes_of(point.attributes), point.start_time_unix_nano,
                   point.time_unix_nano, point.sum, is_cumulative)  # fmt: skip
    elif kind == "sum":
        is_cumulative = metric.sum.aggregation_temporality == _CUMULATIVE
        for point in metric.sum.data_points:
            value = point.as_int if point.WhichOneof("value") == "as_int" else point.as_double
            yield (attributes_of(point.attributes), point.start_time_unix_nano,
                   point.time_unix_nano, value, is_cumulative)  # fmt: skip


def _direction(name: str, token_type: Any) -> str | None:
    if type(token_type) is str and token_type in TOKEN_TYPES:
        return TOKEN_TYPES[token_type]
    if name.startswith(TOKEN_COUNTERS):  # e.g. ...usage.input_tokens
        tail = name.removeprefix(TOKEN_COUNTERS)
        return next((d for t, d in TOKEN_TYPES.items() if tail.startswith(t)), None)
    return None


def point_increase(
    point: TokenPoint, previous: Mapping[str, Any] | None
) -> tuple[float, dict[str, Any] | None]:
    """The tokens a point adds, and the state its series keeps (None: a delta series keeps
    none). Cumulative: the increase over the previous value of the same start time; a lower
    value or another start time is a reset (the new value is the increase); the first
    point of a series is a baseline (0)."""
    if not point.is_cumulative:
        return max(point.value, 0.0), None
    state = {"start": point.start_ns, "value": point.value}
    if previous is None:
        return 0.0, state
    if previous["start"] != point.start_ns or point.value < previous["value"]:
        return point.value, state
    return point.value - previous["value"], state
