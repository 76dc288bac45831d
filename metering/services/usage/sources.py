"""When each ingestion source last sent usage, per deployment (SourceSeen): written by the
ingestion service after each batch it stores, one upsert per source and deployment."""

from collections.abc import Iterable
from datetime import datetime

from django.db import connection


def sources_seen_store(*, seen: Iterable[tuple[str, int, datetime]], received_at: datetime) -> None:
    """Upsert (source, deployment id, newest event time) of a batch: the newest event time
    only ever moves forward, the time received is the batch's. Outside the batch's
    transaction and in key order, so concurrent batches neither wait on nor deadlock over
    these rows while they ingest."""
    rows = sorted(seen)
    if not rows:
        return
    newest = "GREATEST" if connection.vendor == "postgresql" else "max"
    stored = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO metering_sourceseen (source, deployment_id, last_event_at, "  # noqa: S608
            "last_received_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (source, deployment_id) DO UPDATE SET "
            f"last_event_at = {newest}(metering_sourceseen.last_event_at, "
            "EXCLUDED.last_event_at), last_received_at = EXCLUDED.last_received_at",
            [
                (source, deployment, stored(time), stored(received_at))
                for source, deployment, time in rows
            ],
        )
