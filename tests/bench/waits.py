"""What a client's statements wait for in PostgreSQL (goal 13): `pg_stat_activity` of the
backends of one application_name (PGAPPNAME in the client's environment, which libpq sends),
sampled every `every` seconds from a session of its own. A backend running a statement
(`state = 'active'`) that waits on a heavyweight lock (a row, a table, a transaction ID)
shows `wait_event_type = 'Lock'`; a short wait can fall between two samples, so the count is
of samples, a lower bound that a longer sampling makes less likely to miss."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

import psycopg

PAGE_APP = "bench-page"  # the application_name of the page's gunicorn


class Activity(NamedTuple):
    """One backend's row of one sample."""

    at: float  # seconds (perf_counter)
    pid: int
    state: str | None
    wait_event_type: str | None
    wait_event: str | None
    query: str


def lock_waits(rows: Iterable[Activity]) -> int:
    """Samples of a running statement waiting on a heavyweight lock."""
    return sum(r.state == "active" and r.wait_event_type == "Lock" for r in rows)


def wait_events(rows: Iterable[Activity]) -> dict[str, int]:
    """Samples of running statements by what they waited for ("type:event"; "CPU" when
    running, no wait event), most frequent first."""
    counts = Counter(
        f"{r.wait_event_type}:{r.wait_event}" if r.wait_event_type else "CPU"
        for r in rows
        if r.state == "active"
    )
    return dict(counts.most_common())


def app_kinds(monitor: psycopg.Connection, app: str, kind: str):
    """Kinds of PostgreSQL's processes for cpu.ChildrenCPU: `kind` for the backends of
    application `app`, each other's backend_type (the monitor's own session "monitor")."""
    own = monitor.info.backend_pid

    def kinds(pids: list[int]) -> dict[int, str | None]:
        rows = monitor.execute(
            "SELECT pid, backend_type, application_name FROM pg_stat_activity WHERE pid = ANY(%s)",
            [pids],
        ).fetchall()
        found = {pid: kind if name == app else backend for pid, backend, name in rows}
        found[own] = "monitor"
        return {pid: found.get(pid) for pid in pids}

    return kinds


class ActivitySampler:
    """Samples the backends of application `app` every `every` s between start() and stop()."""

    QUERY = (
        "SELECT pid, state, wait_event_type, wait_event, left(query, 200)"
        " FROM pg_stat_activity WHERE application_name = %s AND pid <> pg_backend_pid()"
    )

    def __init__(self, dsn: str, app: str, *, every: float = 0.05) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.app = app
        self.every = every
        self.samples = 0
        self._rows: list[Activity] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stopping.wait(self.every):
            at = time.perf_counter()
            self._rows += [Activity(at, *row) for row in self.conn.execute(self.QUERY, [self.app])]
            self.samples += 1

    def start(self) -> None:
        self._rows, self.samples = [], 0
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> list[Activity]:
        assert self._thread is not None, "start() first"
        self._stopping.set()
        self._thread.join()
        return self._rows

    def close(self) -> None:
        self.conn.close()
