"""Fixtures of the reliability suite: the two-tenant world and a Celery worker process."""

import copy
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import DEFAULT_NOW, celery_worker, world_of_module
from tests.reliability.world import world_build

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def _world_of_module(django_db_setup, django_db_blocker):
    """The world, built once per test module (at the default test clock) in a transaction
    that ends rolled back with the module: each test runs in a savepoint inside it (its
    `db`), as Django's TestCase.setUpTestData does (so not for a test that needs it
    committed: transactional_db). About 370 queries a test fewer."""
    with world_of_module(django_db_blocker):
        yield world_build()


@pytest.fixture
def world(_world_of_module, db, now):
    """The two-tenant world as built, whatever the module's earlier tests wrote (rolled
    back) or changed on their copy of its objects. Built at the default test clock only."""
    if now != DEFAULT_NOW:
        pytest.fail(f"the world is built at {DEFAULT_NOW}: call world_build() at {now}")
    return copy.deepcopy(_world_of_module)


@dataclass
class Worker:
    """A `celery worker` (prefork, one child) on the test broker and database."""

    app: object  # a Celery client app bound to the same broker and result backend
    process: subprocess.Popen
    log_path: Path
    fault_dir: Path  # the stages' fault points (tests/reliability/tasks.py)

    def order_fault(self, task: str, order: str) -> None:
        """`count` or `kill K` for the next run of the stage `task`."""
        (self.fault_dir / f"count.{task}").unlink(missing_ok=True)
        (self.fault_dir / f"order.{task}").write_text(order)

    def statements_counted(self, task: str) -> int:
        return int((self.fault_dir / f"count.{task}").read_text())

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def child_pids(self) -> list[int]:
        """The pool's child processes (Linux: read from /proc, instantly)."""
        pid = self.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [int(child) for child in children]

    def wait_for_log(self, pattern: str, *, timeout: float = 60, after: int = 0) -> re.Match:
        """The first match of `pattern` in the log past offset `after`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if match := re.compile(pattern).search(self.log(), after):
                return match
            if self.process.poll() is not None:
                pytest.fail(f"worker exited: {self.log()[-2000:]}")
            time.sleep(0.05)
        pytest.fail(f"no {pattern!r} in the worker log within {timeout} s: {self.log()[-3000:]}")

    def kill_child(self) -> int:
        """SIGKILL the pool's child process (the one running the task); its pid."""
        pids = self.child_pids()
        assert len(pids) == 1, pids
        os.kill(pids[0], signal.SIGKILL)
        return pids[0]


@pytest.fixture
def reliability_worker(transactional_db, now, tmp_path):
    """A real worker like tests/conftest.py's celery_worker, that also imports the test-only
    tasks of tests/reliability/tasks.py and exposes its process and log."""
    with celery_worker(
        now,
        "test-reliability-worker",
        include=["tests.reliability.tasks"],
        env={"RELIABILITY_FAULT_DIR": str(tmp_path)},
    ) as (app, process, log_path):
        yield Worker(app=app, process=process, log_path=log_path, fault_dir=tmp_path)
