"""Prometheus histograms as strict JSON, the form EngineHourly and the scrape state keep."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from metering.domain.telemetry.histograms import Histogram, histogram_sum


def _le(edge: float) -> str:
    return "+Inf" if edge == math.inf else repr(float(edge))


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def histogram_to_json(histogram: Histogram) -> dict[str, Any]:
    """`{"le": ["0.1", ..., "+Inf"], "cumulative": [...], "sum", "count"}`: strict JSON
    (no Infinity, which PostgreSQL's jsonb refuses), edges as Prometheus writes `le`."""
    return {
        "le": [_le(edge) for edge in histogram.edges],
        "cumulative": [_number(count) for _, count in histogram.buckets],
        "sum": histogram.sum,
        "count": _number(histogram.count),
    }


def histogram_from_json(data: Mapping[str, Any] | None) -> Histogram | None:
    """The inverse of histogram_to_json; None for `{}` or None."""
    if not data:
        return None
    return Histogram(
        buckets=tuple(
            (float(edge), float(count))
            for edge, count in zip(data["le"], data["cumulative"], strict=True)
        ),
        sum=float(data["sum"]),
        count=float(data["count"]),
    )


def histogram_merge(*, stored: Mapping[str, Any], increase: Histogram | None) -> dict[str, Any]:
    """A stored hour's histogram (JSON) with an increase added: the increase alone over an
    empty hour; an empty increase never coarsens the stored edges."""
    before = histogram_from_json(stored)
    if increase is None:
        return dict(stored)
    if before is None or before.count <= 0:
        return histogram_to_json(increase)
    if increase.count <= 0 and increase.edges != before.edges:
        return dict(stored)
    return histogram_to_json(histogram_sum(histograms=[before, increase]))
