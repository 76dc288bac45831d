"""For random tenant-months: rating from rollups equals rating event by event, and the
ledger's revenue equals the rated usage exactly."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.domain.rating.engine import rate_month
from billing.domain.rating.types import UsageItem
from billing.models import Posting
from billing.selectors.rating.inputs import (
    contract_versions,
    price_versions,
    promotions_available,
    tenant_month_rate,
)
from billing.services.close import close_run
from metering.domain.usage.validation import validate_events
from metering.models import EventKey, UsageEvent
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal.models import Tenant
from tests.billing.factories import MARCH, make_contract, make_priced_model
from tests.conftest import SOAK

pytestmark = pytest.mark.both_backends
M = 1_000_000
NOW = datetime(2026, 4, 2, tzinfo=UTC)

events_strategy = st.lists(
    st.tuples(
        st.sampled_from(["m1", "m2"]),
        st.integers(min_value=0, max_value=6 * 60 - 1),  # minute within 6 hours: shared hours
        st.integers(min_value=0, max_value=40 * M),  # input tokens
        st.integers(min_value=0, max_value=3),  # cached quarters of input
        st.integers(min_value=0, max_value=20 * M),  # output tokens
        st.booleans(),  # failed
    ),
    min_size=1,
    max_size=40,
)
terms_strategy = st.fixed_dictionaries(
    {
        "discount_pct": st.integers(min_value=0, max_value=40).map(Decimal),
        "free_tokens_per_month": st.integers(min_value=0, max_value=300 * M),
        "volume_tiers": st.lists(
            st.fixed_dictionaries(
                {
                    "from_tokens": st.integers(min_value=0, max_value=500 * M),
                    "discount_pct": st.integers(min_value=0, max_value=50).map(str),
                }
            ),
            max_size=2,
            unique_by=lambda tier: tier["from_tokens"],
        ),
    }
)


@pytest.fixture
def priced(db):
    make_priced_model(model="m1", pool="p1", prices=("0.88", "0.44", "0.88"))
    make_priced_model(model="m2", pool="p2", prices=("0.35", "0.175", "1.40"))


def _ingest(raw):
    items = [
        {
            "id": f"e{i}",
            "tenant": "recon",
            "model": model,
            "time": (MARCH + timedelta(minutes=minute)).isoformat(),
            "input_tokens": tokens_in,
            "cached_tokens": tokens_in * quarters // 4,
            "output_tokens": tokens_out,
            "status": "error" if failed else "ok",
        }
        for i, (model, minute, tokens_in, quarters, tokens_out, failed) in enumerate(raw)
    ]
    events, errors = validate_events(items=items, now=NOW)
    assert not errors
    usage_ingest(events=events, received_at=NOW)
    usage_fold()


def _event_items(tenant):
    keys = {k.pk: k for k in EventKey.objects.all()}
    return [
        UsageItem(
            time=event.time,
            model=event.deployment.model.slug,
            pool=event.deployment.pool.slug,
            deployment=event.deployment.slug,
            input_tokens=event.input_tokens,
            cached_tokens=event.cached_tokens,
            output_tokens=event.output_tokens,
            source=keys[event.pk].source,
            id=keys[event.pk].event_id,
        )
        for event in UsageEvent.objects.filter(tenant=tenant, is_error=False).select_related(
            "deployment__model", "deployment__pool"
        )
    ]


@settings(
    max_examples=40 if SOAK else 15,  # about 0.6 s of CPU each
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(raw=events_strategy, terms=terms_strategy)
def test_ledger_revenue_equals_rated_usage(priced, raw, terms):
    with transaction.atomic():
        tenant = Tenant.objects.create(slug="recon", name="Recon")
        make_contract(tenant, **terms)
        _ingest(raw)

        rated = tenant_month_rate(tenant=tenant, month_start=MARCH)
        by_event = rate_month(
            month_start=MARCH,
            items=_event_items(tenant),
            contracts=contract_versions(tenant=tenant),
            prices=price_versions(model_slugs={"m1", "m2"}),
            promotions=promotions_available(tenant=tenant, month_start=MARCH),
        )
        assert rated.lines == by_event.lines
        assert rated.paid_tokens == by_event.paid_tokens
        assert rated.unsold_tokens == by_event.unsold_tokens

        run = close_run(month_start=MARCH)
        usage = sum((line.amount for line in rated.lines), Decimal(0))
        if not any(line.list_amount or line.amount for line in rated.lines):
            assert run.issued == []  # nothing used, or all of it free or unsold
        else:
            [invoice] = run.issued
            assert invoice.total == rated.total
            postings = Posting.objects.filter(transaction=invoice.issue_transaction)
            revenue = -sum(
                (p.amount for p in postings if p.account.kind in ("revenue", "contra_revenue")),
                Decimal(0),
            )
            assert revenue - usage == Decimal("0.00")
        transaction.set_rollback(True)
