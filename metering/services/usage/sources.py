"""When each ingestion source last sent usage, per deployment (SourceSeen): written by the
ingestion service after each batch it stores, one upsert per source and deployment."""

from collections.abc import Iterable
from datetime import datetime

from django.db import connection

# Rows a statement: a batch names a few sources and deployments; the most a batch of
# 10,000 events could name stays within SQLite's bound parameters (32,766) a statement.
_ROWS_A_STATEMENT = 1000


def sources_seen_store(*, seen: Iterable[tuple[str, int, datetime]], received_at: datetime) -> None:
    """Upsert (source, deployment id, newest event time) of a batch: the newest event time
    only ever moves forward, the time received is the batch's. Outside the batch's
    transaction and in key order, so concurrent batches neither wait on nor deadlock over
    these rows while they ingest. One statement (one transaction) for the batch's rows: in
    autocommit, a statement a row would commit, and flush the log, once a row."""
    rows = sorted(seen)
    newest = "GREATEST" if connection.vendor == "postgresql" else "max"
    stored = connection.ops.adapt_datetimefield_value
    received = stored(received_at)
    with connection.cursor() as cursor:
        for first in range(0, len(rows), _ROWS_A_STATEMENT):
            chunk = rows[first : first + _ROWS_A_STATEMENT]
            cursor.execute(
                "INSERT INTO metering_sourceseen (source, deployment_id, last_event_at, "  # noqa: S608
                f"last_received_at) VALUES {', '.join(['(%s, %s, %s, %s)'] * len(chunk))} "
                "ON CONFLICT (source, deployment_id) DO UPDATE SET "
                f"last_event_at = {newest}(metering_sourceseen.last_event_at, "
                "EXCLUDED.last_event_at), last_received_at = EXCLUDED.last_received_at",
                [
                    value
                    for source, deployment, time in chunk
                    for value in (source, deployment, stored(time), received)
                ],
            )
