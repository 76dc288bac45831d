"""Billing's rated usage: the stored read model equals a fresh rating of the month, and
measuring a month reads it (and metering's rollups) without reading a raw event or running
the rating, in a number of queries that does not grow with events or tenants."""

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from importlib import import_module
from itertools import pairwise
from unittest.mock import patch

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from billing.domain.invoices import BASE_KINDS
from billing.models import (
    Contract,
    Price,
    PromotionalCredit,
    RatedHour,
    RatedHourPrefix,
    RatedTenantMonth,
    RatedUsage,
    RatedUsageMonth,
    RatingPending,
    Reservation,
)
from billing.selectors.rating.inputs import month_billed, month_rate
from billing.selectors.rating.items import hourly_rows
from billing.services.pricing import contract_create, price_create, promotion_grant
from billing.services.rating import rated_usage_update
from billing.services.reservations import (
    reservation_cancel,
    reservation_create,
    reservation_raise,
)
from flywheel.selectors.kpis import period_measure
from flywheel.selectors.measurement import FactoryData
from flywheel.services.kpis import snapshots_measure
from metering.domain.usage.validation import validate_events
from metering.models import (
    DailyUsage,
    Deployment,
    EventKey,
    FoldPending,
    HourlyUsage,
    ServedModel,
    UsageEvent,
)
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal import clock
from portal.closing import month_close
from portal.errors import FieldError
from portal.models import ClosedMonth, Tenant
from tests.conftest import SOAK
from tests.metering.factories import make_deployment

MARCH = datetime(2026, 3, 1, tzinfo=UTC)
APRIL = datetime(2026, 4, 1, tzinfo=UTC)
NOW = APRIL + timedelta(days=2)
SLO_TTFT = 500
CONTRACTS = {
    "paid": {"kind": "paid", "discount_pct": Decimal("12.5")},
    "allowance": {"kind": "paid", "free_tokens_per_month": 60_000},
    "tiers": {
        "kind": "paid",
        "volume_tiers": [{"from_tokens": 40_000, "discount_pct": "20"}],
        "committed_minimum": Decimal("500"),
    },
    "trial": {"kind": "trial"},
    "none": None,
}


def _pricing() -> None:
    make_deployment(pool="h100-a", gpus=8, ttft=SLO_TTFT)
    make_deployment(model="small", pool="l40s", gpus=4, r_ref="2500", w_in="0.2", ttft=SLO_TTFT)
    for model in ("llama-70b", "small"):
        for token_class, price in (("input", "0.6"), ("cached_input", "0.15"), ("output", "2.5")):
            price_create(
                model=ServedModel.objects.get(slug=model),
                token_class=token_class,
                per_million=Decimal(price),
                currency="USD",
                effective_from=MARCH - timedelta(days=60),
            )


def _tenants(kinds: list[str], *, first: int = 0) -> list[Tenant]:
    tenants = []
    for index, kind in enumerate(kinds, start=first):
        tenant = Tenant.objects.create(slug=f"{kind}-{index}", name=f"{kind.title()} {index}")
        if CONTRACTS[kind] is not None:
            contract_create(
                tenant=tenant,
                currency="USD",
                effective_from=MARCH - timedelta(days=60),
                **CONTRACTS[kind],
            )
        tenants.append(tenant)
    return tenants


def _ingest(events: list[dict]) -> None:
    validated, errors = validate_events(items=events, now=NOW)
    assert not errors
    usage_ingest(events=validated, received_at=NOW)
    usage_fold()


def _events(tenants: list[Tenant], per_tenant: int) -> list[dict]:
    return [
        {
            "id": f"{tenant.slug}-{i}",
            "tenant": tenant.slug,
            "model": "small" if i % 3 else "llama-70b",
            "time": (MARCH + timedelta(minutes=97 * i + 13 * n)).isoformat(),
            "input_tokens": 900 + 7 * i,
            "cached_tokens": 100,
            "output_tokens": 300 + i,
            "ttft_ms": 150 + 9 * i,
        }
        for n, tenant in enumerate(tenants)
        for i in range(per_tenant)
    ]


def _measure_month() -> tuple[list[str], int]:
    """Measure March (KPIs of every scope and TFOM revenue adjustments) as a page would, with
    the rating engine refused: the SQL it ran."""
    refused = AssertionError("the rating engine ran")
    with (
        CaptureQueriesContext(connection) as captured,
        patch("billing.selectors.rating.inputs.rate_month", side_effect=refused),
        patch("billing.services.rating.month_rate", side_effect=refused),
    ):
        data = FactoryData(start=MARCH, end=APRIL, snapshots=False)
        for scope in data.scopes():
            data.kpis(scope=scope, start=MARCH, end=APRIL)
        data.revenue_adjustments(start=MARCH, end=APRIL)
        period_measure(start=MARCH, end=APRIL)
    return [q["sql"] for q in captured.captured_queries], len(captured.captured_queries)


@pytest.mark.both_backends
def test_measuring_a_month_reads_no_event_never_rates_and_its_queries_are_flat(db):
    _pricing()
    small = _tenants(["paid", "trial"])
    _ingest(_events(small, 20))
    rated_usage_update()  # billing's job after the fold
    queries_small, count_small = _measure_month()
    figures_small = FactoryData(start=MARCH, end=APRIL).kpis(
        scope="factory", start=MARCH, end=APRIL
    )

    large = _tenants(["paid", "allowance", "tiers", "trial", "none", "paid"], first=2)
    _ingest(_events(large, 150))
    rated_usage_update()
    queries_large, count_large = _measure_month()
    figures = FactoryData(start=MARCH, end=APRIL).kpis(scope="factory", start=MARCH, end=APRIL)

    raw = ("metering_usageevent", "metering_eventkey")
    assert [sql for sql in queries_small + queries_large if any(t in sql for t in raw)] == []
    assert count_large == count_small  # flat: 8 tenants and 960 events more, same queries
    assert figures.paid_output_tokens > figures_small.paid_output_tokens > 0
    assert figures.list_value > figures_small.list_value > 0
    assert 0 < figures.sell_through < 1  # trial and no-contract usage is unsold

    # The measure job, once the rated usage is current, does not rate either.
    with patch("billing.selectors.rating.inputs.rate_month", side_effect=AssertionError("rated")):
        snapshots_measure(start=MARCH, end=APRIL, now=NOW)


TIERS = ("standard", "priority", "flex", "batch")


def _fresh(month: datetime) -> dict[tuple, dict]:
    """A fresh hourly rating of the month summed per (tenant, deployment, hour, sale, tier,
    covered), with
    the compliant tokens of each paid cell counted from the raw events, each paid part of an
    event its share of them (every event here has its rollup, so an hour's aggregate item
    stands for all of its events, every split hour's events being rated one by one)."""
    rating = month_rate(month_start=month, settle=False)
    slugs = {d.slug: d.pk for d in Deployment.objects.all()}
    cells: dict[tuple, dict] = defaultdict(lambda: defaultdict(Decimal))
    paid_events: dict = defaultdict(Fraction)  # (source, id) -> the share of it paid
    paid_hours: dict = defaultdict(Fraction)  # (tenant, deployment, hour) -> share paid
    for tenant_id, rated in rating.rated.items():
        for item in rated.items:
            usage = item.item
            hour = usage.time.replace(minute=0, second=0, microsecond=0)
            sale = "paid" if item.is_paid else item.unsold_reason.value
            tier = usage.service_tier
            cell = cells[(tenant_id, slugs[usage.deployment], hour, sale, tier, item.covered)]
            for name in ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens",
                         "reasoning_tokens"):  # fmt: skip
                cell[name] += getattr(usage, name)
            cell["list_value"] += item.list_value
            cell["realized"] += item.realized_amount
            if item.is_paid:
                key = (tenant_id, slugs[usage.deployment], hour, tier)
                shares = paid_events if usage.id else paid_hours
                target = (usage.source, usage.id) if usage.id else key
                shares[target, item.covered] += usage.share
    keys = {pk: (source, event_id) for pk, source, event_id in EventKey.objects.values_list(
        "id", "source", "event_id")}  # fmt: skip
    for event in UsageEvent.objects.filter(is_error=False):
        hour = event.time.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        key = (event.tenant_id, event.deployment_id, hour, event.service_tier)
        compliant = event.service_tier in ("flex", "batch") or (
            event.ttft_ms is not None and event.ttft_ms <= SLO_TTFT
        )
        for covered in (False, True):
            share = paid_hours.get((key, covered)) or paid_events.get((keys[event.id], covered))
            if share and compliant:
                cell = cells[(*key[:3], "paid", key[3], covered)]
                for name in ("input_tokens", "cached_tokens", "output_tokens"):
                    tokens = Fraction(cell[f"compliant_{name}"])
                    cell[f"compliant_{name}"] = tokens + getattr(event, name) * share
    return cells


event_strategy = st.tuples(
    st.integers(0, 4),  # tenant
    st.one_of(st.integers(0, 30 * 24 - 1), st.just(100)),  # hour of March, often a busy one
    st.integers(0, 59),  # minute
    st.booleans(),  # model
    st.integers(0, 20_000),  # input
    st.integers(0, 9_000),  # output
    st.integers(100, 900),  # ttft
    st.integers(0, 3),  # quarters of the uncached input written to the prompt cache
    st.integers(0, 4),  # quarters of the output that were reasoning
)
change_strategy = st.one_of(
    st.none(),
    st.tuples(st.just("price"), st.integers(1, 30 * 24 - 1), st.sampled_from(["1.1", "3.0"])),
    # classes gaining a price of their own mid-month: two lines for the class from then
    st.tuples(st.just("reasoning"), st.integers(1, 30 * 24 - 1), st.sampled_from(["2.7", "4"])),
    st.tuples(st.just("cache_write"), st.integers(1, 30 * 24 - 1), st.sampled_from(["0.75"])),
    st.tuples(st.just("contract"), st.integers(1, 30 * 24 - 1), st.integers(0, 4)),
    st.tuples(st.just("promotion"), st.integers(1, 30 * 24 * 60 - 1), st.integers(1, 40)),
    # a reservation of 1-3 GPUs starting at an hour, raised some hours after its start, or
    # cancelled some seconds into an hour after it (a cap of a few thousand tokens: crossed)
    st.tuples(
        st.just("reserve"), st.integers(0, 30 * 24 - 2), st.integers(0, 4), st.integers(1, 3)
    ),
    st.tuples(st.just("raise"), st.integers(1, 30), st.integers(1, 2)),
    st.tuples(st.just("cancel"), st.integers(0, 30), st.integers(1, 30)),
)
batches_strategy = st.lists(
    st.tuples(st.lists(event_strategy, min_size=1, max_size=15), change_strategy),
    min_size=1,
    max_size=4,
)


def _change(change, tenants: list[Tenant]) -> None:
    """A version or a credit that takes effect inside March, written between two ratings."""
    match change:
        case ("price" | "reasoning" | "cache_write" as kind, hour, price):
            small = ServedModel.objects.get(slug="small")
            start = MARCH + timedelta(hours=hour)
            token_class = "output" if kind == "price" else kind
            if not Price.objects.filter(
                model=small, token_class=token_class, effective_from=start
            ).exists():
                price_create(model=small, token_class=token_class, per_million=Decimal(price),
                             currency="USD", effective_from=start)  # fmt: skip
        case ("contract", hour, index):
            tenant = tenants[index]
            if not Contract.objects.filter(
                tenant=tenant, effective_from=MARCH + timedelta(hours=hour)
            ).exists():
                contract_create(tenant=tenant, currency="USD", effective_from=MARCH + timedelta(hours=hour),
                                kind="paid", discount_pct=Decimal(5),
                                volume_tiers=[{"from_tokens": 30_000, "discount_pct": "10"}])  # fmt: skip
        case ("promotion", minute, amount):
            promotion_grant(tenant=tenants[minute % 3], amount=Decimal(amount) / 10, currency="USD",
                            effective_from=MARCH, expires_at=MARCH + timedelta(minutes=minute))  # fmt: skip
        case ("reserve" | "raise" | "cancel", *_):
            _reservation_change(change, tenants)


def _reservation_change(change, tenants: list[Tenant]) -> None:
    """A reservation made, raised or cancelled before March, as its rules allow (a change
    they refuse, such as more GPUs than the pool has, is left out)."""
    latest = Reservation.objects.order_by("pk").last()
    now = clock.now()
    clock.clock_set(MARCH - timedelta(days=1))
    try:
        match change:
            case ("reserve", hour, index, gpus):
                reservation_create(tenant=tenants[index], gpus=gpus, hourly_rate=Decimal("0.3"),
                                   deployment=Deployment.objects.get(slug="llama-70b@h100-a"),
                                   term="none", starts_at=MARCH + timedelta(hours=hour))  # fmt: skip
            case ("raise", hours, more) if latest is not None and latest.ends_at is None:
                reservation_raise(reservation=latest, gpus=latest.gpus.last().gpus + more,
                                  effective_from=latest.starts_at + timedelta(hours=hours))  # fmt: skip
            case ("cancel", hours, seconds) if latest is not None and latest.ends_at is None:
                at = latest.starts_at + timedelta(hours=hours, seconds=seconds)
                reservation_cancel(reservation=latest, at=at)
    except FieldError:
        pass
    finally:
        clock.clock_set(now)


# Boundaries split events: the allowance tenant's third event crosses its 60,000 free tokens
# (2,000 of its 29,000 left) and the tiers tenant's second its 40,000-token tier, late
# events among them; a later batch's price rates the split hours again.
CROSSING = [
    ([(1, 30, 5, True, 20_000, 9_000, 200, 1, 2), (1, 31, 5, False, 20_000, 9_000, 800, 0, 0),
      (2, 40, 0, True, 20_000, 9_000, 300, 2, 1), (2, 41, 0, False, 20_000, 9_000, 300, 0, 0)],
     None),
    ([(1, 32, 5, True, 20_000, 9_000, 100, 3, 4), (1, 2, 0, False, 1_000, 0, 100, 0, 0)],
     ("price", 31, "3.0")),
]  # fmt: skip


# One busy hour (the 101st) rated as it fills: the allowance tenant's third event crosses its
# allowance and the tiers tenant's small events cross its tier at minute 40, each rating then
# taking the hour's later events from the rollups' rest; the paid tenant's credit expiring at
# minute 45, a reservation of the tiers tenant's llama deployment from the hour before (its
# events read whole) cancelled 30 s into the busy hour, a price from the hour, a late event.
BUSY = [
    ([(1, 100, 1, True, 20_000, 9_000, 200, 1, 2), (1, 100, 2, False, 20_000, 9_000, 800, 0, 0),
      (1, 100, 3, True, 20_000, 9_000, 300, 2, 1), (1, 100, 10, False, 3_000, 900, 300, 0, 0),
      (1, 100, 20, True, 2_000, 700, 900, 3, 4), (2, 100, 5, True, 20_000, 9_000, 300, 0, 0),
      (2, 100, 6, False, 20_000, 9_000, 100, 1, 1), (2, 100, 30, True, 5_000, 1_000, 200, 0, 0),
      (2, 100, 40, True, 4_000, 800, 700, 2, 0), (0, 100, 7, True, 1_000, 100, 100, 0, 0)],
     ("promotion", 100 * 60 + 45, 5)),
    ([(1, 100, 50, True, 1_000, 300, 200, 0, 0), (1, 100, 50, False, 1_500, 200, 800, 1, 0),
      (2, 100, 45, True, 2_000, 500, 100, 0, 3), (2, 100, 50, False, 2_500, 400, 600, 0, 0)],
     ("reserve", 99, 2, 1)),
    ([(1, 100, 55, True, 900, 90, 100, 2, 2), (2, 100, 55, False, 3_000, 300, 300, 1, 0),
      (1, 100, 4, False, 1_000, 100, 100, 0, 0)],
     ("price", 100, "3.0")),
    ([(1, 100, 58, False, 700, 70, 500, 0, 1), (2, 100, 58, True, 800, 80, 200, 0, 0)],
     ("cancel", 1, 30)),
]  # fmt: skip


# The busy hour filled by batches with nothing else changing in between, after a credit of
# the allowance tenant expiring at minute 46 of it: each rating after the first rates the
# hour from the state stored where its events were settled (the allowance tenant's at
# minute 47, past the expiry; the tiers tenant's at minute 6, past its tier), but the
# allowance tenant's in the third batch, whose late event at minute 2 is before its state;
# the tiers tenant's late event at minute 44 is after its state, among the rollups' rest.
RESUMED = [
    ([(1, 100, 1, True, 20_000, 9_000, 200, 1, 2), (1, 100, 2, False, 20_000, 9_000, 800, 0, 0),
      (1, 100, 3, True, 20_000, 9_000, 300, 2, 1), (1, 100, 47, False, 3_000, 900, 300, 0, 0),
      (2, 100, 5, True, 20_000, 9_000, 300, 0, 0), (2, 100, 6, False, 20_000, 9_000, 100, 1, 1),
      (2, 100, 8, True, 5_000, 1_000, 200, 0, 0), (0, 100, 7, True, 1_000, 100, 100, 0, 0)],
     ("promotion", 100 * 60 + 46, 5)),
    ([(1, 100, 50, True, 1_000, 300, 200, 0, 0), (1, 100, 55, False, 1_500, 200, 800, 1, 0),
      (2, 100, 30, True, 2_000, 500, 100, 0, 3), (2, 100, 35, False, 2_500, 400, 600, 0, 0)],
     None),
    ([(1, 100, 2, True, 900, 90, 100, 2, 2), (1, 100, 57, False, 800, 80, 700, 0, 0),
      (2, 100, 40, False, 3_000, 300, 300, 1, 0)],
     None),
    ([(1, 100, 58, False, 700, 70, 500, 0, 1), (2, 100, 44, True, 800, 80, 200, 0, 0)],
     None),
]  # fmt: skip


# The tiers tenant's busy hour under a reservation of its llama deployment from the hour
# before (made after the first batch), cancelled 2 s into the busy hour (after the second):
# the first llama event spends its capacity, the small events cross the tier at minute 6;
# the ratings after rate the hour from there, the llama events on demand among the rollups'
# rest, but the one after a late llama event at minute 3.
RESERVED = [
    ([(2, 100, 1, False, 20_000, 9_000, 300, 0, 0), (2, 100, 5, True, 20_000, 9_000, 300, 1, 0),
      (2, 100, 6, True, 20_000, 9_000, 100, 0, 2)],
     ("reserve", 99, 2, 1)),
    ([(0, 10, 0, True, 1_000, 100, 100, 0, 0)], ("cancel", 1, 2)),
    ([(2, 100, 30, False, 2_000, 500, 100, 0, 3), (2, 100, 31, True, 2_500, 400, 600, 0, 0)],
     None),
    ([(2, 100, 3, False, 3_000, 300, 300, 1, 0), (2, 100, 45, True, 800, 80, 200, 0, 0)], None),
    ([(2, 100, 50, False, 700, 70, 500, 0, 1)], None),
]  # fmt: skip


def _rate_in_batches(batches, promotion: int) -> list[set[tuple[int, datetime]]]:
    """March's usage ingested and rated by the rate stage batch by batch, each batch's
    change made and rated after it; per rating, the (tenant id, hour) cells it rated from a
    state stored inside the hour (MonthRating.resumed), of March's ratings."""
    for model in (RatedUsage, RatedUsageMonth, RatedHour, RatedHourPrefix, RatedTenantMonth, RatingPending, UsageEvent, EventKey,
                  HourlyUsage, DailyUsage, FoldPending, PromotionalCredit, Reservation):  # fmt: skip
        model.objects.all().delete()
    Price.objects.filter(effective_from__gte=MARCH).delete()
    Contract.objects.filter(effective_from__gte=MARCH).delete()
    if not Tenant.objects.exists():
        _pricing()
        _tenants(["paid", "allowance", "tiers", "trial", "none"])
    tenants = list(Tenant.objects.order_by("pk"))
    if promotion:
        promotion_grant(tenant=tenants[0], amount=Decimal(promotion) / 10, currency="USD",
                        effective_from=MARCH)  # fmt: skip
    resumed: list[set[tuple[int, datetime]]] = []

    def rate(**kwargs):
        rating = month_rate(**kwargs)
        if kwargs["month_start"] == MARCH:
            resumed.append(set(rating.resumed))
        return rating

    with patch("billing.services.rating.month_rate", side_effect=rate):
        _batches_rate(batches, tenants)
    return resumed


def _batches_rate(batches, tenants: list[Tenant]) -> None:
    number = 0
    for usage, change in batches:
        events = []
        for tenant, hour, minute, small, input_tokens, output, ttft, written, thought in usage:
            number += 1
            events.append({
                "id": f"e{number}",
                "tenant": tenants[tenant].slug,
                "model": "small" if small else "llama-70b",
                "time": (MARCH + timedelta(hours=hour, minutes=minute)).isoformat(),
                "input_tokens": input_tokens,
                "cached_tokens": input_tokens // 4,
                "cache_write_tokens": (input_tokens - input_tokens // 4) * written // 4,
                "output_tokens": output,
                "reasoning_tokens": output * thought // 4,
                "ttft_ms": ttft,
                "service_tier": TIERS[(minute + hour) % 4],
            })  # fmt: skip
        _ingest(events)
        rated_usage_update()
        _change(change, tenants)
        rated_usage_update()


@given(batches=batches_strategy, promotion=st.integers(0, 30))
@example(batches=CROSSING, promotion=5)
@example(batches=BUSY, promotion=3)
@example(batches=RESUMED, promotion=3)
@example(batches=RESERVED, promotion=0)
@settings(
    max_examples=25 if SOAK else 10,  # about 0.45 s of CPU each
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_incremental_rating_equals_a_whole_month_rating(db, batches, promotion):
    """Usage arrives in batches (late events among them), prices, contracts and credits
    (some expiring mid-hour) change in between, and each batch is rated incrementally from
    its first changed hour, a split hour's events read only up to where its bounds are
    settled and the rest rated from the rollups, or from the state stored inside the hour
    where the last rating left it: the stored rated usage equals a whole-month rating that
    rates every split hour's events one by one, per hour before promotions, and the month's
    promotions, lines and totals equal it per month."""
    _rate_in_batches(batches, promotion)
    _assert_as_a_whole_month()


def test_a_busy_hour_is_rated_from_where_the_last_rating_left_it(db):
    """The busy hour filled by batches (RESUMED, RESERVED): the ratings after the first
    batch's rate it from the state stored inside it, but a tenant's after its late event
    before that state, and the result equals a whole-month rating."""
    resumed = _rate_in_batches(RESUMED, promotion=3)
    tenants = list(Tenant.objects.order_by("pk"))
    busy = MARCH + timedelta(hours=100)
    allowance, tiers = (tenants[1].pk, busy), (tenants[2].pk, busy)
    # Batch 1: rated from the hour's start; the credit (queued) expires inside an hour whose
    # state has no cut for it: the month rated again from its start (MissingCut), twice.
    assert resumed == [set(), set(), set(), {allowance, tiers}, {tiers}, {allowance, tiers}]
    _assert_as_a_whole_month()

    resumed = _rate_in_batches(RESERVED, promotion=0)
    # Batches 1 and 2: rated from the hour's start, then from the reservation's first hour
    # and from its end (queued).
    assert resumed == [set(), set(), set(), set(), {tiers}, set(), {tiers}]
    assert RatedUsage.objects.filter(tenant=tenants[2], hour=busy, covered=True).exists()
    _assert_as_a_whole_month()


def _assert_as_a_whole_month() -> None:
    tenants = list(Tenant.objects.order_by("pk"))
    # No free token forfeited: the allowance tenant's month holds exactly its 60,000 free
    # tokens once its usage on demand reaches them (what its reservations cover is outside
    # the allowance, kpis.md 3d), the event that crossed them split.
    used = sum(e.input_tokens + e.output_tokens for e in UsageEvent.objects.filter(
        tenant=tenants[1], is_error=False))  # fmt: skip
    covered = RatedUsage.objects.filter(tenant=tenants[1], covered=True)
    used -= sum(r.input_tokens + r.output_tokens for r in covered)
    free = RatedUsage.objects.filter(tenant=tenants[1], sale="allowance")
    assert sum(r.input_tokens + r.output_tokens for r in free) == min(used, 60_000)

    fresh = _fresh(MARCH)
    stored = {
        (r.tenant_id, r.deployment_id, r.hour.astimezone(UTC), r.sale, r.service_tier, r.covered): r
        for r in RatedUsage.objects.all()
    }
    assert set(stored) == set(fresh)
    tolerance = Decimal("1e-11")
    for key, cell in fresh.items():
        row = stored[key]
        for name in ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens",
                     "reasoning_tokens"):  # fmt: skip
            assert getattr(row, name) == cell[name], (key, name)
        for name in ("compliant_input_tokens", "compliant_cached_tokens",
                     "compliant_output_tokens"):  # fmt: skip
            assert abs(Fraction(getattr(row, name)) - Fraction(cell[name])) < 1e-11, (key, name)
        for name in ("list_value", "realized"):
            assert abs(getattr(row, name) - cell[name]) < tolerance, (key, name)

    _assert_month_totals()

    whole = month_rate(month_start=MARCH, settle=False)
    months = {row.tenant_id: row for row in RatedTenantMonth.objects.filter(month_start=MARCH)}
    assert set(whole.rated) | set(whole.errors) <= set(months)  # and tenants of no tokens
    for tenant_id, rated in whole.rated.items():
        month = months[tenant_id]
        assert month.error == ""
        assert abs(month.promotions - rated.promotion_amount) < tolerance
        assert month.usage_amount == sum(
            (line.amount for line in rated.lines if line.kind in BASE_KINDS), Decimal(0)
        )
        assert month.minimum_shortfall == rated.minimum_shortfall
        billed = month_billed(tenant=Tenant.objects.get(pk=tenant_id), month_start=MARCH)
        assert billed.lines == rated.lines  # to the cent, line by line
        assert [(p.credit_id, p.billed_amount) for p in billed.promotions] == [
            (p.credit_id, p.billed_amount) for p in rated.promotions
        ]
        paid = [row for row in stored.values() if row.tenant_id == tenant_id and row.sale == "paid"]
        after = sum((r.realized for r in paid), Decimal(0)) - sum(
            (r.realized * month.promotion_rate for r in paid if not r.covered), Decimal(0)
        )
        assert abs(after - rated.realized_after_promotions) < Decimal("0.000001")
    with patch("billing.services.rating.month_rate", wraps=month_rate) as rating:
        rated_usage_update()  # nothing changed: nothing is rated again
    assert not rating.called


@pytest.mark.both_backends
def test_the_month_totals_are_the_stored_rows_summed_and_the_upgrade_fills_them(db):
    """Batches rated one after another (a busy hour's, late events, a credit expiring inside
    it, a reservation cancelled: RESUMED then RESERVED) leave the month totals equal to the
    rated usage rows summed, exactly, on either database; billing's migration 0017 computes
    the same totals from the rows when there were none."""
    from importlib import import_module

    from django.apps import apps

    _rate_in_batches(RESUMED, promotion=3)
    _assert_month_totals()
    _rate_in_batches(RESERVED, promotion=0)
    _assert_month_totals()
    assert RatedUsageMonth.objects.filter(covered=True).exists()
    RatedUsageMonth.objects.all().delete()
    import_module("billing.migrations.0017_rated_usage_month").month_totals(apps, None)
    _assert_month_totals()


MONTH_CELL = ("tenant_id", "month_start", "project_id", "deployment_id", "sale", "service_tier",
              "covered")  # fmt: skip
SUMS = ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens",
        "compliant_input_tokens", "compliant_cached_tokens", "compliant_output_tokens",
        "list_value", "contract_discount", "tier_discount", "realized")  # fmt: skip


def _assert_month_totals() -> None:
    """The month totals the rate stage keeps (RatedUsageMonth) are the stored rated usage rows
    summed per tenant, month, project, deployment, sale, service tier and coverage, exactly:
    how many and every sum."""
    summed: dict[tuple, list] = {}
    for row in RatedUsage.objects.all():
        sums = summed.setdefault(tuple(getattr(row, n) for n in MONTH_CELL), [0] * 13)
        for index, value in enumerate((1, *(getattr(row, n) for n in SUMS))):
            sums[index] += value
    totals = {
        tuple(getattr(row, n) for n in MONTH_CELL): [row.rows, *(getattr(row, n) for n in SUMS)]
        for row in RatedUsageMonth.objects.all()
    }
    assert totals == summed


@pytest.mark.both_backends
def test_a_version_dated_after_a_month_leaves_the_month_rated_as_it_was(db):
    """A month is rated with the versions that take effect before it ends: April's price and
    contract rate no March usage again; a price from March 1 rates March again with it."""
    _pricing()
    (tenant,) = _tenants(["paid"])
    _ingest(_events([tenant], 3))  # March 1: llama-70b 300 output tokens, small 301 and 302
    rated_usage_update()
    small = ServedModel.objects.get(slug="small")

    before = _sum("list_value")
    with patch("billing.services.rating.month_rate", wraps=month_rate) as rating:
        price_create(model=small, token_class="output", per_million=Decimal("3.0"),
                     currency="USD", effective_from=APRIL)  # fmt: skip
        contract_create(tenant=tenant, kind="paid", discount_pct=Decimal(50), currency="USD",
                        effective_from=APRIL)  # fmt: skip
        rated_usage_update()
    assert not rating.called
    assert _sum("list_value") == before

    with patch("billing.services.rating.month_rate", wraps=month_rate) as rating:
        price_create(model=small, token_class="output", per_million=Decimal("3.0"),
                     currency="USD", effective_from=MARCH)  # fmt: skip
        rated_usage_update()
    assert rating.call_count == 1
    # small's 603 output tokens at 3.00 instead of 2.50 per million
    assert _sum("list_value") - before == Decimal(603) * Decimal("0.5") / 1_000_000


@pytest.mark.both_backends
def test_a_pricing_write_asks_for_the_rate_stage_which_rates_it_in_once_it_commits(
    db, django_capture_on_commit_callbacks
):
    """A price or a promotion written for a month already rated enters billing's queue and
    asks for the rate stage; once the write commits the stage (eager here) rates it in."""
    _pricing()
    (tenant,) = _tenants(["paid"])
    _ingest(_events([tenant], 3))
    rated_usage_update()
    before = _sum("list_value")

    with django_capture_on_commit_callbacks(execute=True):
        price_create(model=ServedModel.objects.get(slug="small"), token_class="output",
                     per_million=Decimal("3.0"), currency="USD", effective_from=MARCH)  # fmt: skip
    assert _sum("list_value") - before == Decimal(603) * Decimal("0.5") / 1_000_000
    assert RatedTenantMonth.objects.get().promotions == 0

    with django_capture_on_commit_callbacks(execute=True):
        promotion_grant(tenant=tenant, amount=Decimal("0.0001"), currency="USD",
                        effective_from=MARCH)  # fmt: skip
    assert abs(RatedTenantMonth.objects.get().promotions - Decimal("0.0001")) < Decimal("1e-11")


def _sum(name: str) -> Decimal:
    return sum(RatedUsage.objects.values_list(name, flat=True), Decimal(0))


@pytest.mark.both_backends
def test_new_usage_in_an_hour_rates_that_hour_resuming_from_the_hour_before(db):
    """30 events of March 1–3 stay within the 60,000-token allowance (39,480 tokens). One
    more in the last hour with usage (34,200 tokens) crosses it: only that hour is read and
    rated again, from the running totals stored with the hour before, and the event is split
    there: the 20,520 tokens left free (0.6 of each class), the other 13,680 paid (small:
    9,600 input at 0.6, 80 cached at 0.15, 4,000 output at 2.5 per million)."""
    _pricing()
    (tenant,) = _tenants(["allowance"])
    _ingest(_events([tenant], 30))
    rated_usage_update()
    states = list(RatedHour.objects.order_by("hour").values_list("hour", "consumed", "paid_tokens"))
    last_hour = states[-1][0].astimezone(UTC)
    assert states[-1][1:] == (39_480, 0)

    late = {"id": "late", "tenant": tenant.slug, "model": "small", "input_tokens": 24_200,
            "cached_tokens": 200, "output_tokens": 10_000, "ttft_ms": 100,
            "time": (last_hour + timedelta(minutes=59)).isoformat()}  # fmt: skip
    _ingest([late])
    with patch("billing.selectors.rating.inputs.hourly_rows", wraps=hourly_rows) as rows:
        assert rated_usage_update() == 1
    assert rows.call_args.args[0] == last_hour  # the hour, not the month
    after = list(RatedHour.objects.order_by("hour").values_list("hour", "consumed", "paid_tokens"))
    assert after[:-1] == states[:-1]
    assert after[-1] == (states[-1][0], 73_680, 13_680)
    paid = RatedUsage.objects.get(sale="paid")
    assert (paid.input_tokens, paid.cached_tokens, paid.output_tokens) == (9_680, 80, 4_000)
    assert (paid.compliant_input_tokens, paid.compliant_output_tokens) == (9_680, 4_000)
    free = RatedUsage.objects.filter(tenant=tenant, sale="allowance")
    assert sum(r.input_tokens + r.output_tokens for r in free) == 60_000  # none forfeited
    month = RatedTenantMonth.objects.get()
    # 0.6 of the event's list value 0.03943 (14,400 + 30 + 25,000 per million)
    assert month.realized == Decimal("0.015772") == paid.realized
    assert month.usage_amount == Decimal("0.02")  # lines of 0.00576, 0.000012, 0.01

    # A credit rates no hour again: the month's last hour is read (none there), and the
    # month's promotions are worked out from the state of the hour before.
    with patch("billing.selectors.rating.inputs.hourly_rows", wraps=hourly_rows) as rows:
        promotion_grant(tenant=tenant, amount=Decimal("0.01"), currency="USD",
                        effective_from=MARCH)  # fmt: skip
        assert rated_usage_update() == 1
    assert rows.call_args.args[0] == APRIL - timedelta(hours=1)
    assert (
        list(RatedHour.objects.order_by("hour").values_list("hour", "consumed", "paid_tokens"))
        == after
    )
    month = RatedTenantMonth.objects.get()
    assert month.promotions == Decimal("0.01")
    rate = Decimal("0.634034998731930002536139994927")  # 0.01 / 0.015772 (SQLite: a float)
    assert abs(month.promotion_rate - rate) < Decimal("1e-15")
    assert [line[8] for line in month.lines] == ["0.01", "0.00", "0.01", "-0.01"]  # amounts


# Per model: (R_ref, w_in) as _pricing sets them; list prices per million of every model.
MODELS = {"llama-70b": (Fraction(1000), Fraction(0)), "small": (Fraction(2500), Fraction(1, 5))}
PRICES = {"input": Fraction("0.6"), "cached": Fraction("0.15"), "output": Fraction("2.5")}


def _reference(events: list[dict], tenants: list[Tenant]) -> tuple[Fraction | None, ...]:
    """s and ρ of March worked out afresh from the raw events by kpis.md section 3, not by
    the rating: each tenant's events in (time, source, id) order; the tokens left in its
    allowance free, the rest paid, each paid token in the tier of the paid tokens before
    it; an event's std and list value split in proportion to its tokens."""
    kinds = {tenant.slug: tenant.slug.split("-")[0] for tenant in tenants}
    compliant_std = compliant_paid_std = list_value = realized = Fraction(0)
    for slug, kind in kinds.items():
        terms = CONTRACTS[kind] or {}
        allowance = terms.get("free_tokens_per_month", 0)
        keep = 1 - Fraction(terms.get("discount_pct", 0)) / 100
        tiers = sorted((t["from_tokens"], Fraction(t["discount_pct"]) / 100)
                       for t in terms.get("volume_tiers", []))  # fmt: skip
        consumed = paid = 0
        mine = sorted(
            (e for e in events if e["tenant"] == slug), key=lambda e: (e["time"], e["id"])
        )
        for e in mine:
            r_ref, w_in = MODELS[e["model"]]
            total = e["input_tokens"] + e["output_tokens"]
            std = (e["output_tokens"] + w_in * (e["input_tokens"] - e["cached_tokens"])) / r_ref
            value = (
                (e["input_tokens"] - e["cached_tokens"]) * PRICES["input"]
                + e["cached_tokens"] * PRICES["cached"] + e["output_tokens"] * PRICES["output"]
            ) / 1_000_000  # fmt: skip
            sold = 0
            if terms.get("kind") == "paid":
                sold = total - min(max(allowance - consumed, 0), total)
            consumed += total
            within = e["ttft_ms"] <= SLO_TTFT
            compliant_std += std if within else 0
            if not sold:
                continue
            compliant_paid_std += std * Fraction(sold, total) if within else 0
            list_value += value * Fraction(sold, total)
            # The paid tokens paid+1 .. paid+sold, each in the tier of the paid tokens before it.
            starts = [0, *(start for start, _ in tiers), paid + sold]
            for low, high in pairwise(starts):
                tokens = max(min(high, paid + sold) - max(low, paid), 0)
                tier = max((pct for start, pct in tiers if start <= max(low, paid)), default=0)
                realized += value * Fraction(tokens, total) * keep * (1 - tier)
            paid += sold
    return (
        compliant_paid_std / compliant_std if compliant_std else None,
        realized / list_value if list_value else None,
    )


@given(usage=st.lists(event_strategy, min_size=1, max_size=12))
@example(usage=[(1, 10, 0, True, 20_000, 9_000, 200, 0, 0)] * 2
         + [(1, 11, 0, False, 20_000, 9_000, 300, 0, 0), (2, 12, 0, True, 20_000, 9_000, 800, 0, 0),
            (2, 12, 30, False, 19_000, 8_000, 100, 0, 0)])  # fmt: skip
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_sell_through_and_price_realization_equal_an_independent_computation(db, usage):
    """Events crossing the allowance and the tiers: the measured s and ρ (from billing's rated
    usage and metering's rollups) equal `_reference`'s, to the digits stored."""
    for model in (RatedUsage, RatedUsageMonth, RatedHour, RatedHourPrefix, RatedTenantMonth, RatingPending, UsageEvent, EventKey,
                  HourlyUsage, DailyUsage, FoldPending):  # fmt: skip
        model.objects.all().delete()
    if not Tenant.objects.exists():
        _pricing()
        _tenants(["paid", "allowance", "tiers", "trial", "none"])
    tenants = list(Tenant.objects.order_by("pk"))
    events = [
        {"id": f"e{number}", "tenant": tenants[tenant].slug,
         "model": "small" if small else "llama-70b",
         "time": (MARCH + timedelta(hours=hour, minutes=minute)).isoformat(),
         "input_tokens": input_tokens, "cached_tokens": input_tokens // 4,
         "output_tokens": output, "ttft_ms": ttft}
        for number, (tenant, hour, minute, small, input_tokens, output, ttft, _, _)
        in enumerate(usage)
    ]  # fmt: skip
    _ingest(events)
    rated_usage_update()
    reference = _reference(
        [{**e, "time": datetime.fromisoformat(e["time"])} for e in events], tenants
    )  # fmt: skip

    kpis = FactoryData(start=MARCH, end=APRIL).kpis(scope="factory", start=MARCH, end=APRIL)

    for measured, expected in zip((kpis.sell_through, kpis.price_realization), reference,
                                  strict=True):  # fmt: skip
        if expected is None:
            assert measured is None
        else:
            assert measured is not None and abs(Fraction(measured) - expected) < 1e-9


@pytest.mark.both_backends
def test_the_upgrade_rates_the_open_months_again_and_never_a_closed_one(db):
    """Migration 0012 (boundaries split events): with February closed, the rate stage rates
    March again from its start, and February as it was closed; with none closed, every
    month."""
    _pricing()
    (tenant,) = _tenants(["allowance"])
    february = MARCH - timedelta(days=28)
    _ingest([{**event, "id": f"feb-{event['id']}",
              "time": (datetime.fromisoformat(event["time"]) - timedelta(days=28)).isoformat()}
             for event in _events([tenant], 3)] + _events([tenant], 3))  # fmt: skip
    rated_usage_update()
    month_close(month=february)
    upgrade = import_module("billing.migrations.0012_boundaries_split")

    upgrade._rate_open_months_again(django_apps, None)
    with patch("billing.services.rating.month_rate", wraps=month_rate) as rating:
        rated_usage_update()
    assert [call.kwargs["month_start"] for call in rating.call_args_list] == [MARCH]
    assert RatingPending.objects.count() == 0

    ClosedMonth.objects.all().delete()
    upgrade._rate_open_months_again(django_apps, None)
    with patch("billing.services.rating.month_rate", wraps=month_rate) as rating:
        rated_usage_update()
    assert [call.kwargs["month_start"] for call in rating.call_args_list] == [february, MARCH]
