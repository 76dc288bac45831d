"""When each ingestion source last sent usage, per deployment (SourceSeen): written with each
batch the ingestion service stores, one upsert per source and deployment."""

from collections.abc import Iterable
from datetime import datetime

from django.db import connection

# Rows a statement: a batch names a few sources and deployments; the most a batch of
# 10,000 events could name stays within SQLite's bound parameters (32,766) a statement.
_ROWS_A_STATEMENT = 1000


def sources_seen_upsert(rows: str, *, vendor: str) -> str:
    """The statement that upserts the (source, deployment_id, last_event_at,
    last_received_at) rows `rows` yields (a VALUES list or a SELECT, in key order): the
    newest event time only ever moves forward, the time received is the batch's."""
    newest = "GREATEST" if vendor == "postgresql" else "max"
    return (
        "INSERT INTO metering_sourceseen (source, deployment_id, last_event_at, "
        f"last_received_at) {rows} ON CONFLICT (source, deployment_id) DO UPDATE SET "
        f"last_event_at = {newest}(metering_sourceseen.last_event_at, EXCLUDED.last_event_at), "
        "last_received_at = EXCLUDED.last_received_at"
    )


def sources_seen_store(*, seen: Iterable[tuple[str, int, datetime]], received_at: datetime) -> None:
    """Upsert (source, deployment id, newest event time) of a batch received at
    `received_at`, one statement for the batch's rows (SQLite's store; PostgreSQL's storing
    statement upserts them itself)."""
    rows = sorted(seen)
    stored = connection.ops.adapt_datetimefield_value
    received = stored(received_at)
    with connection.cursor() as cursor:
        for first in range(0, len(rows), _ROWS_A_STATEMENT):
            chunk = rows[first : first + _ROWS_A_STATEMENT]
            values = f"VALUES {', '.join(['(%s, %s, %s, %s)'] * len(chunk))}"
            cursor.execute(
                sources_seen_upsert(values, vendor=connection.vendor),
                [
                    value
                    for source, deployment, time in chunk
                    for value in (source, deployment, stored(time), received)
                ],
            )
