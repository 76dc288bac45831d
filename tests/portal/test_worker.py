import os

import pytest

from portal.models import Tenant


@pytest.mark.integration
def test_worker_executes_a_task_through_redis_on_the_test_database(live_worker):
    Tenant.objects.create(slug="t1", name="T1")
    Tenant.objects.create(slug="t2", name="T2")

    result = live_worker.send_task("portal.ping")

    assert result.get(timeout=60) == {"pong": True, "tenants": 2}


@pytest.mark.integration
def test_a_worker_and_its_pool_run_below_the_web_servers_priority(transactional_db, now):
    """WORKER_NICE lowers the priority of the worker and of each pool child (the web server
    keeps its own), so a burst of jobs never slows a page."""
    from pathlib import Path

    from tests.conftest import celery_worker

    ours = os.getpriority(os.PRIO_PROCESS, 0)
    lower = min(19, ours + 3)
    env = {"WORKER_NICE": str(lower)}
    with celery_worker(now, "test-nice-worker", env=env) as (_, process, _):
        pid = process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        assert children  # prefork: one child
        for each in (pid, *map(int, children)):
            assert os.getpriority(os.PRIO_PROCESS, each) == lower
    assert os.getpriority(os.PRIO_PROCESS, 0) == ours  # this process (a web server's) untouched
