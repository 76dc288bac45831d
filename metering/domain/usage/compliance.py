"""SLO compliance of one request (kpis.md, σ): the one definition. The fold computes it in SQL
on both databases (metering.services.usage.rollup, `_sums_sql`); tests hold the rollups equal
to this."""

from __future__ import annotations

from typing import Protocol

# Tiers served without a latency SLO: a request of one is compliant when it succeeded
# (kpis.md section 3, "Service tiers").
LATENCY_FREE_TIERS = ("flex", "batch")
PRIORITY = "priority"


class SloThresholds(Protocol):
    """A deployment version's thresholds (ms; None: not set)."""

    slo_ttft_ms: int | None
    slo_tpot_ms: int | None
    slo_ttft_ms_priority: int | None
    slo_tpot_ms_priority: int | None


def tier_thresholds(version: SloThresholds | None, service_tier: str) -> tuple[int | None, ...]:
    """The (TTFT, TPOT) thresholds a request of the tier is judged against under `version`:
    standard ones; a priority request's own where the version sets them (the standard ones
    otherwise); none for flex and batch, nor without a version."""
    if version is None or service_tier in LATENCY_FREE_TIERS:
        return (None, None)
    if service_tier == PRIORITY:
        return (
            _first(version.slo_ttft_ms_priority, version.slo_ttft_ms),
            _first(version.slo_tpot_ms_priority, version.slo_tpot_ms),
        )
    return (version.slo_ttft_ms, version.slo_tpot_ms)


def _first(value: int | None, fallback: int | None) -> int | None:
    return fallback if value is None else value


def is_slo_compliant(
    *,
    is_error: bool,
    ttft_ms: float | None,
    tpot_ms: float | None,
    slo_ttft_ms: int | None,
    slo_tpot_ms: int | None,
) -> bool:
    """A request meets its SLO when it succeeded and each latency figure it reports is
    within the threshold its deployment version sets for its tier (`tier_thresholds`); a
    figure the request does not report, or a threshold the version does not set, does not
    count against it."""
    if is_error:
        return False
    for value, threshold in ((ttft_ms, slo_ttft_ms), (tpot_ms, slo_tpot_ms)):
        if threshold is not None and value is not None and value > threshold:
            return False
    return True
