"""Pages read whole-day periods from the factory's day snapshots (the pools' stored sums)
and get the same KPIs as measuring the period from rollups and rating, without touching
a rollup row when every day was measured."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from unittest.mock import patch

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.selectors.rating.inputs import month_rate
from billing.services.pricing import contract_create, price_create
from flywheel.models import KpiSnapshot
from flywheel.selectors.kpis import period_measure
from flywheel.selectors.measurement import FactoryData
from flywheel.services.kpis import snapshots_measure
from metering.domain.usage.validation import validate_events
from metering.models import Pool, ServedModel
from metering.services.factory import CapacityIn, capacity_upsert
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal.models import Tenant
from portal.pipeline import MEASURE, stages_run
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends
D = datetime(2026, 3, 2, tzinfo=UTC)
DAY = timedelta(days=1)
FIGURES = (
    "calendar_gpu_seconds", "available_gpu_seconds", "busy_gpu_seconds", "std_gpu_seconds",
    "availability", "occupancy", "efficiency", "tef", "sla_delivery", "sell_through",
    "price_realization", "tfi", "output_tokens", "paid_output_tokens", "tps",
    "theoretical_tps", "list_value", "realized_revenue",
)  # fmt: skip


def _capacity(pool: Pool, at: datetime, healthy: int, busy: int) -> CapacityIn:
    return CapacityIn(
        pool=pool,
        time=at,
        gpus_installed=pool.gpu_count,
        gpus_healthy=healthy,
        gpus_busy=busy,
    )


@pytest.fixture
def factory(db):
    """Two pools over three days: GPUs failing in the night of day 2 on one pool, the
    other without telemetry; a paid tenant whose allowance runs out on day 2 and one on
    trial; SLO misses."""
    make_deployment(pool="h100-a", gpus=8, ttft=400)
    make_deployment(model="small", pool="l40s", gpus=4, r_ref="2500", w_in="0.2")
    h100 = Pool.objects.get(slug="h100-a")
    capacity_upsert(
        samples=[
            _capacity(h100, D, 8, 6),
            _capacity(h100, D + DAY + timedelta(hours=22), 6, 5),
            _capacity(h100, D + 2 * DAY + timedelta(hours=3), 8, 7),
        ]
    )
    for model in ServedModel.objects.all():
        for token_class in ("input", "cached_input", "output"):
            price_create(model=model, token_class=token_class, per_million=Decimal("2.5"),
                         currency="USD", effective_from=D - 30 * DAY)  # fmt: skip
    items = []
    for slug, kind in (("paid", "paid"), ("trial", "trial")):
        tenant = Tenant.objects.create(slug=slug, name=slug.title())
        contract_create(tenant=tenant, kind=kind, free_tokens_per_month=40_000,
                        discount_pct=Decimal("12.5"), currency="USD",
                        effective_from=D - 30 * DAY)  # fmt: skip
        items += [
            {"id": f"{slug}-{i}", "tenant": slug, "model": "llama-70b" if i % 3 else "small",
             "time": (D + timedelta(minutes=37 * i)).isoformat(),
             "input_tokens": 900 + 7 * i, "cached_tokens": 100, "output_tokens": 300 + i,
             "ttft_ms": 150 + 3 * i}
            for i in range(110)  # 110 × 37 min: into the third day
        ]  # fmt: skip
    events, errors = validate_events(items=items, now=D + 4 * DAY)
    assert not errors
    usage_ingest(events=events, received_at=D + 4 * DAY)
    stages_run(before=MEASURE)  # folded and rated, as the stages would


def _assert_same(measured, live) -> None:
    for figure in FIGURES:
        a, b = getattr(measured, figure), getattr(live, figure)
        if isinstance(a, Decimal) and b:
            assert abs(a - b) / abs(b) < Decimal("1e-25"), figure
        else:
            assert a == b, figure
    assert measured.telemetry == live.telemetry


def _assert_matches_live(measured, start, end) -> None:
    data = FactoryData(start=start, end=end, snapshots=False)
    _assert_same(measured.factory, data.kpis(scope="factory", start=start, end=end))
    for pool, _, kpis in measured.pools:
        _assert_same(kpis, data.kpis(scope=pool.slug, start=start, end=end))
    assert [pool.slug for pool, _, _ in measured.pools] == ["h100-a", "l40s"]


def _hits_rollups(captured) -> bool:
    return any("metering_hourlyusage" in q["sql"] for q in captured.captured_queries)


def test_days_read_from_snapshots_equal_the_live_measurement(factory):
    snapshots_measure(start=D, end=D + 3 * DAY, now=D + 4 * DAY)

    with CaptureQueriesContext(connection) as captured:
        measured = period_measure(start=D, end=D + 3 * DAY)

    _assert_matches_live(measured, D, D + 3 * DAY)
    assert not _hits_rollups(captured)  # read one snapshot row per day, nothing else heavy
    assert len(captured.captured_queries) <= 5
    assert measured.factory.paid_output_tokens > 0
    assert measured.factory.paid_output_tokens < measured.factory.output_tokens / 2
    assert measured.pools[0][2].telemetry == "measured"
    assert measured.pools[1][2].telemetry == "assumed"
    assert measured.factory.telemetry == "partial"
    assert measured.measured_at == D + 4 * DAY


def test_a_day_without_snapshot_is_measured_for_the_request(factory):
    snapshots_measure(start=D, end=D + 3 * DAY, now=D + 4 * DAY)
    KpiSnapshot.objects.filter(scope="factory", period_kind="day", period_start=D + DAY).delete()

    with CaptureQueriesContext(connection) as captured:
        measured = period_measure(start=D, end=D + 3 * DAY)

    _assert_matches_live(measured, D, D + 3 * DAY)
    assert _hits_rollups(captured)


def test_a_pool_added_after_the_snapshots_makes_them_unusable(factory):
    snapshots_measure(start=D, end=D + 3 * DAY, now=D + 4 * DAY)
    make_deployment(model="late", pool="b200", gpus=2)

    measured = period_measure(start=D, end=D + 3 * DAY)

    data = FactoryData(start=D, end=D + 3 * DAY, snapshots=False)
    _assert_same(measured.factory, data.kpis(scope="factory", start=D, end=D + 3 * DAY))
    assert measured.pools[0][0].slug == "b200"
    assert measured.measured_at is None


def test_the_day_in_progress_is_measured_live_beside_the_closed_days(factory):
    now = D + 2 * DAY + timedelta(hours=5, minutes=30)
    snapshots_measure(start=D, end=now, now=now)
    to = D + 2 * DAY + timedelta(hours=5)  # the window measured: to the last whole hour

    with CaptureQueriesContext(connection) as captured:
        measured = period_measure(start=D, end=to)

    _assert_matches_live(measured, D, to)
    assert measured.end == to
    assert measured.measured_at == now  # two closed days came from their snapshots
    # Production is read from the rollups of the day in progress only (its rating reads
    # the month so far: the free allowance is used in time order from the 1st).
    (production,) = [q["sql"] for q in captured.captured_queries if 'AS "co"' in q["sql"]]
    assert "2026-03-04 00:00:00" in production
    assert "2026-03-02" not in production and "2026-03-03" not in production


def test_other_periods_are_measured_live(factory):
    start, end = D + timedelta(hours=5), D + DAY + timedelta(hours=7)
    snapshots_measure(start=D, end=D + 3 * DAY, now=D + 4 * DAY)

    with CaptureQueriesContext(connection) as captured:
        measured = period_measure(start=start, end=end)

    _assert_matches_live(measured, start, end)
    assert _hits_rollups(captured)
    assert measured.measured_at is None


def _reads_rollups_or_events(captured) -> list[str]:
    """Reads of hourly rollups or events, but for the one asking which months hold usage."""
    tables = ("metering_hourlyusage", "metering_usageevent")
    return [
        q["sql"]
        for q in captured.captured_queries
        if any(t in q["sql"] for t in tables) and not q["sql"].startswith("SELECT DISTINCT")
    ]


def test_a_closed_month_is_read_from_snapshots_and_rated_months_without_rating(factory):
    """March over and measured, its tenant-months rated by billing's job: its KPIs come from
    the day snapshots and its TFOM revenue adjustments (the minimum shortfall) from the
    rated tenant-months, equal to measuring it again from the rollups and the rating; the
    rating engine does not run and no hourly rollup or event is read (but to find which
    months hold usage)."""
    from billing.selectors.rating.rated_usage import tenant_month_totals

    tenant = Tenant.objects.get(slug="paid")
    contract_create(tenant=tenant, kind="paid", free_tokens_per_month=40_000,
                    committed_minimum=Decimal("1000"), currency="USD",
                    effective_from=D - 29 * DAY)  # fmt: skip
    march, april = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
    tenant_month_totals(month_start=march)  # billing's stage, before the measurement
    snapshots_measure(start=march, end=april, now=april + DAY)
    live = FactoryData(start=march, end=april, snapshots=False)
    assert live.revenue_adjustments(start=march, end=april)[0] > 0  # a shortfall is owed

    refused = AssertionError("the rating engine ran")
    with (
        CaptureQueriesContext(connection) as captured,
        patch("billing.selectors.rating.inputs.rate_month", side_effect=refused),
    ):
        data = FactoryData(start=march, end=april)
        measured = period_measure(start=march, end=april)
        adjustments = data.revenue_adjustments(start=march, end=april)

    assert _reads_rollups_or_events(captured) == []
    assert adjustments == live.revenue_adjustments(start=march, end=april)
    _assert_matches_live(measured, march, april)


def test_a_rated_month_is_rated_again_when_its_usage_changes_and_only_that_tenant(factory):
    """The rate stage rates again the tenant-months metering's change log names: late usage
    of one tenant rates that tenant's month again, not the other's, and billing's change
    log says in which hours its rated usage changed."""
    from billing.models import RatedChange, RatedUsage
    from billing.selectors.rating.rated_usage import tenant_month_totals
    from billing.services.rating import rated_usage_update

    def rated_hours():
        return set(RatedUsage.objects.values_list("tenant_id", "hour", "sale", "realized"))

    march = datetime(2026, 3, 1, tzinfo=UTC)
    first = tenant_month_totals(month_start=march)
    rated_before = rated_hours()
    paid, trial = (Tenant.objects.get(slug=slug).pk for slug in ("paid", "trial"))
    assert first[paid].usage_amount > 0 and first[trial].usage_amount == 0
    RatedChange.objects.all().delete()

    late, errors = validate_events(
        items=[{"id": "late-1", "tenant": "paid", "model": "small",
                "time": (D + DAY + timedelta(hours=7, minutes=5)).isoformat(),
                "input_tokens": 5_000_000, "output_tokens": 1_000_000}],
        now=D + 4 * DAY,
    )  # fmt: skip
    assert not errors
    usage_ingest(events=late, received_at=D + 4 * DAY)
    usage_fold()
    with patch("billing.services.rating.month_rate", wraps=month_rate) as rating:
        second = tenant_month_totals(month_start=march)

    assert second[paid].usage_amount > first[paid].usage_amount  # 6 M more tokens, paid
    assert second[trial] == first[trial]
    assert [t.pk for t in rating.call_args.kwargs["tenants"]] == [paid]  # the changed one only
    (change,) = RatedChange.objects.all()
    changed = sorted(hour for _, hour, _, _ in rated_before ^ rated_hours())
    assert changed[0] == D + DAY + timedelta(hours=7)  # the late event's hour
    assert (change.tenant_id, change.start, change.end) == (
        paid,
        changed[0],
        changed[-1] + timedelta(hours=1),
    )

    with patch("billing.services.rating.month_rate", wraps=month_rate) as rating:
        assert rated_usage_update() == 0  # nothing changed
    assert not rating.called


def test_a_rated_change_measures_again_the_days_of_its_hours_and_their_month(db):
    """Usage rated again from 3 March 17:00 to 10 March 05:00 (a late event moved the free
    allowance of the later hours with usage): the measure stage measures those days and
    March again; the rest of March, February and April stay as they were."""
    from billing.models import RatedChange
    from flywheel.services.kpis import snapshots_update
    from metering.models import Pool
    from portal.pipeline import log_append

    make_deployment(pool="h100-a", gpus=8)
    Pool.objects.update(in_service_from=datetime(2026, 2, 1, tzinfo=UTC))
    tenant = Tenant.objects.create(slug="paid", name="Paid")
    then = datetime(2026, 4, 8, tzinfo=UTC)

    def day_row(start):
        return KpiSnapshot(scope="factory", period_kind="day", period_start=start,
                           period_end=start + DAY, telemetry="measured", values={},
                           is_closed=True, measured_at=datetime(2026, 4, 7, tzinfo=UTC))  # fmt: skip

    days = [datetime(2026, 2, 27, tzinfo=UTC) + i * DAY for i in range(40)]  # Feb 27 → Apr 7
    KpiSnapshot.objects.bulk_create([day_row(day) for day in days])
    snapshots_update(now=then)  # the stage's cursors start past nothing
    log_append(
        RatedChange,
        [
            RatedChange(
                tenant=tenant,
                start=datetime(2026, 3, 3, 17, tzinfo=UTC),
                end=datetime(2026, 3, 10, 5, tzinfo=UTC),
            )
        ],
        log="billing.rated",
    )

    snapshots_update(now=then)

    measured = set(
        KpiSnapshot.objects.filter(
            scope="factory", period_kind="day", measured_at=then
        ).values_list("period_start", flat=True)
    )
    march_3_to_10 = {day for day in days if day.month == 3 and 3 <= day.day <= 10}
    assert {day.astimezone(UTC) for day in measured} == march_3_to_10
    month = KpiSnapshot.objects.get(scope="factory", period_kind="month")
    assert (month.period_start, month.measured_at, month.is_closed) == (
        datetime(2026, 3, 1, tzinfo=UTC),
        then,
        True,
    )


def test_the_measure_stage_does_not_measure_an_unchanged_day_again(factory):
    """Two runs with nothing new (the rate stage's cut where it was): the second writes
    nothing; a late event (folded and rated), a new price version (rated), or a cut that
    moved on (the rate ran again), and the days they reach are measured again."""
    from billing.services.rating import rated_usage_update
    from flywheel.services.kpis import snapshots_update
    from portal.clock import clock_set

    now = D + 2 * DAY + timedelta(hours=5, minutes=10)
    clock_set(now)
    rated_usage_update()  # the cut: 05:10
    first = snapshots_update(now=now)
    again = snapshots_update(now=now + timedelta(minutes=15))
    late, errors = validate_events(
        items=[{"id": "late-2", "tenant": "paid", "model": "small", "time": (D + DAY).isoformat(),
                "input_tokens": 10, "output_tokens": 10}],
        now=now,
    )  # fmt: skip
    assert not errors
    usage_ingest(events=late, received_at=now)
    usage_fold()
    rated_usage_update()
    after_usage = snapshots_update(now=now + timedelta(minutes=30))
    price_create(model=ServedModel.objects.get(slug="small"), token_class="output",
                 per_million=Decimal("3"), currency="USD", effective_from=D + DAY)  # fmt: skip
    rated_usage_update()
    after_price = snapshots_update(now=now + timedelta(minutes=45))
    clock_set(now + timedelta(minutes=50))
    usage_fold()  # the beat's runs with nothing new: the cut moves on to 06:00
    rated_usage_update()
    moved = snapshots_update(now=now + timedelta(minutes=50))

    assert first > 0
    assert again == 0
    assert after_usage > 0 and after_price > 0
    assert moved > 0  # the open day and month measured to the new cut
