"""The benchmark's CPU accounting (tests/bench/cpu.py) against a known load: a child that
burns a measured CPU time is reported within 5 %, while it lives and once it has ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.bench.cpu import ChildrenCPU, machine_pace

# Busy until the process's own CPU time (interpreter start-up included) reaches 1 s, then
# says how much it spent and waits: 1 s, so that the ticks of /proc (10 ms, truncated for
# user and system time each) stay well inside 5 %.
BURN = """
import sys, time
while time.process_time() < 1.0:
    pass
print(time.process_time(), flush=True)
sys.stdin.read()
"""


class Burner:
    """The burning child, and the kinds of this process's children for ChildrenCPU: it is
    "burner", any other (a server an earlier test of this worker left running) "other"."""

    def __init__(self) -> None:
        self.pid: int | None = None

    def kinds(self, pids: list[int]) -> dict[int, str | None]:
        if self.pid is None:  # forked, not yet known: asked again at the next sample
            return dict.fromkeys(pids)
        return {pid: "burner" if pid == self.pid else "other" for pid in pids}

    def start(self) -> subprocess.Popen:
        child = subprocess.Popen(
            [sys.executable, "-S", "-c", BURN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = child.pid
        return child


def _burning() -> tuple[ChildrenCPU, subprocess.Popen, float]:
    """The accounting started, then a child that has burned its CPU (and says how much)."""
    burner = Burner()
    accounting = ChildrenCPU(os.getpid(), kinds=burner.kinds, every=0.05)
    accounting.start()
    child = burner.start()
    return accounting, child, float(child.stdout.readline())


def test_children_cpu_reports_a_burning_child_within_5_percent():
    accounting, child, burned = _burning()
    alive = accounting.stop()  # the child still lives: its own /proc/<pid>/stat

    accounting.start()  # a new window, the child counted from its time at the start
    child.stdin.close()
    child.wait()  # reaped: its time now in this process's cutime and cstime
    ended = accounting.stop().get("burner", 0.0)

    assert burned >= 1.0
    assert alive["burner"] == pytest.approx(burned, rel=0.05)
    assert ended < 0.05 * burned  # its exit only, nothing counted twice
    assert alive["burner"] + ended == pytest.approx(burned, rel=0.05)


def test_children_cpu_counts_a_child_that_ended_within_5_percent():
    accounting, child, burned = _burning()
    child.stdin.close()
    child.wait()
    spent = accounting.stop()

    assert spent["burner"] == pytest.approx(burned, rel=0.05)


def test_machine_pace_is_the_least_cpu_of_its_loops_in_this_process():
    started = time.perf_counter()
    pace = machine_pace(loops=2)
    wall = time.perf_counter() - started

    # CPU of this process's one busy thread: the lesser of two runs is at most half the
    # wall time both took, and a loop of 2,000,000 additions takes some.
    assert 0.01 < pace <= wall / 2
