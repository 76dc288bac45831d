"""Classic Prometheus histograms: merge, reset-aware delta, SLO share and quantile.

Pure: no Django. Semantics follow data-formats.md §0 and §8.6.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

INF = math.inf


@dataclass(frozen=True, slots=True)
class Histogram:
    """One classic histogram series: cumulative buckets ending at +Inf, sum and count."""

    buckets: tuple[tuple[float, float], ...]  # (upper edge incl. inf, cumulative count), ascending
    sum: float  # sum of observations, in the metric's unit (s for latencies)
    count: float  # number of observations; equals the +Inf bucket

    @property
    def edges(self) -> tuple[float, ...]:
        return tuple(edge for edge, _ in self.buckets)


def histogram_sum(*, histograms: Sequence[Histogram]) -> Histogram:
    """Add histograms bucket-wise on the edges they all share (+Inf is always shared).

    Cumulative counts at a common edge add exactly, so summing over `engine` or
    `is_streaming` stays correct even if one series was configured with extra edges.
    """
    if not histograms:
        raise ValueError("histogram_sum needs at least one histogram")
    if len(histograms) == 1:
        return histograms[0]
    common = set(histograms[0].edges)
    for histogram in histograms[1:]:
        common &= set(histogram.edges)
    totals = dict.fromkeys(sorted(common), 0.0)
    for histogram in histograms:
        for edge, cumulative in histogram.buckets:
            if edge in totals:
                totals[edge] += cumulative
    return Histogram(
        buckets=tuple(totals.items()),
        sum=math.fsum(h.sum for h in histograms),
        count=math.fsum(h.count for h in histograms),
    )


def histogram_delta(*, previous: Histogram | None, current: Histogram) -> Histogram:
    """Increase of a histogram between two scrapes of the same series, like `increase()`.

    The first observation (`previous is None`) is the baseline: the result has the
    current edges and zero counts, mirroring `counter_delta` returning 0. A reset
    (the count or any bucket went down, or the edges changed, which needs a restart)
    makes the whole current histogram the increase, so buckets stay consistent.
    """
    if previous is None:
        return Histogram(
            buckets=tuple((edge, 0.0) for edge in current.edges),
            sum=0.0,
            count=0.0,
        )
    is_reset = (
        previous.edges != current.edges
        or current.count < previous.count
        or any(
            now < before
            for (_, now), (_, before) in zip(current.buckets, previous.buckets, strict=True)
        )
    )
    if is_reset:
        return current
    return Histogram(
        buckets=tuple(
            (edge, now - before)
            for (edge, now), (_, before) in zip(current.buckets, previous.buckets, strict=True)
        ),
        sum=current.sum - previous.sum,
        count=current.count - previous.count,
    )


def share_within(*, histogram: Histogram, threshold_s: float) -> float | None:
    """Fraction of observations <= threshold_s; None when the histogram is empty.

    Inside the bucket that holds the threshold the observations are assumed evenly
    spread (linear interpolation, §8.6); the first bucket's lower edge is 0. Past the
    last finite edge nothing can be interpolated: the +Inf bucket counts as above.
    """
    if threshold_s < 0 or math.isnan(threshold_s):
        raise ValueError(f"threshold_s must be >= 0, got {threshold_s}")
    if histogram.count <= 0:
        return None
    lower_edge, lower_cumulative = 0.0, 0.0
    for edge, cumulative in histogram.buckets:
        if edge == INF:
            break
        if threshold_s <= edge:
            if threshold_s == edge or edge <= lower_edge:
                within = cumulative
            else:
                fraction = (threshold_s - lower_edge) / (edge - lower_edge)
                within = lower_cumulative + (cumulative - lower_cumulative) * fraction
            return within / histogram.count
        lower_edge, lower_cumulative = edge, cumulative
    return lower_cumulative / histogram.count


def quantile(*, histogram: Histogram, q: float) -> float | None:
    """The q-quantile (0 <= q <= 1) estimated like PromQL `histogram_quantile`.

    None when the histogram is empty. A rank that falls in the +Inf bucket returns
    the last finite edge, as Prometheus does; the first bucket's lower edge is 0.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be within [0, 1], got {q}")
    if histogram.count <= 0 or len(histogram.buckets) < 2:
        return None
    rank = q * histogram.count
    lower_edge, lower_cumulative = 0.0, 0.0
    for index, (edge, cumulative) in enumerate(histogram.buckets):
        if edge == INF:
            return lower_edge
        if cumulative >= rank:
            if index == 0 and edge <= 0:
                return edge
            in_bucket = cumulative - lower_cumulative
            if in_bucket <= 0:
                return lower_edge
            return lower_edge + (edge - lower_edge) * (rank - lower_cumulative) / in_bucket
        lower_edge, lower_cumulative = edge, cumulative
    return lower_edge
