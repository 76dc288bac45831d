"""CPU time of a process's children, from /proc: figures a busy machine moves far less than
the wall clock.

The kernel keeps each process's user and system time (/proc/<pid>/stat, in clock ticks of
1/SC_CLK_TCK s) and, when a parent reaps a child, adds the child's times (its own and its
reaped descendants') to the parent's cutime and cstime. So what every child of one process
spends between two instants (PostgreSQL's postmaster: its backends; gunicorn's arbiter: its
workers) is the live children's times plus the parent's reaped children's times, each read
at both instants; a child that starts or ends in between (a connection closed at its
CONN_MAX_AGE, an autovacuum worker) is counted too. Each child is counted under its kind
(`kinds`, e.g. PostgreSQL's backend_type), the children sampled every `every` seconds in
between so that one that ends is counted under its kind as well.

tests/bench_harness/test_cpu.py checks it against a child that burns a known CPU time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

TICK = 1 / os.sysconf("SC_CLK_TCK")
UNATTRIBUTED = "unattributed"  # children that ended between two samples, of several kinds


def ticks(pid: int) -> tuple[int, int] | None:
    """(the process's user + system ticks with its reaped children's, its reaped children's
    alone), or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()  # from field 3 (state): see proc(5)
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return utime + stime + cutime + cstime, cutime + cstime


def children(pid: int) -> list[int]:
    """The pids of a process's children (those of each of its threads)."""
    pids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(v) for v in (task / "children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return sorted(pids)


def parent(pid: int) -> int:
    """The pid of a process's parent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise RuntimeError(f"no parent for {pid}")


@dataclass
class _Child:
    kind: str | None
    start: int  # its ticks at the window's start (0 if it started after)
    last: int  # at the last sample that saw it


class ChildrenCPU:
    """The CPU seconds spent by the children of `parent` between start() and stop(), by kind.
    `kinds(pids)` names the kind of each (None while it cannot tell yet: asked again at the
    next sample; "other" if never); without it every child is "child"."""

    def __init__(
        self,
        parent: int,
        *,
        kinds: Callable[[list[int]], dict[int, str | None]] | None = None,
        every: float = 0.2,
    ) -> None:
        self.parent = parent
        self.kinds = kinds or (lambda pids: dict.fromkeys(pids, "child"))
        self.every = every
        self._seen: dict[int, _Child] = {}
        self._reaped = 0
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def _sample(self) -> tuple[int, dict[int, int]]:
        """(the parent's reaped children's ticks, each live child's), read together: again
        if a child was reaped during the reading."""
        while True:
            before = ticks(self.parent)
            if before is None:
                raise RuntimeError(f"process {self.parent} is gone")
            live = {pid: t[0] for pid in children(self.parent) if (t := ticks(pid)) is not None}
            after = ticks(self.parent)
            if after is not None and after[1] == before[1]:
                return before[1], live

    def _see(self, live: dict[int, int], *, at_start: bool = False) -> None:
        for pid, value in live.items():
            child = self._seen.setdefault(pid, _Child(None, value if at_start else 0, value))
            child.last = value
        unknown = [pid for pid, child in self._seen.items() if child.kind is None]
        if unknown:
            for pid, kind in self.kinds(unknown).items():
                self._seen[pid].kind = kind

    def _run(self) -> None:
        while not self._stopping.wait(self.every):
            self._see(self._sample()[1])

    def start(self) -> None:
        self._seen = {}
        self._reaped, live = self._sample()
        self._see(live, at_start=True)
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, float]:
        """Seconds of CPU by kind since start(); UNATTRIBUTED holds what children that ended
        spent after they were last seen when they were of several kinds (or never seen)."""
        assert self._thread is not None, "start() first"
        self._stopping.set()
        self._thread.join()
        reaped, live = self._sample()
        self._see(live)
        spent: dict[str, int] = {}
        ended_kinds = set()
        # Reaped since the start: each ended child's final ticks, and any unseen child's.
        after_last_seen = reaped - self._reaped
        for pid, child in self._seen.items():
            kind = child.kind or "other"
            spent[kind] = spent.get(kind, 0) + child.last - child.start
            if pid not in live:
                ended_kinds.add(kind)
                after_last_seen -= child.last
        if after_last_seen:
            kind = ended_kinds.pop() if len(ended_kinds) == 1 else UNATTRIBUTED
            spent[kind] = spent.get(kind, 0) + after_last_seen
        return {kind: value * TICK for kind, value in spent.items()}


def total(figures: Iterable[dict[str, float]], kinds: Iterable[str]) -> float:
    """Seconds of the `kinds` over several windows' figures."""
    kinds = tuple(kinds)
    return sum(f.get(kind, 0.0) for f in figures for kind in kinds)


def machine_pace(*, loops: int = 3) -> float:
    """How fast this machine's cores run now: the least CPU time, in seconds, of `loops` runs
    of one fixed Python loop in this process (about 0.2 s on a quiet core). A shared host's
    cores run faster or slower from one minute to the next (the same loop 1.8 to 2.7 s at
    ten times the length on this machine, 2026-12-07, idle each time): a CPU figure is read
    beside it."""
    spent = []
    for _ in range(loops):
        started = time.process_time()
        total = 0
        for i in range(2_000_000):
            total += i * i
        spent.append(time.process_time() - started)
    return min(spent)


def between(rest: list[float], burst: list[float]) -> list[float]:
    """Each of interleaved windows R B R B … R's B against the mean of the R on either side
    (len(rest) == len(burst) + 1): its own ratio, the machine's drift over the run halved."""
    if len(rest) != len(burst) + 1:
        raise ValueError("rest windows must surround the burst windows: R B R … B R")
    return [b / ((rest[i] + rest[i + 1]) / 2) for i, b in enumerate(burst)]
