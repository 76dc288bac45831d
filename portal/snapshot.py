"""One snapshot of the database for a GET's figures (kpis.md section 0: every read of an open
period answers for the same window with the same figures).

A page or a read API reads the published cut (portal.pipeline.cut_read), then rollups, rated
usage and snapshots in many queries; the worker's stages commit between them all the time
while events arrive. `snapshot_read`, called by the one window resolver when a GET resolves
its period, opens a transaction on the database this request reads that sees every later
read as of one instant: on PostgreSQL REPEATABLE READ, READ ONLY; on SQLite a deferred
transaction (in WAL mode a reader's transaction sees what was committed before its first
read and never takes the write lock, so stages and ingestion never wait for it). A rate that
commits meanwhile is then wholly in the page or not at all. `ReadSnapshotMiddleware` lets a
GET open one (opening it there, not before, keeps sign-in's own write, a token's last use,
out of it) and ends it once the response is rendered. Jobs, commands, writes, and code
already inside a transaction (tests) open none.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager, suppress
from contextvars import ContextVar

import psycopg
from django.db import DatabaseError, connections, transaction
from psycopg import IsolationLevel

from portal.replica import reads_alias

# The snapshot a GET may open (an empty list until it does), or None outside a GET.
_held: ContextVar[list | None] = ContextVar("portal_read_snapshot", default=None)


def snapshot_read() -> None:
    """From now on, this GET reads the database as of one instant (module docstring)."""
    held = _held.get()
    if held is None or held:
        return  # not a GET, or its snapshot is open already
    atomic = _begin(reads_alias())
    if atomic is not None:
        held.append(atomic)


@contextmanager
def read_snapshot():
    """The reads inside see the database as of one instant (a stage's reads: what it
    consumes of a change log and the rows it reads with it); nothing when already inside a
    transaction."""
    atomic = _begin("default")
    if atomic is None:
        yield
        return
    try:
        yield
    except BaseException:  # a failure (or a worker's death) inside: rolled back, not committed
        atomic.__exit__(*sys.exc_info())
        raise
    _end(atomic)


class _SnapshotAtomic(transaction.Atomic):
    """Django's atomic block on PostgreSQL whose transaction begins REPEATABLE READ, READ ONLY:
    psycopg writes them into the BEGIN it sends with the first read (a SET TRANSACTION
    after it was a round trip more at every GET); the connection's own settings are put
    back when the block ends."""

    def __enter__(self):
        connection = transaction.get_connection(self.using)
        connection.close_if_health_check_failed()  # the connection the reads will use
        connection.ensure_connection()
        raw = connection.connection
        self._previous = (raw, raw.isolation_level, raw.read_only)
        raw.isolation_level, raw.read_only = IsolationLevel.REPEATABLE_READ, True
        try:
            super().__enter__()
        except BaseException:
            self._restore()
            raise

    def __exit__(self, exc_type, exc_value, traceback):
        try:
            return super().__exit__(exc_type, exc_value, traceback)
        finally:
            self._restore()

    def _restore(self) -> None:
        raw, level, read_only = self._previous
        if raw.closed:
            return
        try:
            raw.isolation_level, raw.read_only = level, read_only
        except psycopg.Error:  # never leave a connection read-only for the next request
            transaction.get_connection(self.using).close()


def _begin(alias: str) -> transaction.Atomic | None:
    """A read-only transaction of one snapshot on `alias` (None inside a transaction)."""
    connection = connections[alias]
    if connection.in_atomic_block:
        return None
    if connection.vendor != "sqlite":
        atomic = _SnapshotAtomic(alias, savepoint=True, durable=False)
        atomic.__enter__()
        return atomic
    # A deferred BEGIN: the portal's IMMEDIATE one would take the write lock.
    atomic = transaction.atomic(using=alias)
    mode, connection.transaction_mode = connection.transaction_mode, "DEFERRED"
    try:
        atomic.__enter__()
    finally:
        connection.transaction_mode = mode
    return atomic


def _end(atomic: transaction.Atomic) -> None:
    # Read only: a commit ends it. Should it fail, the reads are done and atomic has rolled
    # back what it could not commit.
    with suppress(DatabaseError):
        atomic.__exit__(None, None, None)


class ReadSnapshotMiddleware:
    """A GET (or HEAD) may open one read snapshot (`snapshot_read`); it ends with the
    response, rendered. Last in MIDDLEWARE: the export audit's write comes after it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        held: list = []
        token = _held.set(held)
        try:
            return self.get_response(request)
        finally:
            _held.reset(token)
            for atomic in held:
                _end(atomic)
