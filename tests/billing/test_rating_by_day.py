"""For random tenant-months over several days, with a price change, a contract change and
a promotion expiring inside days: rating whole days from daily rollups (the KPI
measurement's `month_rate(by_day=...)`) gives the same lines as hourly rating, and the same
paid tokens, list value and realized revenue on every day, and on every hour of the days
holding the period's bounds."""

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.selectors.rating import month_rate
from billing.services.pricing import contract_create, price_create, promotion_grant
from metering.domain.usage.validation import validate_events
from metering.models import ServedModel
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import rollup_pending
from portal.models import Tenant
from portal.periods import day_floor
from tests.billing.factories import JAN, MARCH, make_priced_model

pytestmark = pytest.mark.both_backends
M = 1_000_000
DAYS = 5
MINUTES = DAYS * 24 * 60
NOW = datetime(2026, 4, 2, tzinfo=UTC)

events_strategy = st.lists(
    st.tuples(
        st.sampled_from(["m1", "m2"]),
        st.integers(min_value=0, max_value=MINUTES - 1),
        st.integers(min_value=0, max_value=40 * M),  # input tokens
        st.integers(min_value=0, max_value=20 * M),  # output tokens
    ),
    min_size=1,
    max_size=40,
)
month_strategy = st.fixed_dictionaries(
    {
        "free_tokens_per_month": st.integers(min_value=0, max_value=400 * M),
        "tier_from": st.integers(min_value=0, max_value=600 * M),
        "price_change": st.integers(min_value=1, max_value=MINUTES - 1),  # minutes
        "contract_change": st.integers(min_value=1, max_value=MINUTES - 1),
        "promotion_expiry": st.integers(min_value=1, max_value=MINUTES - 1),
        "promotion": st.integers(min_value=0, max_value=200),
        "period_start": st.integers(min_value=0, max_value=DAYS * 24 - 1),  # hours
    }
)


@pytest.fixture
def priced(db):
    make_priced_model(model="m1", pool="p1", prices=("0.88", "0.44", "0.88"))
    make_priced_model(model="m2", pool="p2", prices=("0.35", "0.175", "1.40"))


def _world(raw, month) -> Tenant:
    at = lambda minutes: MARCH + timedelta(minutes=minutes)  # noqa: E731
    # Prices and contracts change on whole hours; credits expire at any instant.
    price_create(model=ServedModel.objects.get(slug="m1"), token_class="output",
                 per_million=Decimal("1.10"), currency="USD",
                 effective_from=at(month["price_change"] // 60 * 60))  # fmt: skip
    tenant = Tenant.objects.create(slug="recon", name="Recon")
    tiers = [{"from_tokens": month["tier_from"], "discount_pct": "20"}]
    for effective_from, discount in ((JAN, 10), (at(month["contract_change"] // 60 * 60), 25)):
        contract_create(tenant=tenant, kind="paid", currency="USD", effective_from=effective_from,
                        discount_pct=Decimal(discount), volume_tiers=tiers,
                        free_tokens_per_month=month["free_tokens_per_month"])  # fmt: skip
    if month["promotion"]:
        promotion_grant(tenant=tenant, amount=Decimal(month["promotion"]), currency="USD",
                        effective_from=MARCH, expires_at=at(month["promotion_expiry"]))  # fmt: skip
    items = [
        {"id": f"e{i}", "tenant": "recon", "model": model, "time": at(minute).isoformat(),
         "input_tokens": tokens_in, "cached_tokens": tokens_in // 4, "output_tokens": tokens_out}
        for i, (model, minute, tokens_in, tokens_out) in enumerate(raw)
    ]  # fmt: skip
    events, errors = validate_events(items=items, now=NOW)
    assert not errors
    usage_ingest(events=events, received_at=NOW)
    rollup_pending()
    return tenant


def _sums(rated, key) -> dict:
    sums = defaultdict(lambda: [0, Decimal(0), Decimal(0)])
    for item in rated.items:
        if item.is_paid:
            row = sums[key(item.item.time)]
            row[0] += item.item.output_tokens
            row[1] += item.list_value
            row[2] += item.realized_after_promotions
    return sums


def _assert_close(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key][0] == b[key][0], key
        for x, y in zip(a[key][1:], b[key][1:], strict=True):
            assert abs(x - y) <= Decimal("1e-20"), (key, x, y)


def _day(moment: datetime) -> datetime:
    return day_floor(moment)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=events_strategy, month=month_strategy)
def test_rating_whole_days_equals_rating_hours(priced, raw, month):
    with transaction.atomic():
        try:
            _check(raw, month)
        finally:
            transaction.set_rollback(True)


def _check(raw, month) -> None:
    tenant = _world(raw, month)
    start = MARCH + timedelta(hours=month["period_start"])

    hourly = month_rate(month_start=MARCH).rated.get(tenant.pk)
    daily = month_rate(month_start=MARCH, by_day=(start, NOW)).rated.get(tenant.pk)
    if hourly is None:  # no ok tokens at all: nothing to rate either way
        assert daily is None
        return
    assert daily.lines == hourly.lines
    assert daily.total == hourly.total
    assert (daily.paid_tokens, daily.unsold_tokens) == (hourly.paid_tokens, hourly.unsold_tokens)
    _assert_close(_sums(daily, _day), _sums(hourly, _day))
    if start == _day(start):
        return
    # The day holding the period's start inside it is rated hour by hour.
    in_start_day = lambda t: _day(t) == _day(start)  # noqa: E731
    hours = lambda rated: {  # noqa: E731
        k: v for k, v in _sums(rated, lambda t: t.replace(minute=0, second=0)).items()
        if in_start_day(k)
    }  # fmt: skip
    _assert_close(hours(daily), hours(hourly))
