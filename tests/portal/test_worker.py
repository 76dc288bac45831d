import os
from pathlib import Path

import pytest

from portal.models import Tenant
from tests.conftest import celery_worker


@pytest.mark.integration
def test_a_worker_runs_tasks_from_redis_on_the_test_database_below_the_web_priority(
    transactional_db, now
):
    """A real worker answers through Redis from the test database; WORKER_NICE lowers the
    priority of the worker and of each pool child (this process, a web server's, keeps its
    own), so a burst of jobs never slows a page."""
    Tenant.objects.create(slug="t1", name="T1")
    Tenant.objects.create(slug="t2", name="T2")
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    lower = min(19, ours + 3)
    with celery_worker(now, "test-worker", env={"WORKER_NICE": str(lower)}) as (app, process, _):
        result = app.send_task("portal.ping")

        assert result.get(timeout=60) == {"pong": True, "tenants": 2}
        pid = process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        assert children  # prefork: one child
        for each in (pid, *map(int, children)):
            assert os.getpriority(os.PRIO_PROCESS, each) == lower
    assert os.getpriority(os.PRIO_PROCESS, 0) == ours
