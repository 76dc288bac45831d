"""Prometheus telemetry services: store pushes and scrapes of vLLM, SGLang and dcgm-exporter.

An exposition is parsed per metric family (a bad family is skipped and listed, never
fatal), compared with the previous cumulative values kept on its scrape target (or on
the push state of its pool, kind and source), and the reset-aware increases are added
into the UTC hour of the observation: EngineHourly per deployment, GpuHourly per GPU.
The first observation of a series is its baseline and adds nothing (data-formats.md
§0, §8). Engine counters feed reconciliation, latency charts and checks, never the
KPIs (kpis.md §1).

Only hourly aggregates are kept, not the 30 s samples: an increase between two
observations is attributed whole to the hour of the later one.
"""

from metering.telemetry.histograms import histogram_from_json, histogram_to_json
from metering.telemetry.ingest import (
    DEFAULT_PUSH_SOURCE,
    MAX_EXPOSITION_BYTES,
    ExpositionTooLarge,
    TelemetryResult,
    telemetry_ingest,
)
from metering.telemetry.scrape import (
    MAX_ERROR_CHARS,
    Fetch,
    ScrapeOutcome,
    fetch_metrics,
    scrape_all,
    scrape_target,
)

__all__ = [
    "DEFAULT_PUSH_SOURCE",
    "MAX_ERROR_CHARS",
    "MAX_EXPOSITION_BYTES",
    "ExpositionTooLarge",
    "Fetch",
    "ScrapeOutcome",
    "TelemetryResult",
    "fetch_metrics",
    "histogram_from_json",
    "histogram_to_json",
    "scrape_all",
    "scrape_target",
    "telemetry_ingest",
]
