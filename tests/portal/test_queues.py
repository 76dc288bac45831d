"""The four queues (architecture.md "Runtime"): each may have workers of its own, and every
stage runs on its queue's worker: the fold on `ingest`, the rating on `billing`, the
measurement on `measure`, delivery and the kernel's tasks on `notify`."""

import os
import re
import sys
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings

from billing.models import RatedUsage
from flywheel.models import KpiSnapshot
from metering.models import HourlyUsage
from portal.pipeline import MEASURE, stage_schedule
from tests.billing.factories import make_contract, make_priced_model
from tests.conftest import broker_mode, celery_worker

# The tasks each queue's worker ran; none of them ran on another's.
EXPECTED = {
    "ingest": {"metering.fold"},
    "billing": {"billing.rate"},
    "measure": {"flywheel.measure"},
    "notify": {"portal.ping"},
}


def _ran(log) -> set[str]:
    return set(re.findall(r"Task ([a-z_]+\.[a-z_]+)\[[^\]]+\] succeeded", log.read_text()))


def _wait_for(condition, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {timeout} s")
        time.sleep(0.2)


def _folded_rated_measured(admin_api, *, event_id: str, hour) -> None:
    """Post an event of tenant A in `hour`; wait until the workers folded, rated and (the
    beat's cadence, asked for at once) measured it."""
    response = admin_api.post(
        "/api/v1/usage/events",
        [{"id": event_id, "time": hour.isoformat(), "tenant": "tenant-a", "model": "llama-70b",
          "input_tokens": 1000, "output_tokens": 500}],
    )  # fmt: skip
    assert response.status_code == 200, response.json()
    _wait_for(lambda: HourlyUsage.objects.exists(), "rollup (the fold)")
    _wait_for(lambda: RatedUsage.objects.exists(), "rated usage (the rating)")
    stage_schedule(MEASURE)
    _wait_for(lambda: KpiSnapshot.objects.exists(), "KPI snapshot (the measurement)")


@pytest.mark.integration
def test_a_worker_per_queue_runs_each_stage_of_the_pipeline(
    transactional_db, now, admin_api, tenant_a
):
    make_priced_model()
    make_contract(tenant_a)
    hour = (now - timedelta(hours=2)).replace(minute=5, second=0, microsecond=0)
    with ExitStack() as stack:
        workers = {
            queue: stack.enter_context(celery_worker(now, f"queue-{queue}", queues=[queue]))
            for queue in settings.WORKER_QUEUES
        }
        stack.enter_context(broker_mode(os.environ["TEST_BROKER_URL"]))
        _folded_rated_measured(admin_api, event_id="q1", hour=hour)
        client, _, _ = workers["notify"]  # a client with the result backend
        assert client.send_task("portal.ping").get(timeout=60)["pong"] is True
        # A worker logs a task's success after storing its result and committing its writes.
        logs = {queue: log for queue, (_, _, log) in workers.items()}
        _wait_for(
            lambda: all(tasks <= _ran(logs[queue]) for queue, tasks in EXPECTED.items()),
            "log line of every task",
        )
        ran = {queue: _ran(log) for queue, log in logs.items()}

    assert HourlyUsage.objects.get().output_tokens == 500
    for queue, tasks in EXPECTED.items():
        assert tasks <= ran[queue], (queue, ran)
        others = set().union(*(ran[q] for q in ran if q != queue))
        assert not tasks & others, (queue, ran)


@pytest.mark.integration
def test_the_readmes_production_worker_command_runs_the_whole_pipeline(
    transactional_db, now, admin_api, tenant_a
):
    """`celery -A portal worker -l INFO` exactly as README "Production" writes it (no -Q):
    it consumes every queue, so an event is folded, rated and measured."""
    readme = (Path(settings.BASE_DIR) / "README.md").read_text()
    assert ".venv/bin/celery -A portal worker -l INFO " in readme
    celery = str(Path(sys.executable).parent / "celery")  # .venv/bin/celery
    make_priced_model()
    make_contract(tenant_a)
    hour = (now - timedelta(hours=2)).replace(minute=5, second=0, microsecond=0)
    command = [celery, "-A", "portal", "worker", "-l", "INFO"]
    with (
        celery_worker(now, "readme-worker", command=command) as (_, _, log),
        broker_mode(os.environ["TEST_BROKER_URL"]),
    ):
        _folded_rated_measured(admin_api, event_id="r1", hour=hour)
        stages = {"metering.fold", "billing.rate", "flywheel.measure"}
        _wait_for(lambda: stages <= _ran(log), "log line of each stage")
    assert RatedUsage.objects.get().output_tokens == 500
