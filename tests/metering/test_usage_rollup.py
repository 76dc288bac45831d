"""Rollups equal a direct aggregation of the raw events, whatever the arrival order; the fold
adds each event once and never rebuilds an hour from the events it can see. The 5-minute
buckets (the burn rate's data) sum to their hours, and are kept 8 days."""

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import pairwise

import pytest
from django.db import connection
from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncHour
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metering.domain.usage.rollup import SUM_FIELDS
from metering.domain.usage.validation import validate_events
from metering.models import (
    DailyUsage,
    FiveMinuteUsage,
    FoldPending,
    HourlyUsage,
    IncompleteRawMonth,
    Pool,
    RefoldPending,
    UsageChange,
    UsageEvent,
)
from metering.services.factory import VersionSpec, deployment_version_add
from metering.services.usage import rollup as rollup_service
from metering.services.usage.changes import usage_refold
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal.clock import clock_set
from portal.models import Project, Tenant
from tests.conftest import broker_mode
from tests.metering.factories import make_deployment, make_hourly_usage

pytestmark = pytest.mark.both_backends
BASE = datetime(2026, 3, 1, tzinfo=UTC)
NOW = datetime(2026, 4, 1, tzinfo=UTC)

events_strategy = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t2"]),
        st.sampled_from(["m1", "m2"]),
        st.integers(min_value=0, max_value=3 * 24 * 60 - 1),  # minute within 3 days
        st.integers(min_value=0, max_value=5000),
        st.integers(min_value=0, max_value=2000),
        st.booleans(),
        st.one_of(st.none(), st.integers(min_value=1, max_value=4000)),
        st.sampled_from([None, "search", "eval"]),  # the tenant's project (None: none)
    ),
    min_size=1,
    max_size=60,
)


def _items(raw, offset=0):
    return [
        {
            "id": f"e{offset + i}",
            "tenant": tenant,
            "model": model,
            "time": (BASE + timedelta(minutes=minute)).isoformat(),
            "input_tokens": tokens_in,
            "cached_tokens": tokens_in // 3,
            "cache_write_tokens": tokens_in // 5,  # of the uncached two thirds
            "output_tokens": tokens_out,
            "reasoning_tokens": tokens_out // 2 if model == "m2" else 0,
            "status": "error" if failed else "ok",
            **({"ttft_ms": ttft} if ttft else {}),
            **({"project": project[0]} if project and project[0] else {}),
        }
        for i, (tenant, model, minute, tokens_in, tokens_out, failed, ttft, *project) in (
            enumerate(raw)
        )
    ]


def _ingest(items):
    events, errors = validate_events(items=items, now=NOW)
    assert not errors
    usage_ingest(events=events, received_at=NOW)


def _direct():
    ok = Q(is_error=False)
    compliant = ok & (Q(ttft_ms__isnull=True) | Q(ttft_ms__lte=2000))
    rows = (
        UsageEvent.objects.annotate(h=TruncHour("time"))
        .values("tenant_id", "deployment_id", "h", "project_id")
        .annotate(
            n=Count("id"),
            e=Count("id", filter=Q(is_error=True)),
            i=Sum("input_tokens"),
            c=Sum("cached_tokens"),
            w=Sum("cache_write_tokens"),
            o=Sum("output_tokens"),
            r=Sum("reasoning_tokens"),
            oo=Sum("output_tokens", filter=ok),
            ow=Sum("cache_write_tokens", filter=ok),
            orr=Sum("reasoning_tokens", filter=ok),
            co=Sum("output_tokens", filter=compliant),
            cr=Count("id", filter=compliant),
        )
    )
    return {
        (r["tenant_id"], r["deployment_id"], r["h"], r["project_id"]): (
            r["n"],
            r["e"],
            r["i"],
            r["c"],
            r["w"],
            r["o"],
            r["r"],
            r["oo"] or 0,
            r["ow"] or 0,
            r["orr"] or 0,
            r["co"] or 0,
            r["cr"],
        )
        for r in rows
    }


def _rolled():
    return {
        (h.tenant_id, h.deployment_id, h.hour, h.project_id): (
            h.requests,
            h.errors,
            h.input_tokens,
            h.cached_tokens,
            h.cache_write_tokens,
            h.output_tokens,
            h.reasoning_tokens,
            h.ok_output_tokens,
            h.ok_cache_write_tokens,
            h.ok_reasoning_tokens,
            h.compliant_output_tokens,
            h.compliant_requests,
        )
        for h in HourlyUsage.objects.all()
    }


@pytest.fixture
def factory(db):
    Tenant.objects.create(slug="t1", name="T1")
    Tenant.objects.create(slug="t2", name="T2")
    make_deployment(model="m1", ttft=2000)
    make_deployment(model="m2", pool="h200-a", ttft=2000)


def _five_minute_hours():
    """The 5-minute buckets summed per hour: (requests, compliant, errors)."""
    hours = {}
    for row in FiveMinuteUsage.objects.all():
        assert row.bucket.minute % 5 == 0 and row.bucket.second == 0
        key = (row.tenant_id, row.deployment_id, row.bucket.replace(minute=0))
        n, ok, err = hours.get(key, (0, 0, 0))
        hours[key] = (n + row.requests, ok + row.compliant_requests, err + row.errors)
    return hours


def _hourly_requests():
    """The hourly rows summed over the tenant's projects (5-minute buckets have none)."""
    hours = {}
    for h in HourlyUsage.objects.all():
        key = (h.tenant_id, h.deployment_id, h.hour)
        n, ok, err = hours.get(key, (0, 0, 0))
        hours[key] = (n + h.requests, ok + h.compliant_requests, err + h.errors)
    return hours


# The clock 4 days after the events' first: every event is within the 5-minute horizon.
@pytest.mark.parametrize("now", [BASE + timedelta(days=4)], indirect=True)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=events_strategy, late=events_strategy, crash=st.booleans())
def test_rollups_equal_direct_aggregation_with_late_events_and_interruptions(
    factory, now, first, late, crash, monkeypatch
):
    UsageEvent.objects.all().delete()
    HourlyUsage.objects.all().delete()
    FiveMinuteUsage.objects.all().delete()
    DailyUsage.objects.all().delete()
    FoldPending.objects.all().delete()
    from metering.models import EventKey

    EventKey.objects.all().delete()

    _ingest(_items(first))
    usage_fold()
    _ingest(_items(late, offset=1000))  # late events land in hours already rolled up
    if crash:
        with monkeypatch.context() as patch:

            def boom(**kwargs):
                raise RuntimeError("worker killed")

            patch.setattr(rollup_service, "_changes_append", lambda cells: boom())
            with pytest.raises(RuntimeError):
                usage_fold()
        assert FoldPending.objects.exists()  # nothing was claimed for good
    usage_fold()
    usage_fold()  # a second run changes nothing

    assert _rolled() == _direct()
    assert _five_minute_hours() == _hourly_requests()
    daily = {
        (d.tenant_id, d.deployment_id, d.day, d.project_id): d.output_tokens
        for d in DailyUsage.objects.all()
    }
    expected_daily = {}
    for (t, d, h, p), values in _direct().items():
        key = (t, d, h.date(), p)
        expected_daily[key] = expected_daily.get(key, 0) + values[5]
    assert daily == expected_daily
    added = _days()  # the fold adds to the days as to the hours: the same as summing again
    rollup_service.rollup_days({(t, d, day) for t, d, day, _ in daily})
    assert added == _days()
    assert Project.objects.filter(slug__in=["search", "eval"]).count() <= 4
    assert not FoldPending.objects.exists()


def _days():
    """Every column of every daily row, by its key."""
    return {
        (d.tenant_id, d.deployment_id, d.service_tier, d.day, d.project_id): (
            *(getattr(d, name) for name in SUM_FIELDS),
            d.latency_histogram,
            d.is_demo,
        )
        for d in DailyUsage.objects.all()
    }


def test_a_batch_is_queued_as_runs_of_its_own_ids_and_each_event_is_folded_once(
    factory, monkeypatch
):
    """The fold's queue names a batch's events as a run of ids no other batch's fall in; on
    PostgreSQL a batch of more new events than a block of ids is stored a block at a time
    (here blocks of 3: runs of 3, 3 and 2). A replay queues nothing; a fold that takes 4
    events at a time still folds each event once."""
    from metering.services.usage import store

    monkeypatch.setattr(store, "EVENT_ID_BLOCK", 3)
    raw = [("t1", "m1", 5 * i, 100 + i, 40 + i, i == 6, 1000) for i in range(8)]
    _ingest(_items(raw))
    _ingest(_items(raw[:2], offset=100))
    _ingest(_items(raw))  # a replay: nothing new, nothing queued

    runs = list(
        FoldPending.objects.order_by("first_id").values_list("first_id", "last_id", "events")
    )
    sizes = [3, 3, 2, 2] if connection.vendor == "postgresql" else [8, 2]
    assert [events for *_, events in runs] == sizes
    ids = sorted(UsageEvent.objects.values_list("id", flat=True))
    assert [i for first, last, _ in runs for i in ids if first <= i <= last] == ids
    assert all(a[1] < b[0] for a, b in pairwise(runs))  # never overlapping

    usage_fold(batch=4)

    assert not FoldPending.objects.exists()
    assert _rolled() == _direct()
    assert HourlyUsage.objects.get().requests == 10


def test_the_fold_reads_each_claimed_runs_events_by_their_ids_never_every_event(db):
    """SQLite plans without statistics: the fold's statements must read the claimed runs,
    then each run's events by id range, not scan every stored event for the few claimed
    (the embedded default keeps months of them). PostgreSQL's plan follows its statistics
    (goal 4 of make bench times it)."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plan: PostgreSQL chooses by its statistics")
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS fold_claimed (first_id integer PRIMARY KEY, "
            "last_id integer, time_min text, time_max text, events integer)"
        )
        rollup_service._slo_stage(cursor)
        rollup_service._sums_stage(cursor)  # nothing claimed: it sums nothing
        plans = []
        for sql in (rollup_service._sums_sql_insert(), rollup_service._five_minute_add_sql()):
            cursor.execute("EXPLAIN QUERY PLAN " + sql, ["2026-01-01"] * sql.count("%s"))
            plans.append([row[3] for row in cursor.fetchall()])

    for plan in plans:
        assert plan[0] == "SCAN p"
        assert plan[1].startswith("SEARCH e USING INDEX") and "(id>? AND id<?)" in plan[1]


@pytest.mark.integration
def test_the_fold_runs_in_a_real_worker_when_the_ingest_asks_for_it(pipeline_worker):
    """As in production: the request stores the event and asks for a fold; the worker folds
    it (the request itself writes no rollup)."""
    Tenant.objects.create(slug="t1", name="T1")
    make_deployment(model="m1")
    _ingest(_items([("t1", "m1", 5, 100, 40, False, None)]))

    deadline = time.monotonic() + 60
    while not HourlyUsage.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.2)

    assert HourlyUsage.objects.get().output_tokens == 40
    assert not FoldPending.objects.exists()


@pytest.mark.parametrize("now", [BASE + timedelta(days=6)], indirect=True)
def test_a_version_that_changes_the_slo_from_a_past_hour_folds_that_usage_again(db, now):
    """The version in force at an event's time applies to it (kpis.md): a tighter SLO from
    2 March makes the 3 March request late, not the 1 March one, nor the 5 March one that a
    later version covers. Their 5-minute buckets are counted again with their hours."""
    Tenant.objects.create(slug="t1", name="t1")
    deployment = make_deployment(model="m1", ttft=2000)
    deployment_version_add(
        deployment=deployment,
        effective_from=BASE + timedelta(days=4),
        spec=VersionSpec(r_ref=Decimal(1000), slo_ttft_ms=2000),
        by=None,
    )
    _ingest(
        [
            {"id": f"s{day}", "tenant": "t1", "model": "m1", "input_tokens": 10,
             "output_tokens": 20, "ttft_ms": 1500,
             "time": (BASE + timedelta(days=day, hours=10)).isoformat()}
            for day in (0, 2, 4)
        ]
    )  # fmt: skip
    usage_fold()
    assert _compliant_by_day() == {1: 1, 3: 1, 5: 1}

    deployment_version_add(
        deployment=deployment,
        effective_from=BASE + timedelta(days=1),
        spec=VersionSpec(r_ref=Decimal(1000), slo_ttft_ms=1000),
        by=None,
    )
    assert RefoldPending.objects.count() == 1  # 2 March on, up to the 5 March version
    usage_fold()

    assert _compliant_by_day() == {1: 1, 3: 0, 5: 1}
    assert list(
        HourlyUsage.objects.order_by("hour").values_list("compliant_output_tokens", flat=True)
    ) == [20, 0, 20]
    assert list(
        FiveMinuteUsage.objects.order_by("bucket").values_list("requests", "compliant_requests")
    ) == [(1, 1), (1, 0), (1, 1)]
    assert _five_minute_hours() == _hourly_requests()


@pytest.mark.parametrize("now", [BASE + timedelta(days=6)], indirect=True)
def test_an_hour_folded_again_keeps_a_row_per_project(db, now):
    """A refold rebuilds each project's row of the hour from its own events."""
    Tenant.objects.create(slug="t1", name="t1")
    deployment = make_deployment(model="m1", ttft=2000)
    _ingest(
        [
            {"id": f"p{i}", "tenant": "t1", "model": "m1", "input_tokens": 10,
             "output_tokens": 20 + i, "ttft_ms": 1500,
             "time": (BASE + timedelta(days=2, hours=10, minutes=i)).isoformat(), **project}
            for i, project in enumerate([{}, {"project": "search"}, {"project": "search"}])
        ]
    )  # fmt: skip
    usage_fold()
    deployment_version_add(
        deployment=deployment,
        effective_from=BASE + timedelta(days=1),
        spec=VersionSpec(r_ref=Decimal(1000), slo_ttft_ms=1000),
        by=None,
    )
    usage_fold()

    search = Project.objects.get(slug="search").pk
    rows = HourlyUsage.objects.order_by("project_id").values_list(
        "project_id", "requests", "output_tokens", "compliant_requests"
    )
    assert list(rows) == [(0, 1, 20, 0), (search, 2, 43, 0)]
    days = DailyUsage.objects.order_by("project_id").values_list("project_id", "output_tokens")
    assert list(days) == [(0, 20), (search, 43)]


def test_a_past_slo_change_is_folded_by_the_stage_its_version_asks_for(transactional_db):
    """The version and the refold it queues commit together; the fold it asks for runs once
    they have committed (eagerly here), and folds those hours again."""
    Tenant.objects.create(slug="t1", name="t1")
    deployment = make_deployment(model="m1", ttft=2000)
    _ingest(
        [
            {"id": f"s{day}", "tenant": "t1", "model": "m1", "input_tokens": 10,
             "output_tokens": 20, "ttft_ms": 1500,
             "time": (BASE + timedelta(days=day, hours=10)).isoformat()}
            for day in (0, 2)
        ]
    )  # fmt: skip
    assert _compliant_by_day() == {1: 1, 3: 1}  # folded as the ingest committed

    deployment_version_add(
        deployment=deployment,
        effective_from=BASE + timedelta(days=1),
        spec=VersionSpec(r_ref=Decimal(1000), slo_ttft_ms=1000),
        by=None,
    )

    assert _compliant_by_day() == {1: 1, 3: 0}
    assert not RefoldPending.objects.exists()


def _compliant_by_day() -> dict[int, int]:
    return {row.day.day: row.compliant_requests for row in DailyUsage.objects.order_by("day")}


def test_a_late_event_adds_to_an_hour_kept_only_as_rollups(db):
    """The fold adds: an hour whose usage exists only as a rollup row (loaded, or its raw
    events archived) keeps it, and a late event of that hour adds exactly its own figures
    (architecture.md "The pipeline"); the change is logged for billing and the KPIs."""
    tenant = Tenant.objects.create(slug="t1", name="t1")
    deployment = make_deployment(model="m1", ttft=2000)
    hour = BASE + timedelta(days=2, hours=13)
    HourlyUsage.objects.create(
        tenant=tenant, deployment=deployment, hour=hour, requests=1_152_770, errors=70,
        input_tokens=9_000_000, cached_tokens=4_000_000, output_tokens=3_000_000,
        ok_input_tokens=8_999_000, ok_cached_tokens=4_000_000, ok_output_tokens=2_999_000,
        compliant_requests=1_100_000, compliant_input_tokens=8_000_000,
        compliant_cached_tokens=3_500_000, compliant_output_tokens=2_700_000,
        latency_ms_sum=1_152_770 * 800.0, latency_count=1_152_770,
        latency_histogram=[0, 0, 0, 1_152_770] + [0] * 12, is_demo=True,
    )  # fmt: skip
    rollup_service.rollup_days({(tenant.pk, deployment.pk, hour.date())})
    UsageChange.objects.all().delete()

    _ingest(
        [{"id": "late-1", "tenant": "t1", "model": "m1", "time": (hour + timedelta(minutes=30)).isoformat(),
          "input_tokens": 0, "output_tokens": 1, "ttft_ms": 300, "latency_ms": 600}]
    )  # fmt: skip
    assert usage_fold() == 1

    row = HourlyUsage.objects.get()
    assert (row.requests, row.output_tokens, row.ok_output_tokens) == (
        1_152_771,
        3_000_001,
        2_999_001,
    )
    assert (row.compliant_requests, row.compliant_output_tokens) == (1_100_001, 2_700_001)
    assert (row.latency_count, row.latency_ms_sum) == (1_152_771, 1_152_770 * 800.0 + 600)
    assert row.latency_histogram == [0, 0, 0, 1_152_771] + [0] * 12
    assert (row.ttft_count, row.ttft_ms_sum) == (1, 300)
    assert row.is_demo  # still the loaded row, one event richer
    day = DailyUsage.objects.get()
    assert (day.requests, day.output_tokens) == (1_152_771, 3_000_001)
    assert day.is_demo  # every hour of it still the loaded one
    change = UsageChange.objects.get()
    assert (change.kind, change.tenant_id, change.pool_id) == (
        "usage",
        tenant.pk,
        deployment.pool_id,
    )
    assert (change.start, change.end) == (hour, hour + timedelta(hours=1))
    assert usage_fold() == 0  # folded once
    assert HourlyUsage.objects.get().requests == 1_152_771


def test_an_event_in_a_new_hour_of_a_loaded_day_adds_to_it_and_the_day_is_no_longer_the_demos(db):
    """The fold adds an event's sums to its day as to its hour: a day loaded as the demo's
    rollups (one hour of 40 requests) and a late event in another of its hours make a day of
    41 requests, 2 hours, its histogram the two hours' summed, no longer all the demo's; one
    more in the loaded hour leaves it so."""
    tenant = Tenant.objects.create(slug="t1", name="t1")
    deployment = make_deployment(model="m1", ttft=2000)
    hour = BASE + timedelta(days=2, hours=13)
    make_hourly_usage(
        tenant, deployment, hour, requests=40, output_tokens=4_000, ok_output_tokens=4_000,
        latency_ms_sum=40 * 800.0, latency_count=40,
        latency_histogram=[0, 0, 0, 40] + [0] * 12, is_demo=True,
    )  # fmt: skip
    assert DailyUsage.objects.get().is_demo

    def late(n, at, output_tokens, latency_ms):
        _ingest([{"id": f"late-{n}", "tenant": "t1", "model": "m1", "time": at.isoformat(),
                  "input_tokens": 0, "output_tokens": output_tokens, "latency_ms": latency_ms}])  # fmt: skip
        assert usage_fold() == 1

    late(1, hour + timedelta(hours=2), 7, 61_000)
    day = DailyUsage.objects.get()
    assert (day.requests, day.output_tokens, day.latency_count) == (41, 4_007, 41)
    assert day.latency_ms_sum == 40 * 800.0 + 61_000
    assert day.latency_histogram == [0, 0, 0, 40] + [0] * 11 + [1]
    assert not day.is_demo
    assert HourlyUsage.objects.count() == 2

    late(2, hour + timedelta(minutes=9), 1, 700)  # into the loaded hour
    day = DailyUsage.objects.get()
    assert (day.requests, day.output_tokens, day.is_demo) == (42, 4_008, False)
    assert HourlyUsage.objects.get(hour=hour).is_demo


def test_a_new_slo_over_a_month_kept_as_rollups_is_refused_naming_effective_from(db):
    """Only hours of months whose raw events are complete may be folded again: a version
    that would need the refold of a month loaded as rollups is refused, nothing stored."""
    from metering.models import DeploymentVersion
    from metering.services.usage.changes import raw_months_incomplete_mark
    from portal.errors import FieldError

    Tenant.objects.create(slug="t1", name="t1")
    deployment = make_deployment(model="m1", ttft=2000)
    raw_months_incomplete_mark(
        pools=[deployment.pool], months=[BASE], reason=IncompleteRawMonth.Reason.LOADED
    )
    with pytest.raises(FieldError) as refused:
        deployment_version_add(
            deployment=deployment,
            effective_from=BASE + timedelta(days=1),
            spec=VersionSpec(r_ref=Decimal(1000), slo_ttft_ms=1000),
            by=None,
        )
    assert refused.value.field == "effective_from"
    assert "2026-03" in refused.value.message and "2026-04-01T00:00Z" in refused.value.message
    assert DeploymentVersion.objects.filter(deployment=deployment).count() == 1
    assert not RefoldPending.objects.exists()
    # From the first complete month on, it is accepted.
    deployment_version_add(
        deployment=deployment,
        effective_from=datetime(2026, 4, 1, tzinfo=UTC),
        spec=VersionSpec(r_ref=Decimal(1000), slo_ttft_ms=1000),
        by=None,
    )


@pytest.mark.postgres_only
def test_data_until_keeps_moving_while_events_arrive_during_the_fold(transactional_db, now):
    """kpis.md section 0: data_until is the receipt of the oldest event still waiting for the
    fold (the fold's last completion when none waits), so under continuous ingestion it
    keeps moving instead of staying at the last idle moment. One thread ingests a batch a
    minute (test time) while another folds in small batches; a third reads data_until."""
    import threading

    from metering.models import FoldMark
    from metering.selectors.usage import usage_metered_until
    from portal.clock import clock_set
    from tests.concurrency import run_together

    Tenant.objects.create(slug="t1", name="T1")
    make_deployment(model="m1")
    start = now - timedelta(hours=1)
    FoldMark.objects.create(pk=1, completed_at=start - timedelta(hours=3))  # idle long ago
    clock_set(start)
    batches, ingesting = 40, threading.Event()
    ingesting.set()
    samples: list[tuple[datetime, datetime, int]] = []

    def ingest():
        for batch in range(batches):
            clock_set(start + timedelta(minutes=batch))
            items = [
                {"id": f"c{batch}-{i}", "tenant": "t1", "model": "m1",
                 "time": (start - timedelta(minutes=30)).isoformat(),
                 "input_tokens": 10, "output_tokens": 5}
                for i in range(25)
            ]  # fmt: skip
            events, errors = validate_events(items=items, now=now)
            assert not errors
            usage_ingest(events=events, received_at=start + timedelta(minutes=batch))
            time.sleep(0.02)
        ingesting.clear()

    def fold():
        while ingesting.is_set():
            usage_fold(batch=10)

    def watch():
        while ingesting.is_set():
            pending = FoldPending.objects.count()
            samples.append((rollup_service.clock.now(), usage_metered_until(), pending))
            time.sleep(0.01)

    work = {"ingest": ingest, "fold": fold, "watch": watch}
    with broker_mode("memory://"):  # the request asks for a fold; the thread above folds
        _, errors = run_together(lambda name: work[name](), list(work), timeout=120)
    assert errors == []
    usage_fold()

    waiting = [until for _, until, pending in samples if pending]
    assert len(set(waiting)) >= 5, samples  # it moved while events were waiting
    assert min(waiting) >= start  # never the idle mark of three hours before
    assert max(waiting) >= start + timedelta(minutes=batches // 2)
    assert usage_metered_until() == rollup_service.clock.now()  # caught up: the fold's mark
    assert HourlyUsage.objects.get().requests == batches * 25


def test_a_rebuild_from_raw_events_alone_puts_a_pool_in_service_from_its_first_hour(db):
    """A database whose pools never got their `in_service_from` (events and rollups loaded by
    COPY, as the bench does), every hour then folded again from raw events (`manage.py
    refold`): the pool is in service from its first event's hour, as the fold stores it, so
    no read derives it from every rollup row."""
    Tenant.objects.create(slug="t1", name="t1")
    make_deployment(model="m1", pool="p1")
    _ingest(_items([("t1", "m1", 130, 100, 10, False, None), ("t1", "m1", 900, 5, 1, False, None)]))
    usage_fold()
    Pool.objects.update(in_service_from=None)
    usage_refold(start=BASE)
    assert rollup_service.refold_apply() == 2
    assert Pool.objects.get(slug="p1").in_service_from == BASE + timedelta(hours=2)
    assert HourlyUsage.objects.count() == 2


def test_five_minute_buckets_older_than_8_days_are_pruned_by_the_fold(db, now):
    """Folded on 15 December 10:00 (horizon 7 December 10:00), every event has its bucket;
    folded again on 16 December 10:00 (horizon 8 December 10:00), the 09:55 bucket is gone.
    The hours keep everything."""
    Tenant.objects.create(slug="t1", name="t1")
    make_deployment(model="m1")
    horizon = datetime(2026, 12, 8, 10, tzinfo=UTC)
    items = [
        {"id": f"p{i}", "tenant": "t1", "model": "m1", "input_tokens": 1, "output_tokens": 1,
         "time": (horizon + timedelta(minutes=minutes)).isoformat()}
        for i, minutes in enumerate((-5, -1, 0, 7))
    ]  # fmt: skip
    events, errors = validate_events(items=items, now=now)
    assert not errors
    usage_ingest(events=events, received_at=now)
    clock_set(now - timedelta(days=1))
    with CaptureQueriesContext(connection):  # statements logged as DEBUG logs them
        usage_fold()

    def buckets():
        return list(FiveMinuteUsage.objects.order_by("bucket").values_list("bucket", "requests"))

    five = timedelta(minutes=5)
    assert buckets() == [(horizon - five, 2), (horizon, 1), (horizon + five, 1)]

    clock_set(now)
    usage_fold()

    assert buckets() == [(horizon, 1), (horizon + five, 1)]
    assert HourlyUsage.objects.get(hour=horizon - timedelta(hours=1)).requests == 2


def test_a_latency_quantile_is_interpolated_in_its_bucket_to_a_tenth_of_a_millisecond():
    from metering.selectors.usage import _quantile

    # 3 requests: one under 100 ms, two in (100, 250]: the median's rank 1.5 is half a
    # request into that bucket of two: 100 + 150 × 0.5 / 2 = 137.5 ms; p90 (rank 2.7):
    # 100 + 150 × 1.7 / 2 = 227.5 ms.
    histogram = [1, 2] + [0] * 14
    assert (_quantile(histogram, 0.5), _quantile(histogram, 0.9)) == (137.5, 227.5)
    # Rank 1 of 3 requests under 100 ms: 0 + 100 × 1 / 3 = 33.33… → 33.3 ms.
    assert _quantile([3] + [0] * 15, 1 / 3) == 33.3
    assert _quantile([0] * 16, 0.5) is None


def test_usage_reads_kept_in_the_cache_see_each_fold_also_once_the_log_is_pruned(
    factory, make_user
):
    """Usage by pool (Metering) and by day and model (the usage page) are kept in the cache
    under the fold's last change: each fold's events are in the next read, also once rating
    and measurement have read the log and the fold has pruned it (where they read up to
    stands in for the pruned entry)."""
    from metering.selectors.usage import usage_by_pool, usage_daily_by_model
    from portal.periods import Period
    from portal.pipeline import LOG_CONSUMERS, log_consume, log_read

    operator = make_user("operator")
    period = Period(BASE, BASE + timedelta(days=2, hours=12))  # 2 days and 12 hours

    def pruned() -> None:
        for consumer in LOG_CONSUMERS["metering.usage"]:
            log_consume(log_read(UsageChange, consumer=consumer, log="metering.usage"))
        usage_fold()  # prunes what every consumer has read
        assert not UsageChange.objects.exists()

    def by_pool() -> list[tuple]:
        return [
            (r["deployment__pool__slug"], r["deployment__model__slug"], r["requests"],
             r["errors"], r["output_tokens"])
            for r in usage_by_pool(period=period)
        ]  # fmt: skip

    def by_day() -> list[tuple]:
        rows = usage_daily_by_model(user=operator, period=period)
        return [(r["day"].day, r["model"], r["requests"], r["output_tokens"]) for r in rows]

    _ingest(_items([("t1", "m1", 10, 100, 40, False, None)]))
    usage_fold()
    pruned()
    assert by_pool() == [("h100-a", "m1", 1, 0, 40)]
    assert by_day() == [(1, "m1", 1, 40)]

    # Day 2 at 0:30 and day 3 at 11:00 (an hourly rollup past the whole days); day 3 at
    # 13:00 is past the period.
    _ingest(_items([("t2", "m1", 1470, 10, 5, True, None), ("t1", "m2", 3540, 10, 7, False, None),
                    ("t1", "m2", 3660, 10, 900, False, None)], offset=1))  # fmt: skip
    usage_fold()
    assert by_pool() == [("h100-a", "m1", 2, 1, 45), ("h200-a", "m2", 1, 0, 7)]
    assert by_day() == [(1, "m1", 1, 40), (2, "m1", 1, 5), (3, "m2", 1, 7)]
    pruned()
    assert by_pool() == [("h100-a", "m1", 2, 1, 45), ("h200-a", "m2", 1, 0, 7)]
    assert by_day() == [(1, "m1", 1, 40), (2, "m1", 1, 5), (3, "m2", 1, 7)]

    _ingest(_items([("t2", "m2", 2000, 10, 11, False, None)], offset=4))
    usage_fold()
    pruned()
    assert by_pool() == [("h100-a", "m1", 2, 1, 45), ("h200-a", "m2", 2, 0, 18)]
    assert by_day() == [(1, "m1", 1, 40), (2, "m1", 1, 5), (2, "m2", 1, 11), (3, "m2", 1, 7)]
    # A scope that matches no row (an investor sees no tenant's usage) reads nothing.
    assert usage_daily_by_model(user=make_user("investor"), period=period) == []


def test_metered_until_is_the_oldest_waiting_run_else_the_folds_mark_in_one_query(
    db, now, django_assert_num_queries
):
    """kpis.md section 0, data_until: the receipt of the oldest event waiting for the fold,
    else the fold's last completion, else now; never after now. One query, whether the fold
    has completed or not (every page and API call that measures a period asks this)."""
    from metering.models import FoldMark, FoldPending
    from metering.selectors.usage import usage_metered_until

    hour = timedelta(hours=1)
    with django_assert_num_queries(1):
        assert usage_metered_until(now=now) == now  # the fold never ran, nothing waits
    FoldPending.objects.create(first_id=1, last_id=5, time_min=now - 9 * hour,
                               time_max=now - 8 * hour, events=5, queued_at=now - 3 * hour)  # fmt: skip
    assert usage_metered_until(now=now) == now - 3 * hour
    FoldMark.objects.create(pk=1, completed_at=now - 2 * hour)
    FoldPending.objects.create(first_id=11, last_id=12, time_min=now - 9 * hour,
                               time_max=now - 8 * hour, events=2, queued_at=now - 4 * hour)  # fmt: skip
    with django_assert_num_queries(1):
        assert usage_metered_until(now=now) == now - 4 * hour  # the oldest run waiting
    FoldPending.objects.all().delete()
    with django_assert_num_queries(1):
        assert usage_metered_until(now=now) == now - 2 * hour  # the mark
    FoldMark.objects.filter(pk=1).update(completed_at=now + hour)
    assert usage_metered_until(now=now) == now  # never after now


def test_the_usage_pages_rows_kept_are_the_hourly_rollups_summed_per_day_model_project_and_tier(
    factory, make_user
):
    """usage_daily_by_model's rows, made on a miss of the cache and read back on a hit, are
    the hourly rollups of the period summed per day, model, project slug and service tier,
    with the latency p50 and p95 of the summed histograms: two tenants with a project of one
    slug (one row over both), tiers, failures and latencies over 3 days, read over whole days
    (the daily rollups) and parts of days at both ends (the hourly ones)."""
    from django.core.cache import cache

    from metering.domain.usage.fields import SERVICE_TIERS
    from metering.models import HourlyUsage
    from metering.selectors.usage import USAGE_SUMS, _quantile, usage_daily_by_model
    from portal.periods import Period

    items = [
        {
            "id": f"e{i}",
            "tenant": ("t1", "t2")[i % 2],
            "model": ("m1", "m2")[i % 5 % 2],
            "time": (BASE + timedelta(minutes=i * 37 % (3 * 24 * 60))).isoformat(),
            "input_tokens": 100 + i,
            "output_tokens": 7 * i,
            "status": "error" if i % 11 == 0 else "ok",
            "latency_ms": i * 131 % 9000 + 50,
            "service_tier": SERVICE_TIERS[i % 3 % len(SERVICE_TIERS)],
            **({"project": ("search", "eval")[i % 7 % 2]} if i % 4 else {}),
        }
        for i in range(240)
    ]
    _ingest(items)
    usage_fold()
    operator = make_user("operator")
    period = Period(BASE + timedelta(hours=5), BASE + timedelta(days=2, hours=13))

    cache.clear()
    made = usage_daily_by_model(user=operator, period=period, by_project=True, by_tier=True)
    read = usage_daily_by_model(user=operator, period=period, by_project=True, by_tier=True)

    summed: dict[tuple, dict] = {}
    hours = HourlyUsage.objects.filter(hour__gte=period.start, hour__lt=period.end)
    for row in hours.select_related("deployment__model"):
        slug = Project.objects.get(pk=row.project_id).slug if row.project_id else "(none)"
        key = (row.hour.date(), row.deployment.model.slug, slug, row.service_tier)
        cell = summed.setdefault(key, {"sums": dict.fromkeys(USAGE_SUMS, 0), "h": [0] * 16})
        for name in USAGE_SUMS:
            cell["sums"][name] += getattr(row, name)
        cell["h"] = [a + b for a, b in zip(cell["h"], row.latency_histogram, strict=True)]
    expected = [
        {"day": day, "model": model, "project": project, "service_tier": tier,
         **cell["sums"], "p50_ms": _quantile(cell["h"], 0.5), "p95_ms": _quantile(cell["h"], 0.95)}
        for (day, model, project, tier), cell in sorted(summed.items())
    ]  # fmt: skip
    assert len(expected) > 40 and {r["project"] for r in expected} == {"(none)", "eval", "search"}
    assert len({r["day"] for r in expected}) == 3
    assert made == expected
    assert read == expected
