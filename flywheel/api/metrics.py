"""The counters of /metrics (flywheel.domain.counters) in Prometheus's text format, read
from the database at each scrape: one query for every series, written out without a
client library's per-sample work (1,000 tenants are 3,000 series)."""

from __future__ import annotations

from django.conf import settings

from flywheel.domain.counters import exposition
from flywheel.selectors.counters import counted_until, counter_values


def counters_exposition() -> bytes:
    """Every counter (per tenant only while METRICS_TENANT_LABELS is on) and the instant
    they count up to."""
    until = counted_until()
    return exposition(
        counter_values(),
        per_tenant=settings.METRICS_TENANT_LABELS,
        counted_until=until.timestamp() if until is not None else None,
    ).encode()
