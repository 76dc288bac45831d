"""Prometheus telemetry of a token factory: vLLM, SGLang and dcgm-exporter scrapes.

Pure computation (no Django): parse a `/metrics` text per metric family, normalise it,
and compute reset-aware increments, SLO shares and quantiles. The contract is
shared/design/data-formats.md §0-§3 and §8.
"""

from metering.ingest.prometheus.counters import counter_delta, reconciliation_flag
from metering.ingest.prometheus.dcgm import (
    DCGM_DEFAULT_FIELD_TYPES,
    DCGM_DISABLED_FIELD_TYPES,
    DCGM_KNOWN_FIELD_TYPES,
    GpuStats,
    dcgm_field_types,
)
from metering.ingest.prometheus.engines import (
    EngineStats,
    engine_deltas,
    engine_stats_delta,
    engine_stats_sum,
)
from metering.ingest.prometheus.exposition import Family, Sample, parse_families
from metering.ingest.prometheus.histograms import (
    Histogram,
    histogram_delta,
    histogram_sum,
    quantile,
    share_within,
)
from metering.ingest.prometheus.scrape import Scrape, ScrapeKind, parse_scrape

__all__ = [
    "DCGM_DEFAULT_FIELD_TYPES",
    "DCGM_DISABLED_FIELD_TYPES",
    "DCGM_KNOWN_FIELD_TYPES",
    "EngineStats",
    "Family",
    "GpuStats",
    "Histogram",
    "Sample",
    "Scrape",
    "ScrapeKind",
    "counter_delta",
    "dcgm_field_types",
    "engine_deltas",
    "engine_stats_delta",
    "engine_stats_sum",
    "histogram_delta",
    "histogram_sum",
    "parse_families",
    "parse_scrape",
    "quantile",
    "reconciliation_flag",
    "share_within",
]
