"""Test-only Celery tasks, imported by the reliability suite's worker (--include)."""

import itertools
import os
import signal
from pathlib import Path

import redis
from celery import shared_task
from celery.signals import task_postrun, task_prerun
from django.db import connection

MAX_RETRIES = 2


@shared_task(
    name="tests.reliability.always_fails",
    bind=True,
    acks_late=True,
    max_retries=MAX_RETRIES,
    time_limit=30,
)
def always_fails_task(self, key: str) -> None:
    """Count the attempt in the broker's Redis under `key`, then fail; retried
    MAX_RETRIES times (as a transient error would be), then recorded as failed."""
    redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]).incr(key)
    raise self.retry(exc=RuntimeError("always fails"), countdown=0.2)


# --- A fault point for the measure job ---------------------------------------------------
# The test writes an order into FAULT_FILE before it sends `flywheel.measure`; the worker's
# child reads (and removes) it as the task starts, so a redelivered run goes unharmed:
# "count"  count the SQL statements the run makes, and write the count into COUNT_FILE;
# "kill k" SIGKILL the child just before its k-th statement: inside the job by construction.

FAULT_TASK = "flywheel.measure"


def _fault_paths() -> tuple[Path, Path] | None:
    folder = os.environ.get("RELIABILITY_FAULT_DIR")
    return (Path(folder) / "order", Path(folder) / "count") if folder else None


@task_prerun.connect
def _arm_fault(task=None, **_) -> None:
    paths = _fault_paths()
    if task is None or task.name != FAULT_TASK or paths is None or not paths[0].exists():
        return
    order = paths[0].read_text().split()
    paths[0].unlink()
    statements = itertools.count(1)
    kill_at = int(order[1]) if order[0] == "kill" else None

    def wrapper(execute, sql, params, many, context):
        if next(statements) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return execute(sql, params, many, context)

    wrapper.statements = statements
    connection.execute_wrappers.append(wrapper)


@task_postrun.connect
def _disarm_fault(task=None, **_) -> None:
    paths = _fault_paths()
    if task is None or task.name != FAULT_TASK or paths is None:
        return
    for wrapper in [w for w in connection.execute_wrappers if hasattr(w, "statements")]:
        connection.execute_wrappers.remove(wrapper)
        paths[1].write_text(str(next(wrapper.statements) - 1))
