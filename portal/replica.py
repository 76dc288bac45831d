"""Reads from a streaming replica (architecture.md "Runtime", scale-out): with
DATABASE_REPLICA_URL set, the pages, reports and read APIs of a GET read the replica; writes,
jobs, commands and every read inside a transaction read the primary, and so does a client's
GET until the replica has replayed that client's last write (its WAL position, kept a
minute). Sign-in and its records (users, sessions, API tokens, memberships) are always read
on the primary, so a session or a token made a moment ago is never missed.

A client is its session cookie or its bearer token (hashed); a request without either reads
the replica.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar

from django.conf import settings
from django.core.cache import cache
from django.db import connections

REPLICA = "replica"
LSN_KEPT = 60  # seconds a client's last write is remembered (far above any healthy lag)
_reads: ContextVar[str] = ContextVar("portal_reads", default="default")
# Sign-in's records: read where they are written.
PRIMARY_ONLY = frozenset({"auth", "sessions", "contenttypes", "admin"})
PRIMARY_MODELS = frozenset({"portal.apitoken", "portal.membership"})


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


def reads_alias() -> str:
    """The database this request's reads go to (outside a transaction on the primary)."""
    return _reads.get()


class ReplicaRouter:
    """Reads go where the request decided (`ReplicaReadsMiddleware`); writes, migrations and
    anything inside a transaction on the primary."""

    def db_for_read(self, model, **hints) -> str:
        reads = _reads.get()
        if reads == "default" or connections["default"].in_atomic_block:
            return "default"
        label = model._meta.label_lower
        if model._meta.app_label in PRIMARY_ONLY or label in PRIMARY_MODELS:
            return "default"
        return reads

    def db_for_write(self, model, **hints) -> str:
        return "default"

    def allow_relation(self, obj1, obj2, **hints) -> bool:
        return True  # the same data on both

    def allow_migrate(self, db, app_label, **hints) -> bool:
        return db == "default"


def _client_key(request) -> str | None:
    credential = request.headers.get("Authorization") or request.COOKIES.get(
        settings.SESSION_COOKIE_NAME
    )
    if not credential:
        return None
    return "replica-lsn:" + hashlib.sha256(credential.encode()).hexdigest()


def _primary_lsn() -> str:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        return cursor.fetchone()[0]


def _replayed(lsn: str) -> bool:
    """Whether the replica has replayed the primary's WAL up to `lsn`."""
    with connections[REPLICA].cursor() as cursor:
        cursor.execute("SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)", [lsn])
        return bool(cursor.fetchone()[0])


class ReplicaReadsMiddleware:
    """A GET reads the replica unless its client wrote something the replica has not
    replayed yet; any other method reads the primary and remembers where the primary's WAL
    stood after it, for that client."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not replica_configured():
            return self.get_response(request)
        key = _client_key(request)
        if request.method not in ("GET", "HEAD"):
            response = self.get_response(request)
            if key is not None:
                cache.set(key, _primary_lsn(), LSN_KEPT)
            return response
        written = cache.get(key) if key is not None else None
        token = _reads.set(REPLICA if written is None or _replayed(written) else "default")
        try:
            return self.get_response(request)
        finally:
            _reads.reset(token)
