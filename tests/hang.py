"""A test that hangs says where, in the one line a CI summary shows.

pytest-timeout stops a test after `timeout` seconds (pyproject) with "Timeout (>300.0s)" and
no more in the summary. Shortly before, `hang_watch` writes down where the test's thread is in
the project's code and, on PostgreSQL, what the sessions of the test database are doing; a
statement waiting on a lock is cancelled, so the test fails at once, naming the session that
holds the lock. `hang_note` adds that to the failure's summary line.
"""

import contextlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SESSIONS_SQL = """
SELECT pid, state, wait_event_type, wait_event, pg_blocking_pids(pid),
       extract(epoch FROM now() - coalesce(xact_start, query_start))::int, left(query, 160)
  FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'
"""
_NOTES: dict[str, str] = {}  # test node id: what its watch saw


def _where(thread_id: int) -> str:
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(ROOT) and ".venv" not in path.parts:
            return f"{path.relative_to(ROOT)}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return "outside the project's code"


def _sessions() -> str:
    """The test database's busy sessions; the ones waiting on a lock are cancelled."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return ""
    import psycopg

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    try:
        with psycopg.connect(**params, autocommit=True, connect_timeout=5) as db:
            rows = db.execute(SESSIONS_SQL).fetchall()
            for pid, _, _, _, blockers, _, _ in rows:
                if blockers:
                    db.execute("SELECT pg_cancel_backend(%s)", [pid])
    except psycopg.Error as error:
        return f"; the database did not answer ({error})"
    busy = [
        f"pid {pid} {state} {seconds} s"
        + (f" on {kind}/{event}" if kind else "")
        + (f" blocked by {blockers} (cancelled)" if blockers else "")
        + f": {query!r}"
        for pid, state, kind, event, blockers, seconds, query in rows
    ]
    return "; sessions: " + (" | ".join(busy) if busy else "none busy")


@contextlib.contextmanager
def hang_watch(item) -> Iterator[None]:
    """Note what this thread and the database do if the test `item` (its setup, call and
    teardown, as pytest-timeout counts) still runs 30 s before its timeout."""
    marker = item.get_closest_marker("timeout")
    limit = float(marker.args[0] if marker and marker.args else item.config.getini("timeout"))
    if not limit:
        yield
        return
    seconds, node_id, thread_id = max(limit - 30, limit * 0.9), item.nodeid, threading.get_ident()

    def note() -> None:
        where = _where(thread_id)
        _NOTES[node_id] = f"still running after {seconds:.0f} s at {where}{_sessions()}"

    timer = threading.Timer(seconds, note)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def hang_note(node_id: str, report) -> None:
    """Append the watch's note to a failed report's summary line."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.failed and crash is not None and node_id in _NOTES:
        crash.message += f" [{_NOTES.pop(node_id)}]"
