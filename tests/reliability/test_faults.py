"""Celery and Redis under faults.

(a) The pipeline (fold → rate → measure, each stage asking for the next) runs in a worker
from raw events alone, and one stage is killed with SIGKILL in its worker child (prefork,
concurrency 1) just before a random one of the SQL statements its clean run makes (a fault
point in tests/reliability/tasks.py, so every kill lands inside the stage): the fold (between
the ingest and the rating), the rating (between the fold and the measurement) and the
measurement in turn, 3 times in CI (10 in soak; RELIABILITY_SEED fixes the points);
acks_late + reject_on_worker_lost redeliver it, the test then runs every stage once as the
beat would, and the rollups, rated usage and KPI snapshots (all but measured_at) equal a
clean run's: nothing counted twice, nothing lost.
(b) A test-only task (tests/reliability/tasks.py) that always fails is retried
MAX_RETRIES times, then stops, and is FAILURE in the result backend and the worker log.
(c) A private redis-server, the cache behind the API quotas, is stopped during ingestion
(`down`: killed then restarted; `hung`: SIGSTOP then SIGCONT) for 5 s in CI, 30 s in soak:
ingestion answers 2xx, or 503 with Retry-After, never anything else, within 3 s (socket
timeouts), and every batch is stored exactly once (rows counted).
"""

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from datetime import timedelta

import pytest
import redis
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from flywheel.models import KpiSnapshot
from metering.domain.usage.validation import validate_events
from metering.models import (
    CapacitySample,
    DailyUsage,
    EventKey,
    FoldPending,
    HourlyUsage,
    Pool,
    UsageEvent,
)
from metering.services.usage.ingest import usage_ingest
from portal import clock
from portal.periods import month_start
from portal.settings import redis_cache
from tests.conftest import SOAK
from tests.metering.factories import make_deployment
from tests.reliability.tasks import MAX_RETRIES
from tests.reliability.world import bearer, world_build

KILL_RUNS = int(os.environ.get("RELIABILITY_KILL_RUNS", 0)) or (10 if SOAK else 3)
REDIS_OUTAGE_S = 30 if SOAK else 5
SNAPSHOT_FIELDS = [
    "scope",
    "period_kind",
    "period_start",
    "period_end",
    "telemetry",
    "values",
    "rating_errors",
    "is_closed",
]
ROLLUP_FIELDS = ["tenant_id", "deployment_id", "requests", "input_tokens", "output_tokens"]


# --- (a) the measure job killed midway ----------------------------------------------


def _this_month_factory() -> None:
    """Three pools with capacity every hour of this month so far, and usage of four tenants
    every hour, so the measure job has real work (a few seconds) to be killed in."""
    world_build()
    now = clock.now()
    start = month_start(now) - timedelta(days=1)  # yesterday too on the 1st
    hours = int((now - start) / timedelta(hours=1))
    pools = ["h100-a", "h100-b", "b200-a"]
    for pool in pools[1:]:
        make_deployment(pool=pool)
    samples = [
        CapacitySample(
            pool=pool,
            time=start + timedelta(hours=h),
            interval_s=3600,
            gpus_installed=8,
            gpus_healthy=8 - h % 2,
            gpus_busy=4 + h % 3,
        )
        for pool in Pool.objects.filter(slug__in=pools)
        for h in range(hours)
    ]
    CapacitySample.objects.bulk_create(samples)
    items = [
        {
            "id": f"now-{tenant}-{pool}-{h}",
            "time": (start + timedelta(hours=h, minutes=7)).isoformat(),
            "tenant": tenant,
            "model": "llama-70b",
            "pool": pool,
            "input_tokens": 1000 + h,
            "cached_tokens": 0,
            "output_tokens": 500 + h,
        }
        for tenant in ("tenant-a", "tenant-b")
        for pool in pools
        for h in range(hours - 1)
    ]
    for chunk in range(0, len(items), 5000):
        events, errors = validate_events(items=items[chunk : chunk + 5000], now=clock.now())
        assert not errors, errors[:3]
        usage_ingest(events=events, received_at=clock.now())


STAGES = ("metering.fold", "billing.rate", "flywheel.measure")
RATED_FIELDS = ["tenant_id", "deployment_id", "hour", "sale", "output_tokens", "list_value",
                "realized"]  # fmt: skip
MONTH_FIELDS = ["tenant_id", "month_start", "usage_amount", "realized", "promotions",
                "promotion_rate", "quantities", "lines"]  # fmt: skip
HOUR_FIELDS = ["tenant_id", "hour", "consumed", "paid_tokens", "realized", "quantities"]


def _from_raw_events() -> None:
    """Drop everything the pipeline derived and queue every event for the fold again, every
    cursor at the start: the next pass computes it all from the raw events."""
    from billing.models import RatedChange, RatedHour, RatedTenantMonth, RatedUsage, RatedUsageMonth
    from metering.models import UsageChange
    from portal.models import Cursor, StageRequest

    for model in (KpiSnapshot, RatedUsage, RatedUsageMonth, RatedHour, RatedTenantMonth, RatedChange, UsageChange,
                  Cursor, StageRequest, HourlyUsage, DailyUsage, FoldPending):  # fmt: skip
        model.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO metering_foldpending (first_id, last_id, time_min, time_max, events, "
            "queued_at) SELECT id, id, time, time, 1, %s FROM metering_usageevent",
            [clock.now()],
        )


def _settled() -> bool:
    """Every event folded, every change log read by each of its consumers, no run asked for."""
    from billing.models import RatedChange
    from metering.models import UsageChange
    from portal.models import Cursor, StageRequest

    if FoldPending.objects.exists() or StageRequest.objects.filter(pending=True).exists():
        return False
    cursors = dict(Cursor.objects.values_list("name", "position"))
    heads = {
        "metering.usage": UsageChange.objects.order_by("-id").values_list("id", flat=True).first(),
        "billing.rated": RatedChange.objects.order_by("-id").values_list("id", flat=True).first(),
    }
    readers = (("billing.rate", "metering.usage"), ("flywheel.measure", "metering.usage"),
               ("flywheel.measure", "billing.rated"))  # fmt: skip
    return all(
        heads[log] is None or cursors.get(f"{consumer}:{log}", 0) >= heads[log]
        for consumer, log in readers
    )


def _wait_settled(timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not _settled():
        assert time.monotonic() < deadline, "the pipeline did not settle"
        time.sleep(0.2)


def _state() -> dict:
    from billing.models import RatedHour, RatedTenantMonth, RatedUsage

    snapshots = list(KpiSnapshot.objects.order_by(*SNAPSHOT_FIELDS[:3]).values(*SNAPSHOT_FIELDS))
    return {
        "snapshots": snapshots,
        "keys": KpiSnapshot.objects.values("scope", "period_kind", "period_start")
        .distinct()
        .count(),
        "hourly": list(
            HourlyUsage.objects.order_by("tenant", "deployment", "hour").values(
                *ROLLUP_FIELDS, "hour"
            )
        ),
        "daily": list(
            DailyUsage.objects.order_by("tenant", "deployment", "day").values(*ROLLUP_FIELDS, "day")
        ),
        "rated": list(RatedUsage.objects.order_by(*RATED_FIELDS[:4]).values(*RATED_FIELDS)),
        "months": list(RatedTenantMonth.objects.order_by(*MONTH_FIELDS[:2]).values(*MONTH_FIELDS)),
        "hours": list(RatedHour.objects.order_by(*HOUR_FIELDS[:2]).values(*HOUR_FIELDS)),
        "pending": FoldPending.objects.count(),
    }


def _pipeline(worker, *, kill: tuple[str, int] | None = None) -> tuple[dict, bool]:
    """One pass of the pipeline on the worker from raw events: the fold asked for, each
    stage asking for the next. `kill` (stage, k): SIGKILL its child just before that stage's
    k-th SQL statement (else every stage's statements are counted); once the killed stage
    has run again, every stage is asked for once, as the beat's safety net would. Returns
    the database state once settled, and whether the kill hit the running stage."""
    _from_raw_events()
    for task in STAGES:
        if kill is None:
            worker.order_fault(task, "count")
        elif kill[0] == task:
            worker.order_fault(task, f"kill {kill[1]}")
    offset = len(worker.log())
    worker.app.send_task("metering.fold")
    killed = False
    if kill is not None:
        name = re.escape(kill[0])
        lost = worker.wait_for_log(r"WorkerLostError", after=offset, timeout=120)
        worker.wait_for_log(rf"Task {name}\[[^]]+\] succeeded", after=lost.end(), timeout=120)
        killed = True
        for task in STAGES:  # the beat's safety net
            worker.app.send_task(task)
    _wait_settled()
    return _state(), killed


@pytest.mark.integration
@pytest.mark.postgres_only
def test_a_stage_killed_at_a_random_point_reruns_to_the_figures_of_a_clean_run(
    reliability_worker,
):
    _this_month_factory()
    clean, _ = _pipeline(reliability_worker)
    counted = {task: reliability_worker.statements_counted(task) for task in STAGES}
    assert clean["snapshots"], "the pipeline measured nothing"
    assert clean["keys"] == len(clean["snapshots"])
    assert clean["pending"] == 0 and clean["hourly"] and clean["rated"]
    assert all(n > 5 for n in counted.values()), counted
    rng = random.Random(os.environ.get("RELIABILITY_SEED"))
    for run in range(KILL_RUNS):
        stage = STAGES[run % len(STAGES)]
        kill_at = rng.randint(1, counted[stage])
        after, killed = _pipeline(reliability_worker, kill=(stage, kill_at))
        print(f"run {run}: {stage} killed before statement {kill_at} of {counted[stage]}")
        assert killed, f"run {run}: the kill of {stage} before statement {kill_at} missed"
        for part in ("hourly", "daily", "rated", "snapshots"):
            assert after[part] == clean[part], (
                f"run {run}: {part} differ after {stage} was killed before statement "
                f"{kill_at} of {counted[stage]}"
            )


# --- (b) a task that always fails ----------------------------------------------------


@pytest.mark.integration
def test_failing_task_stops_after_its_retries_and_is_recorded_as_failed(reliability_worker):
    key = f"attempts-{uuid.uuid4()}"
    counter = redis.Redis.from_url(os.environ["TEST_BROKER_URL"])
    result = reliability_worker.app.send_task("tests.reliability.always_fails", args=[key])
    with pytest.raises(Exception, match="always fails"):
        result.get(timeout=60, propagate=True)
    assert result.state == "FAILURE"
    time.sleep(1.0)  # longer than the retry countdown: no attempt after the last
    assert int(counter.get(key)) == 1 + MAX_RETRIES
    log = reliability_worker.log()
    assert log.count(f"tests.reliability.always_fails[{result.id}] retry") == MAX_RETRIES
    assert f"tests.reliability.always_fails[{result.id}] raised unexpected" in log


# --- (c) Redis stopped during ingestion ----------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """A redis-server of the test's own, to stop and start without touching the suite's."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="reliability-redis-")
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("private redis-server did not start")

    def stop(self) -> None:
        """Down: the process is gone, connections are refused."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def pause(self) -> None:
        """Hung: the process holds its port but answers nothing."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def private_redis():
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server")
    server = PrivateRedis()
    server.start()
    yield server
    server.close()


def _batch(n: int, size: int = 50) -> list[dict]:
    return [
        {
            "id": f"outage-{n}-{i}",
            "time": "2026-03-03T10:00:00Z",
            "tenant": "tenant-a",
            "model": "llama-70b",
            "input_tokens": 10,
            "cached_tokens": 0,
            "output_tokens": 5,
        }
        for i in range(size)
    ]


@pytest.mark.integration
@pytest.mark.postgres_only
@pytest.mark.parametrize("outage", ["down", "hung"])
def test_ingestion_survives_redis_stopped_and_loses_nothing(db, private_redis, outage):
    """`down`: redis-server killed, restarted after the outage; `hung`: SIGSTOP, then SIGCONT
    (each cache call then waits for the client's socket timeout). The world is built here,
    not shared by the module (`world`): this module's other tests commit theirs, and the
    module's open transaction would still hold its rows."""
    world = world_build()
    location = f"redis://127.0.0.1:{private_redis.port}/1"
    caches = {"default": redis_cache(location)}
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer(world.users['operator'], ['ingest'])}")
    statuses: dict[int, int] = {}
    before = UsageEvent.objects.count()
    pending: list[int] = []  # batches answered 503: to send again once Redis is back
    acknowledged, slowest = 0, 0.0
    with override_settings(CACHES=caches):
        api.post("/api/v1/usage/events", _batch(0))  # quotas counted in Redis
        assert redis.Redis(port=private_redis.port, db=1).keys("*quota*")
        n = 0
        for seconds, state in [(1.0, "up"), (REDIS_OUTAGE_S, outage), (1.0, "up")]:
            if state == "down":
                private_redis.stop()
            elif state == "hung":
                private_redis.pause()
            elif n and outage == "down":
                private_redis.start()
            elif n:
                private_redis.resume()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                n += 1
                started = time.monotonic()
                response = api.post("/api/v1/usage/events", _batch(n))
                slowest = max(slowest, time.monotonic() - started)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code == 503:
                    assert int(response["Retry-After"]) > 0
                    pending.append(n)
                else:
                    assert response.status_code == 200, (state, response.content[:300])
                    acknowledged += response.json()["accepted"]
        for again in pending:
            response = api.post("/api/v1/usage/events", _batch(again))
            assert response.status_code == 200, response.content[:300]
            acknowledged += response.json()["accepted"]
    print(f"Redis {outage} {REDIS_OUTAGE_S} s: {statuses}, slowest answer {slowest:.1f} s")
    assert set(statuses) <= {200, 503}, statuses
    # No request waits for Redis to come back: each cache call gives up after its socket
    # timeout (0.5 s) and the quota fails open.
    assert slowest < 3.0, f"slowest answer {slowest:.1f} s during the outage"
    assert acknowledged == 50 * n
    assert EventKey.objects.filter(event_id__startswith="outage-").count() == 50 * (n + 1)
    assert UsageEvent.objects.count() == before + 50 * (n + 1)
