"""What a rollup row holds: sums that only ever add (architecture.md "The pipeline": the fold
adds). The fold adds events to them in SQL, on both databases (metering.services.usage.rollup,
`_sums_sql`); a request is compliant by metering.domain.usage.compliance."""

# Upper edges (ms) of the end-to-end latency histogram kept in rollups; the last bucket is +Inf.
LATENCY_BUCKETS_MS = (
    100, 250, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000, 15000, 20000, 30000, 60000,
)  # fmt: skip
HISTOGRAM_SIZE = len(LATENCY_BUCKETS_MS) + 1

# The token counts of an event: cached and cache-write are parts of input, reasoning a part
# of output (kpis.md section 3, "Token classes").
TOKEN_FIELDS = (
    "input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens",
)  # fmt: skip
# The counts production weighs (tok = output + w_in × (input − cached), kpis.md section 1).
PRODUCTION_FIELDS = ("input_tokens", "cached_tokens", "output_tokens")
# Every additive figure of a rollup row (the histogram aside).
SUM_FIELDS = (
    "requests",  # every request, failed ones included
    "errors",
    *TOKEN_FIELDS,  # of every request (production counts them)
    *(f"ok_{name}" for name in TOKEN_FIELDS),  # status ok only (billable)
    "compliant_requests",  # ok and within the SLO in force
    *(f"compliant_{name}" for name in PRODUCTION_FIELDS),
    "ttft_ms_sum",  # Σ mean × requests, over the requests that report it
    "ttft_count",
    "tpot_ms_sum",
    "tpot_count",
    "latency_ms_sum",
    "latency_count",
)
