"""SLO compliance is defined once (metering.domain.usage.compliance); the rollups' twins of
it, the ORM filter (SQLite) and the SQL of the PostgreSQL fold, count the same requests and
tokens on random events and thresholds."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metering.domain.usage.compliance import is_slo_compliant
from metering.domain.usage.validation import validate_events
from metering.models import (
    DailyUsage,
    Deployment,
    EventKey,
    FoldPending,
    HourlyUsage,
    UsageEvent,
)
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal.models import Tenant
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends
BASE = datetime(2026, 3, 2, 10, tzinfo=UTC)
NOW = datetime(2026, 4, 1, tzinfo=UTC)
# Small ranges, so that a figure equal to its threshold (within: <=) comes up often.
latency = st.one_of(st.none(), st.integers(min_value=0, max_value=6))
threshold = st.one_of(st.none(), st.integers(min_value=0, max_value=6))
# The last figure: how many requests the event stands for (None: left out, so 1).
events = st.lists(
    st.tuples(
        st.booleans(),
        latency,
        latency,
        st.integers(min_value=0, max_value=9_999),
        st.one_of(st.none(), st.integers(min_value=1, max_value=5)),
    ),
    min_size=1,
    max_size=30,
)


def test_is_slo_compliant_by_hand():
    within = {"slo_ttft_ms": 200, "slo_tpot_ms": 50}
    assert is_slo_compliant(is_error=False, ttft_ms=200, tpot_ms=50, **within)
    assert not is_slo_compliant(is_error=False, ttft_ms=201, tpot_ms=50, **within)
    assert not is_slo_compliant(is_error=False, ttft_ms=10, tpot_ms=51, **within)
    assert not is_slo_compliant(is_error=True, ttft_ms=10, tpot_ms=10, **within)
    # A figure the request does not report, or a threshold not set, is not held against it.
    assert is_slo_compliant(is_error=False, ttft_ms=None, tpot_ms=None, **within)
    assert is_slo_compliant(
        is_error=False, ttft_ms=9_999, tpot_ms=9_999, slo_ttft_ms=None, slo_tpot_ms=None
    )


@given(raw=events, slo_ttft=threshold, slo_tpot=threshold)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_rollup_compliance_equals_the_domain_rule(db, raw, slo_ttft, slo_tpot):
    for model in (UsageEvent, EventKey, HourlyUsage, DailyUsage, FoldPending, Deployment):
        model.objects.all().delete()
    Tenant.objects.get_or_create(slug="t1", defaults={"name": "T1"})
    make_deployment(ttft=slo_ttft, tpot=slo_tpot)
    items = [
        {
            "id": f"c{i}",
            "tenant": "t1",
            "model": "llama-70b",
            "time": (BASE + timedelta(minutes=i)).isoformat(),
            "input_tokens": 3 * tokens,
            "cached_tokens": 0,
            "output_tokens": tokens,
            "status": "error" if failed else "ok",
            **({"ttft_ms": ttft} if ttft is not None else {}),
            **({"tpot_ms": tpot} if tpot is not None else {}),
            **({"requests": n} if n is not None else {}),
        }
        for i, (failed, ttft, tpot, tokens, n) in enumerate(raw)
    ]
    validated, errors = validate_events(items=items, now=NOW)
    assert not errors
    usage_ingest(events=validated, received_at=NOW)
    usage_fold()

    compliant = [
        (tokens, n or 1)
        for failed, ttft, tpot, tokens, n in raw
        if is_slo_compliant(
            is_error=failed, ttft_ms=ttft, tpot_ms=tpot, slo_ttft_ms=slo_ttft, slo_tpot_ms=slo_tpot
        )
    ]
    rows = list(HourlyUsage.objects.all())
    # An event standing for n requests counts n requests; its tokens are already their sum.
    assert sum(r.compliant_requests for r in rows) == sum(n for _, n in compliant)
    assert sum(r.compliant_output_tokens for r in rows) == sum(t for t, _ in compliant)
    assert sum(r.compliant_input_tokens for r in rows) == 3 * sum(t for t, _ in compliant)
    assert sum(r.requests for r in rows) == sum(n or 1 for *_, n in raw)
    assert sum(r.errors for r in rows) == sum(n or 1 for failed, *_, n in raw if failed)
    with_ttft = [(ttft, n or 1) for _, ttft, _, _, n in raw if ttft is not None]
    assert sum(r.ttft_count for r in rows) == sum(n for _, n in with_ttft)
    assert sum(r.ttft_ms_sum for r in rows) == sum(ttft * n for ttft, n in with_ttft)
