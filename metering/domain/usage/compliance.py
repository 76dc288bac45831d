"""SLO compliance of one request (kpis.md, σ): the one definition. The fold computes it in SQL
on both databases (metering.services.usage.rollup, `_sums_sql`); tests hold the rollups equal
to this."""


def is_slo_compliant(
    *,
    is_error: bool,
    ttft_ms: int | None,
    tpot_ms: int | None,
    slo_ttft_ms: int | None,
    slo_tpot_ms: int | None,
) -> bool:
    """A request meets its SLO when it succeeded and each latency figure it reports is
    within the threshold its deployment version sets; a figure the request does not report,
    or a threshold the version does not set, does not count against it."""
    if is_error:
        return False
    for value, threshold in ((ttft_ms, slo_ttft_ms), (tpot_ms, slo_tpot_ms)):
        if threshold is not None and value is not None and value > threshold:
            return False
    return True
