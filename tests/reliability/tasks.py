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


# --- A fault point in the pipeline's stages ------------------------------------------
# Before a pipeline pass the test writes an order per stage into FAULT_DIR (order.<task>); the
# worker's child reads (and removes) it as that stage's task starts, so a redelivered run goes
# unharmed: "count" counts the SQL statements the run makes into count.<task>; "kill k"
# SIGKILLs the child just before its k-th statement: inside the stage by construction.

FAULT_TASKS = ("metering.fold", "billing.rate", "flywheel.measure")


def _fault_dir() -> Path | None:
    folder = os.environ.get("RELIABILITY_FAULT_DIR")
    return Path(folder) if folder else None


@task_prerun.connect
def _arm_fault(task=None, **_) -> None:
    folder = _fault_dir()
    if task is None or task.name not in FAULT_TASKS or folder is None:
        return
    order_path = folder / f"order.{task.name}"
    if not order_path.exists():
        return
    order = order_path.read_text().split()
    order_path.unlink()
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
    folder = _fault_dir()
    if task is None or task.name not in FAULT_TASKS or folder is None:
        return
    for wrapper in [w for w in connection.execute_wrappers if hasattr(w, "statements")]:
        connection.execute_wrappers.remove(wrapper)
        (folder / f"count.{task.name}").write_text(str(next(wrapper.statements) - 1))
