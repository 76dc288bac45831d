"""The counters of /metrics (flywheel.domain.counters) as Prometheus metric families, and
their names (what the Grafana dashboards may query besides the KPI gauges: manage.py
grafana_dashboards --check)."""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from flywheel.domain.counters import COUNTERS
from flywheel.selectors.counters import counted_until, counter_values

COUNTED_UNTIL = "tokenfactory_counted_until_timestamp_seconds"


class CounterCollector:
    """Every counter (per tenant only while METRICS_TENANT_LABELS is on), read from the
    database at each scrape, and the instant they count up to."""

    def collect(self) -> Iterator[Metric]:
        values = counter_values()
        for family in COUNTERS:
            if family.is_per_tenant and not settings.METRICS_TENANT_LABELS:
                continue
            metric = CounterMetricFamily(family.name, family.help, labels=family.labels)
            for labels, value in sorted(values.get(family.name, [])):
                metric.add_metric(labels, float(value))
            yield metric
        until = GaugeMetricFamily(
            COUNTED_UNTIL,
            "End of the last whole hour the counters count, as a Unix time (they advance as "
            "hours close and are measured).",
        )
        moment = counted_until()
        if moment is not None:
            until.add_metric([], moment.timestamp())
        yield until


def counter_metric_names() -> set[str]:
    """The metric names of the counters /metrics publishes: every counter's samples and
    the counters' instant (the KPI gauges are RATIO_GAUGES, flywheel.api.kpis)."""
    return {*(family.sample_name for family in COUNTERS), COUNTED_UNTIL}
