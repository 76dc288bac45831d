"""What a rollup row holds, and the rule that folds usage events into it: sums that only ever
add (architecture.md "The pipeline": the fold adds). The fold applies it through the ORM on
SQLite and as SQL on PostgreSQL (metering.services.usage.rollup); tests hold the SQL twin
equal to this."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from metering.domain.usage.compliance import is_slo_compliant

# Upper edges (ms) of the end-to-end latency histogram kept in rollups; the last bucket is +Inf.
LATENCY_BUCKETS_MS = (
    100, 250, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000, 15000, 20000, 30000, 60000,
)  # fmt: skip
HISTOGRAM_SIZE = len(LATENCY_BUCKETS_MS) + 1

TOKEN_FIELDS = ("input_tokens", "cached_tokens", "output_tokens")
# Every additive figure of a rollup row (the histogram aside).
SUM_FIELDS = (
    "requests",  # every request, failed ones included
    "errors",
    *TOKEN_FIELDS,  # of every request (production counts them)
    *(f"ok_{name}" for name in TOKEN_FIELDS),  # status ok only (billable)
    "compliant_requests",  # ok and within the SLO in force
    *(f"compliant_{name}" for name in TOKEN_FIELDS),
    "ttft_ms_sum",  # Σ mean × requests, over the requests that report it
    "ttft_count",
    "tpot_ms_sum",
    "tpot_count",
    "latency_ms_sum",
    "latency_count",
)
LATENCIES = ("ttft_ms", "tpot_ms", "latency_ms")


@dataclass(frozen=True)
class Slo:
    """The SLO thresholds of the deployment version in force at an event's time (None: not
    set, so not held against the event)."""

    ttft_ms: int | None = None
    tpot_ms: int | None = None


def histogram_bucket(latency_ms: float) -> int:
    """The index of the latency histogram bucket holding `latency_ms` (upper edges inclusive;
    the last bucket is +Inf)."""
    for index, edge in enumerate(LATENCY_BUCKETS_MS):
        if latency_ms <= edge:
            return index
    return len(LATENCY_BUCKETS_MS)


def empty_sums() -> dict:
    """A rollup row's figures before any event: zeros and an empty histogram."""
    return {**dict.fromkeys(SUM_FIELDS, 0), "latency_histogram": [0] * HISTOGRAM_SIZE}


def event_add(sums: dict, event: Mapping, *, slo: Slo) -> None:
    """Add one usage event to a row's `sums` (from `empty_sums`). An event stands for
    `requests` requests: its tokens are their totals, its latencies their means, so the
    counts and latency sums weigh it `requests` times."""
    requests = event["requests"]
    is_error = event["is_error"]
    sums["requests"] += requests
    tokens = [(name, event[name]) for name in TOKEN_FIELDS]
    for name, value in tokens:
        sums[name] += value
    if is_error:
        sums["errors"] += requests
    else:
        for name, value in tokens:
            sums[f"ok_{name}"] += value
        compliant = is_slo_compliant(
            is_error=False,
            ttft_ms=event["ttft_ms"],
            tpot_ms=event["tpot_ms"],
            slo_ttft_ms=slo.ttft_ms,
            slo_tpot_ms=slo.tpot_ms,
        )
        if compliant:
            sums["compliant_requests"] += requests
            for name, value in tokens:
                sums[f"compliant_{name}"] += value
    for name in LATENCIES:
        value = event[name]
        if value is not None:
            sums[f"{name}_sum"] += value * requests
            sums[name.replace("_ms", "_count")] += requests
    if event["latency_ms"] is not None:
        sums["latency_histogram"][histogram_bucket(event["latency_ms"])] += requests


def sums_add(total: dict, part: Mapping) -> None:
    """Add a row's figures (`part`) to `total`, histogram bucket by bucket."""
    for name in SUM_FIELDS:
        total[name] += part[name]
    histogram = total["latency_histogram"]
    for index, count in enumerate(part["latency_histogram"] or ()):
        histogram[index] += count


def rows_sum(rows: Iterable[Mapping]) -> dict:
    """The figures of several rows added up (a day from its hours)."""
    total = empty_sums()
    for row in rows:
        sums_add(total, row)
    return total
