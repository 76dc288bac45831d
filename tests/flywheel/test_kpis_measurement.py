"""Measurement from the database: capacity step functions, and a query count that does not
grow with events or tenants."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.services.pricing import contract_create, price_create
from flywheel.selectors.measurement import FactoryData
from metering.domain.usage.validation import validate_events
from metering.models import Pool, ServedModel
from metering.services.factory import CapacityIn, capacity_upsert
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal.models import Tenant
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends
DAY = datetime(2026, 3, 2, tzinfo=UTC)


def test_capacity_changes_mid_period_integrate_by_hand(db):
    make_deployment(pool="p10", gpus=10)
    pool = Pool.objects.get(slug="p10")
    # (hours after midnight, healthy, busy) of the 10 installed GPUs
    steps = [(0, 10, 5), (6, 8, 4), (12, 10, 5)]
    capacity_upsert(
        samples=[
            CapacityIn(
                pool=pool,
                time=DAY + timedelta(hours=hours),
                gpus_installed=10,
                gpus_healthy=healthy,
                gpus_busy=busy,
            )
            for hours, healthy, busy in steps
        ]
    )

    kpis = FactoryData(start=DAY, end=DAY + timedelta(days=1)).kpis(
        scope="p10", start=DAY, end=DAY + timedelta(days=1)
    )

    # Two GPUs fail for six hours, then return.
    assert kpis.calendar_gpu_seconds == 10 * 86_400
    assert kpis.available_gpu_seconds == (10 * 6 + 8 * 6 + 10 * 12) * 3600
    assert kpis.busy_gpu_seconds == (5 * 6 + 4 * 6 + 5 * 12) * 3600
    assert kpis.telemetry == "measured"


def _load(tenants: range, events_per_tenant: int) -> None:
    items = []
    for t in tenants:
        tenant = Tenant.objects.create(slug=f"t{t}", name=f"T{t}")
        contract_create(
            tenant=tenant,
            kind="paid" if t % 2 else "trial",
            free_tokens_per_month=5_000,
            currency="USD",
            effective_from=datetime(2026, 1, 1, tzinfo=UTC),
        )
        items += [
            {"id": f"{t}-{i}", "tenant": tenant.slug, "model": "llama-70b",
             "time": (DAY + timedelta(minutes=7 * i)).isoformat(),
             "input_tokens": 1000 + i, "output_tokens": 300 + i, "ttft_ms": 100 + 50 * i}
            for i in range(events_per_tenant)
        ]  # fmt: skip
    events, errors = validate_events(items=items, now=DAY + timedelta(days=2))
    assert not errors
    usage_ingest(events=events, received_at=DAY + timedelta(days=2))
    usage_fold()


def _queries() -> int:
    with CaptureQueriesContext(connection) as captured:
        data = FactoryData(start=DAY, end=DAY + timedelta(days=1))
        data.kpis(scope="factory", start=DAY, end=DAY + timedelta(days=1))
    return len(captured.captured_queries)


def test_query_count_does_not_grow_with_events_or_tenants(db):
    make_deployment(ttft=2000)
    model = ServedModel.objects.get()
    for token_class in ("input", "cached_input", "output"):
        price_create(model=model, token_class=token_class, per_million=Decimal(1),
                     currency="USD", effective_from=datetime(2026, 1, 1, tzinfo=UTC))  # fmt: skip
    _load(tenants=range(2), events_per_tenant=5)
    small = _queries()

    _load(tenants=range(2, 22), events_per_tenant=50)  # ten times the tenants, 100x events
    large = _queries()

    assert large == small
    assert small < 25


def test_a_cache_write_counts_as_uncached_input_in_production(db):
    """kpis.md section 3: tok(e) is unchanged by the token classes. On `small` (w_in 0.2,
    R_ref 2,500 tok/s per GPU) a request of input 1,000 (400 cached, 300 written to the
    cache) and output 200 (150 reasoning) makes 200 + 0.2 × (1,000 − 400) = 320 tok: the
    cache write is uncached input, the reasoning output. 320 / 2,500 = 0.128 std GPU-s."""
    make_deployment(model="small", pool="l40s", gpus=4, r_ref="2500", w_in="0.2")
    Tenant.objects.create(slug="t", name="T")
    base = {"tenant": "t", "model": "small", "input_tokens": 1000, "cached_tokens": 400,
            "output_tokens": 200}  # fmt: skip
    items = [
        {**base, "id": "plain", "time": "2026-03-02T10:10:00Z"},
        {**base, "id": "classes", "time": "2026-03-02T11:10:00Z", "cache_write_tokens": 300,
         "reasoning_tokens": 150},
    ]  # fmt: skip
    events, errors = validate_events(items=items, now=DAY + timedelta(days=1))
    assert errors == []
    usage_ingest(events=events, received_at=DAY + timedelta(days=1))
    usage_fold()

    hour = timedelta(hours=1)
    plain, classes = (
        FactoryData(start=start, end=start + hour).kpis(
            scope="factory", start=start, end=start + hour
        )
        for start in (DAY + 10 * hour, DAY + 11 * hour)
    )
    assert plain.std_gpu_seconds == classes.std_gpu_seconds == Decimal("0.128")
    assert plain.output_tokens == classes.output_tokens == 200
