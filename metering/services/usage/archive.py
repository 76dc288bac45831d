"""Retention of raw usage events (architecture.md "Runtime", the `retention` job): the raw
events of a month past the retention window (`time_window`: the start of the UTC month 13
months before now) whose invoices are issued (a closed month) are written to Parquet, one
file per month under USAGE_ARCHIVE_DIR, with their idempotency keys; the file is read back
and checked (its SHA-256, its row count and token sums against the database's) before the
month's events and keys are dropped (PostgreSQL: its partition; SQLite: deleted by month),
and the month is marked incomplete in raw events for the pools it served, so nothing is ever
folded again from events that are gone. Rollups, rated usage, KPI snapshots and invoices
stay. `manifest.json` beside the files lists each month's file, rows and SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Sum
from django.db.models.functions import TruncMonth

from metering.domain.usage.fields import time_window
from metering.models import (
    Deployment,
    EventKey,
    FoldPending,
    IncompleteRawMonth,
    Pool,
    UsageEvent,
)
from metering.services.usage.changes import raw_months_incomplete_mark
from portal import clock
from portal.closing import month_is_closed
from portal.periods import month_start, next_month
from portal.services import audit_record

log = logging.getLogger(__name__)

CHUNK = 50_000  # events read and written at a time (one Parquet row group each)
SUMS = ("requests", "input_tokens", "output_tokens")  # checked file against database
EVENT_FIELDS = (
    "id", "time", "tenant_id", "tenant__slug", "deployment_id", "deployment__slug",
    "input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens",
    "reasoning_tokens", "ttft_ms", "tpot_ms", "latency_ms", "is_error", "requests",
)  # fmt: skip
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("source", pa.string()),
        ("event_id", pa.string()),
        ("payload_hash", pa.string()),
        ("received_at", pa.timestamp("us", tz="UTC")),
        ("time", pa.timestamp("us", tz="UTC")),
        ("tenant_id", pa.int64()),
        ("tenant", pa.string()),
        ("deployment_id", pa.int64()),
        ("deployment", pa.string()),
        ("input_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("cache_write_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("reasoning_tokens", pa.int64()),
        ("ttft_ms", pa.float64()),
        ("tpot_ms", pa.float64()),
        ("latency_ms", pa.float64()),
        ("is_error", pa.bool_()),
        ("requests", pa.int64()),
    ]
)


class ArchiveMismatch(Exception):
    """The file read back does not hold what the database does: nothing is dropped."""


@dataclass(frozen=True)
class MonthArchive:
    month: datetime
    file: str  # its name under USAGE_ARCHIVE_DIR
    rows: int
    sha256: str


def archive_dir() -> Path:
    return Path(settings.USAGE_ARCHIVE_DIR)


def usage_archive(*, now: datetime | None = None) -> list[MonthArchive]:
    """The retention job's archive: every closed month before the retention window that
    still has raw events, fully folded, archived, checked and dropped, oldest first. A month
    not closed yet, or with events not folded yet, waits for a later run."""
    earliest = time_window(now=now or clock.now()).earliest
    months = (
        UsageEvent.objects.filter(time__lt=earliest)
        .annotate(month=TruncMonth("time"))
        .values_list("month", flat=True)
        .distinct()
    )
    done = []
    for month in sorted(month_start(_aware(m)) for m in months):
        end = next_month(month)
        if not month_is_closed(month):
            log.warning("retention: %s is past retention but not closed: kept", f"{month:%Y-%m}")
        elif FoldPending.objects.filter(time_max__gte=month, time_min__lt=end).exists():
            log.warning("retention: %s has events not folded yet: kept", f"{month:%Y-%m}")
        else:
            done.append(_archive_month(month))
    return done


def _aware(value) -> datetime:
    """A TruncMonth of a time (naive on SQLite) as an aware UTC instant."""
    return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _archive_month(month: datetime) -> MonthArchive:
    events = UsageEvent.objects.filter(time__gte=month, time__lt=next_month(month))
    expected = events.aggregate(rows=Count("id"), **{name: Sum(name) for name in SUMS})
    directory = archive_dir()
    directory.mkdir(parents=True, exist_ok=True)
    name = f"usage-events-{month:%Y-%m}.parquet"
    path = directory / name
    _write(events, path)
    archive = MonthArchive(month=month, file=name, rows=expected["rows"], sha256=_sha256(path))
    archive_verify(path, rows=archive.rows, sha256=archive.sha256, sums=expected)
    _manifest_add(archive)
    pools = Pool.objects.filter(
        pk__in=Deployment.objects.filter(pk__in=events.values("deployment_id").distinct()).values(
            "pool_id"
        )
    )
    with transaction.atomic():
        raw_months_incomplete_mark(
            pools=list(pools), months=[month], reason=IncompleteRawMonth.Reason.ARCHIVED
        )
        EventKey.objects.filter(id__in=events.values("id")).delete()
        _drop(month, events)
        audit_record(
            actor=None, action="usage.archive", object_type="usage_month",
            object_id=f"{month:%Y-%m}", after={"file": name, "rows": archive.rows,
                                               "sha256": archive.sha256},
        )  # fmt: skip
    log.info("retention: %s archived to %s (%d events)", f"{month:%Y-%m}", name, archive.rows)
    return archive


def _write(events, path: Path) -> None:
    """The month's events with their keys, in id order, one row group per CHUNK; written
    beside the target and renamed over it once synced, so a crash leaves no half file."""
    partial = path.with_suffix(".partial")
    with pq.ParquetWriter(partial, SCHEMA) as writer:
        rows = events.order_by("id").values_list(*EVENT_FIELDS).iterator(chunk_size=CHUNK)
        chunk: list[tuple] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) == CHUNK:
                writer.write_batch(_batch(chunk))
                chunk = []
        if chunk:
            writer.write_batch(_batch(chunk))
    with open(partial, "rb") as written:
        os.fsync(written.fileno())
    partial.replace(path)


def _batch(rows: list[tuple]) -> pa.RecordBatch:
    keys = {
        key.id: key
        for key in EventKey.objects.filter(id__in=[row[0] for row in rows]).only(
            "source", "event_id", "payload_hash", "received_at"
        )
    }
    columns = dict(zip(EVENT_FIELDS, zip(*rows, strict=True), strict=True))
    ids = columns["id"]
    data = {
        "id": ids,
        "source": [keys[i].source for i in ids],
        "event_id": [keys[i].event_id for i in ids],
        "payload_hash": [keys[i].payload_hash for i in ids],
        "received_at": [keys[i].received_at for i in ids],
        "tenant": columns["tenant__slug"],
        "deployment": columns["deployment__slug"],
        **{
            name: columns[name]
            for name in SCHEMA.names
            if name in columns and name not in ("tenant", "deployment")
        },
    }
    return pa.RecordBatch.from_pydict({name: data[name] for name in SCHEMA.names}, schema=SCHEMA)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def archive_verify(path: Path, *, rows: int, sha256: str, sums: dict | None = None) -> None:
    """Read an archive back: ArchiveMismatch unless its SHA-256 is `sha256`, it holds `rows`
    rows and (given) the same token sums as the database."""
    if _sha256(path) != sha256:
        raise ArchiveMismatch(f"{path.name}: its SHA-256 is not the one recorded")
    table = pq.read_table(path, columns=list(SUMS))
    if table.num_rows != rows:
        raise ArchiveMismatch(f"{path.name}: {table.num_rows} rows, the database has {rows}")
    for name in (sums or {}).keys() & set(SUMS):
        read = pc.sum(table[name]).as_py() or 0
        if read != (sums[name] or 0):
            raise ArchiveMismatch(f"{path.name}: {name} sums to {read}, not {sums[name]}")


def manifest() -> dict:
    """The archive's manifest: per file, its month, rows, SHA-256 and when it was written."""
    path = archive_dir() / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _manifest_add(archive: MonthArchive) -> None:
    entries = manifest()
    entries[archive.file] = {
        "month": f"{archive.month:%Y-%m}",
        "rows": archive.rows,
        "sha256": archive.sha256,
        "archived_at": clock.now().isoformat(),
    }
    path = archive_dir() / "manifest.json"
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
    partial.replace(path)


def _drop(month: datetime, events) -> None:
    """The month's raw events go: its partition on PostgreSQL (DDL: no bind parameters; the
    name is made here), then any row of it left elsewhere; its rows on SQLite."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS metering_usageevent_p{month:%Y%m}")
    events.delete()
