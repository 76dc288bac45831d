"""Usage ingestion: resolve slugs, deduplicate on (source, id), store all or nothing.

PostgreSQL: events are staged with one binary COPY, then one statement inserts their keys
with `INSERT … ON CONFLICT DO NOTHING` into the unpartitioned key table (the unique index
serialises concurrent replays), only the new keys' events into the monthly partitions,
their run of ids into the fold's queue, and the batch's sources seen. SQLite (the embedded
default) writes the keys and events with one `executemany` each, and the sources seen with
one upsert.
Both paths queue the new events for the fold (FoldPending, one row a batch) in the same
transaction, and ask for a fold once it commits: the request itself never folds.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from django.db import IntegrityError, ProgrammingError, connection, transaction

from metering.domain.usage.dedupe import dedupe_within_batch
from metering.domain.usage.fields import EventError, EventIn, EventRef
from metering.models import EventKey
from metering.selectors.factory import placements_read
from metering.services.usage.sources import sources_seen_store, sources_seen_upsert
from portal.models import Tenant
from portal.pipeline import FOLD, stage_schedule

CONFLICT = "this (source, id) is already stored with a different payload"

# Key ids are handed out a block at a time (the key table's identity column steps by this,
# migration 0011): a batch's events take ids from its own block, so the fold's queue names
# them as one run (FoldPending) that no other batch's ids fall in. A batch of more new
# events is stored a block at a time, in the same transaction.
EVENT_ID_BLOCK = 10_000

_EVENT_COLUMNS = (
    "time, tenant_id, deployment_id, input_tokens, cached_tokens, output_tokens, ttft_ms, "
    "tpot_ms, latency_ms, is_error, requests, cache_write_tokens, reasoning_tokens"
)


@dataclass(frozen=True)
class IngestResult:
    accepted: int
    duplicates: int
    # Under the partial rule (OTLP): the events left out, each error naming its position in
    # the batch and the field (`id` for a changed payload of a known (source, id)).
    rejected: tuple[EventError, ...] = ()


class IngestRejected(Exception):
    """The batch is invalid: nothing was stored. `errors` name each event's index and field;
    `received`: the events the batch held (0: not known)."""

    http_status = 400

    def __init__(self, errors: list[EventError], *, received: int = 0, source: str = ""):
        super().__init__(f"{len(errors)} invalid event(s)")
        self.errors = errors
        self.received = received
        self.source = source  # the batch's sources, for the ingestion debugger

    def api_errors(self) -> list[dict]:
        return [e.as_dict() for e in self.errors]


class IngestConflict(Exception):
    """Events reuse a stored (source, id) with a different payload: nothing was stored."""

    http_status = 409

    def __init__(self, indexes: list[int], *, received: int = 0, source: str = ""):
        super().__init__(f"{len(indexes)} conflicting event(s)")
        self.indexes = indexes
        self.received = received
        self.source = source

    def api_errors(self) -> list[dict]:
        return [{"index": i, "field": "id", "message": CONFLICT} for i in self.indexes]


class _Row(NamedTuple):  # a tuple: built for every event of every batch
    event: EventIn
    tenant_id: int
    deployment_id: int


def usage_ingest(
    *, events: Sequence[EventIn], received_at: datetime, partial: bool = False
) -> IngestResult:
    """Store a validated batch all or nothing; replays of a stored (source, id) with the same
    payload are counted as duplicates, with another payload they are a conflict (409).
    `partial` (OTLP's rule, architecture.md "Ingestion"): the events that cannot be stored
    (an unknown tenant, model or deployment; a changed payload for a known id) are left out
    and reported in the result's `rejected`, every other event is stored."""
    rows, errors = _resolve(events)
    if errors and not partial:
        refused = {error.index for error in errors}
        fine = [i for i in range(len(events)) if i not in refused]
        conflicts = usage_conflict_errors(events=[events[i] for i in fine], indexes=fine)
        errors = sorted([*errors, *conflicts], key=lambda error: error.index)
        raise IngestRejected(errors, received=len(events), source=batch_sources(events))
    refused = {error.index for error in errors}
    positions = [i for i in range(len(events)) if i not in refused]  # of the events kept
    kept = [events[i] for i in positions]
    unique, duplicates, conflicts = dedupe_within_batch(events=kept)
    if conflicts and not partial:
        raise IngestConflict(conflicts, received=len(events), source=batch_sources(events))
    rejected = [*errors, *(EventError(positions[i], "id", CONFLICT) for i in conflicts)]
    # The row of each key's first occurrence, the one `unique` keeps.
    by_key = {(row.event.source, row.event.id): row for row in reversed(rows)}
    unique_rows = [by_key[(e.source, e.id)] for e in unique]
    accepted = replayed = 0
    while unique_rows:
        try:
            accepted, replayed = _store(unique_rows, kept, received_at)
            break
        except IngestConflict as conflict:
            if not partial:
                raise IngestConflict(
                    conflict.indexes, received=len(events), source=batch_sources(events)
                ) from None
            # Left out, and the rest stored without them (nothing of the first try was).
            seen = {error.index for error in rejected}
            new = [i for i in conflict.indexes if positions[i] not in seen]
            keys = {(kept[i].source, kept[i].id) for i in new}
            rejected += [EventError(positions[i], "id", CONFLICT) for i in new]
            duplicates -= len(new) - len(keys)  # their repeats in the batch: refused too
            unique_rows = [r for r in unique_rows if (r.event.source, r.event.id) not in keys]
    return IngestResult(
        accepted=accepted,
        duplicates=duplicates + replayed,
        rejected=tuple(sorted(rejected, key=lambda error: error.index)),
    )


def batch_sources(events: Sequence) -> str:
    """The distinct sources of a batch (events, or raw items whose source is well-formed),
    as the ingestion debugger names them."""
    names = set()
    for event in events:
        if type(event) is dict:
            source = event.get("source", "default")
        else:  # an EventIn, or None for a record that could not be converted
            source = getattr(event, "source", None)
        if type(source) is str:
            names.add(source)
    return ", ".join(sorted(names))[:128]


def _store(rows: Sequence[_Row], events: Sequence[EventIn], received_at: datetime):
    """Store the rows (the first occurrence of each key of `events`) in one transaction;
    returns (accepted, replays of stored events)."""
    postgresql = connection.vendor == "postgresql"
    if postgresql:
        usage_partitions_ensure(times=[r.event.time for r in rows])
    for attempt in range(2):
        # SQLite: the first pass reads the stored keys before its transaction takes the
        # write lock, so other writers wait less; a key stored in between fails the insert
        # (IntegrityError) and the second pass reads them under the lock.
        stored = None if postgresql or attempt else _stored_digests([r.event for r in rows])
        try:
            with transaction.atomic():
                if postgresql:
                    accepted, replayed = _store_postgresql(rows, events, received_at)
                else:
                    accepted, replayed = _store_sqlite(rows, events, received_at, stored)
                if accepted:
                    stage_schedule(FOLD)
            return accepted, replayed
        except IntegrityError:
            # Another writer stored some of these keys or ids between our check and insert
            # (SQLite without IMMEDIATE transactions); the second pass sees them. Or a
            # partition this process knew of is gone (its month archived, a test's
            # rollback): the second pass looks again.
            if attempt:
                raise
            if postgresql:
                _partitions_known.clear()
                usage_partitions_ensure(times=[r.event.time for r in rows])
    raise AssertionError("unreachable")


def usage_reference_errors(*, refs: Sequence[EventRef]) -> list[EventError]:
    """Errors naming each reference of `refs` to an unknown or closed tenant, an unknown
    model or a model without a deployment on the pool (stores nothing). For a batch refused
    for its field errors, so one answer lists every error of every kind."""
    return _check_references(refs)[1]


def usage_conflict_errors(*, events: Sequence[EventIn], indexes: Sequence[int]) -> list[EventError]:
    """Errors naming `id` for each of `events` (at `indexes` of its batch) whose (source, id)
    is stored, or earlier in the batch, with another payload (stores nothing). For a batch
    refused for other errors, so one answer lists every error of every kind."""
    _, _, repeats = dedupe_within_batch(events=events)
    stored = _conflict_indexes(events, _stored_digests(events))
    return [EventError(indexes[i], "id", CONFLICT) for i in sorted({*repeats, *stored})]


def _resolve(events: Sequence[EventIn]) -> tuple[list[_Row], list[EventError]]:
    """Map tenant, model (slug or alias) and pool slugs to ids; unknown ones are errors."""
    # A batch names few distinct (tenant, model, pool): each is checked once, and only a
    # batch with an unknown one is checked event by event, so each error names its event.
    distinct: dict[tuple[str, str, str | None], int] = {}
    for e in events:
        distinct.setdefault((e.tenant, e.model, e.pool), len(distinct))
    placed, errors = _check_references([EventRef(i, *key, True) for key, i in distinct.items()])
    if errors:
        refs = [EventRef(i, e.tenant, e.model, e.pool, True) for i, e in enumerate(events)]
        placed, errors = _check_references(refs)
        pairs = zip(events, placed, strict=True)
        return [_Row(event, *ids) for event, ids in pairs if ids is not None], errors
    ids_of = dict(zip(distinct, placed, strict=True))
    return [_Row(e, *ids_of[(e.tenant, e.model, e.pool)]) for e in events], errors


def _check_references(
    refs: Sequence[EventRef],
) -> tuple[list[tuple[int, int] | None], list[EventError]]:
    """Per reference (tenant id, deployment id), or None when an error names why."""
    slugs = {r.tenant for r in refs if r.tenant is not None}
    tenants = {
        slug: (pk, status)
        for slug, pk, status in Tenant.objects.filter(slug__in=slugs).values_list(
            "slug", "id", "status"
        )
    }
    known = placements_read(names={r.model for r in refs if r.model is not None})
    # A batch names few distinct tenants and (model, pool) pairs: decide each once.
    tenant_ids: dict[str, int | None] = {}  # None: refused (unknown or closed)
    for slug in slugs:
        tenant = tenants.get(slug)
        ok = tenant is not None and tenant[1] != Tenant.Status.CLOSED
        tenant_ids[slug] = tenant[0] if ok else None
    placements: dict[tuple[str, str | None], tuple[int | None, tuple[str, str] | None]] = {}
    placed: list[tuple[int, int] | None] = []
    errors: list[EventError] = []
    append = placed.append
    for ref in refs:
        tenant_id = None if ref.tenant is None else tenant_ids[ref.tenant]
        deployment_id, problem = None, None
        if ref.model is not None:
            key = (ref.model, ref.pool)
            if not ref.is_placeable:
                if ref.model not in known.model_ids:
                    problem = ("model", f"unknown model {ref.model!r}")
            elif key in placements:
                deployment_id, problem = placements[key]
            else:
                deployment, problem = known.place(ref.model, ref.pool)
                deployment_id = None if deployment is None else deployment.id
                placements[key] = (deployment_id, problem)
        if tenant_id is not None and deployment_id is not None:
            append((tenant_id, deployment_id))
            continue
        append(None)
        if ref.tenant is not None and tenant_id is None:
            if ref.tenant not in tenants:
                errors.append(EventError(ref.index, "tenant", f"unknown tenant {ref.tenant!r}"))
            else:
                message = f"tenant {ref.tenant!r} is closed"
                errors.append(EventError(ref.index, "tenant", message))
        if problem:
            errors.append(EventError(ref.index, problem[0], problem[1]))
    return placed, errors


def _conflict_indexes(events: Sequence[EventIn], stored: dict[tuple[str, str], str]) -> list[int]:
    return [
        index
        for index, e in enumerate(events)
        if (e.source, e.id) in stored and not e.is_replay_of(stored[(e.source, e.id)])
    ]


def _store_sqlite(
    rows: Sequence[_Row],
    events: Sequence[EventIn],
    received_at: datetime,
    stored: dict[tuple[str, str], str] | None,
) -> tuple[int, int]:
    """Keys and events with one `executemany` each (the ORM's bulk_create spent four fifths
    of the time building statements), and their run in the fold's queue. The transaction
    holds SQLite's write lock from its start (IMMEDIATE, portal.settings), so this writer
    alone numbers the keys. `stored`: the keys of `rows` already stored, read before the
    transaction (None: read now)."""
    if stored is None:
        stored = _stored_digests([r.event for r in rows])
    conflicts = _conflict_indexes(events, stored)
    if conflicts:
        raise IngestConflict(conflicts)
    new_rows = [r for r in rows if (r.event.source, r.event.id) not in stored]
    newest: dict[tuple[str, int], datetime] = {}
    for row in rows:
        key = (row.event.source, row.deployment_id)
        newest[key] = max(row.event.time, newest.get(key, row.event.time))
    sources_seen_store(seen=[(*key, time) for key, time in newest.items()], received_at=received_at)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = %s), 0), "
            "coalesce((SELECT max(id) FROM metering_eventkey), 0))",
            [EventKey._meta.db_table],
        )
        first = cursor.fetchone()[0] + 1
        instant = connection.ops.adapt_datetimefield_value  # as Django stores it: naive UTC
        received = instant(received_at)
        numbered = list(enumerate(new_rows, start=first))
        cursor.executemany(
            "INSERT INTO metering_eventkey (id, source, event_id, payload_hash, received_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            [
                (pk, r.event.source, r.event.id, r.event.payload_hash, received)
                for pk, r in numbered
            ],
        )
        cursor.executemany(
            f"INSERT INTO metering_usageevent (id, {_EVENT_COLUMNS}) "  # noqa: S608 (constants)
            f"VALUES ({', '.join(['%s'] * 14)})",
            [(pk, instant(r.event.time), *_event_values(r)) for pk, r in numbered],
        )
        if numbered:  # this writer alone numbers keys: its ids are one run
            times = [r.event.time for r in new_rows]
            cursor.execute(
                "INSERT INTO metering_foldpending (first_id, last_id, time_min, time_max, "
                "events, queued_at) VALUES (%s, %s, %s, %s, %s, %s)",
                [first, numbered[-1][0], instant(min(times)), instant(max(times)),
                 len(numbered), received],
            )  # fmt: skip
    return len(new_rows), len(rows) - len(new_rows)


def _stored_digests(events: Sequence[EventIn]) -> dict[tuple[str, str], str]:
    """The payload hash of each (source, id) of `events` already stored."""
    keys = {(e.source, e.id) for e in events}
    stored: dict[tuple[str, str], str] = {}
    sources = {s for s, _ in keys}
    for chunk_start in range(0, len(events), 500):
        chunk = events[chunk_start : chunk_start + 500]
        for source, event_id, digest in EventKey.objects.filter(
            source__in=sources, event_id__in=[e.id for e in chunk]
        ).values_list("source", "event_id", "payload_hash"):
            if (source, event_id) in keys:
                stored[(source, event_id)] = digest
    return stored


def _event_values(row: _Row) -> tuple:
    """An event's columns after (id, time), in the order both stores write them."""
    e = row.event
    return (
        row.tenant_id,
        row.deployment_id,
        e.input_tokens,
        e.cached_tokens,
        e.output_tokens,
        e.ttft_ms,
        e.tpot_ms,
        e.latency_ms,
        e.status == "error",
        e.requests,
        e.cache_write_tokens,
        e.reasoning_tokens,
    )


_STAGE_TYPES = [
    "int4", "text", "text", "text", "timestamptz", "int8", "int8", "int8", "int8", "int8",
    "float8", "float8", "float8", "bool", "int4", "int8", "int8",
]  # fmt: skip
# One round trip. The table is empty unless used twice in one transaction (ON COMMIT DELETE
# ROWS empties it at commit); DELETE on an empty table is cheaper than TRUNCATE, which
# makes a new relation file each time.
_STAGE_EMPTY = (
    "CREATE TEMP TABLE IF NOT EXISTS ingest_events (n int4, source text, event_id text, "
    "payload_hash text, time timestamptz, tenant_id int8, deployment_id int8, "
    "input_tokens int8, cached_tokens int8, output_tokens int8, ttft_ms float8, "
    "tpot_ms float8, latency_ms float8, is_error bool, requests int4, "
    "cache_write_tokens int8, reasoning_tokens int8) ON COMMIT DELETE ROWS; "
    "DELETE FROM ingest_events"
)
# The keys not stored yet take ids from one new block, in the order of the staged rows
# (sorted: concurrent batches lock keys in the same order, no deadlock); only their events
# reach the partitions, and their run joins the fold's queue: one statement, and no id
# travels back to Python.
_STORE = (
    "WITH block AS MATERIALIZED (SELECT nextval(pg_get_serial_sequence('metering_eventkey', "  # noqa: S608
    "'id')) AS first), "
    "keys AS (INSERT INTO metering_eventkey (id, source, event_id, payload_hash, received_at) "
    "SELECT block.first + s.n, s.source, s.event_id, s.payload_hash, %(received)s "
    "FROM ingest_events s, block ORDER BY s.source, s.event_id "
    "ON CONFLICT (source, event_id) DO NOTHING RETURNING id, source, event_id), "
    f"stored AS (INSERT INTO metering_usageevent (id, {_EVENT_COLUMNS}) "
    f"SELECT k.id, {', '.join('s.' + c for c in _EVENT_COLUMNS.split(', '))} "
    "FROM keys k JOIN ingest_events s USING (source, event_id) RETURNING id, time), "
    "queued AS (INSERT INTO metering_foldpending (first_id, last_id, time_min, time_max, "
    "events, queued_at) SELECT min(id), max(id), min(time), max(time), count(*), %(received)s "
    "FROM stored HAVING count(*) > 0), "
    # Read by nothing, so run once the rest is done: the batch's sources seen (its replays
    # too), their rows locked from here to the commit.
    "seen AS ("
    + sources_seen_upsert(
        "SELECT source, deployment_id, max(time), %(received)s FROM ingest_events "
        "GROUP BY source, deployment_id ORDER BY source, deployment_id",
        vendor="postgresql",
    )
    + ") SELECT count(*) FROM stored"
)


def _store_postgresql(
    rows: Sequence[_Row], events: Sequence[EventIn], received_at: datetime
) -> tuple[int, int]:
    accepted = 0
    with connection.cursor() as cursor:
        raw = cursor.cursor
        for first in range(0, len(rows), EVENT_ID_BLOCK):
            cursor.execute(_STAGE_EMPTY)
            with raw.copy("COPY ingest_events FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(_STAGE_TYPES)
                write_row = copy.write_row
                for n, r in enumerate(rows[first : first + EVENT_ID_BLOCK]):
                    e = r.event
                    write_row((n, e.source, e.id, e.payload_hash, e.time, *_event_values(r)))
            cursor.execute(_STORE, {"received": received_at})
            stored = cursor.fetchone()[0]
            accepted += stored
            if stored < min(EVENT_ID_BLOCK, len(rows) - first):
                # Some keys were stored before: a replay, or a conflict when the payload differs.
                cursor.execute(
                    "SELECT k.source, k.event_id, k.payload_hash FROM metering_eventkey k "
                    "JOIN ingest_events s USING (source, event_id) "
                    "WHERE k.payload_hash <> s.payload_hash"
                )
                conflicts = _conflict_indexes(events, {(s, i): h for s, i, h in cursor.fetchall()})
                if conflicts:
                    raise IngestConflict(conflicts)
    return accepted, len(rows) - accepted


def _month_start(time: datetime) -> datetime:
    return time.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


# The partitions this process has seen exist: a batch looks each month up once a process,
# not once a batch. One that is gone since (archived) fails the insert, and `_store` looks
# again.
_partitions_known: set[str] = set()


def usage_partitions_ensure(*, times: Sequence[datetime]) -> None:
    """Create the monthly partitions of the usage event table that `times` fall in."""
    # (year, month) of UTC times directly: this runs for every event of every batch.
    months = {(t.year, t.month) for t in times if t.tzinfo is UTC}
    starts = {datetime(year, month, 1, tzinfo=UTC) for year, month in months}
    starts.update(_month_start(t) for t in times if t.tzinfo is not UTC)
    for start in sorted(starts):
        name = f"metering_usageevent_p{start:%Y%m}"
        if name in _partitions_known:
            continue
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s)", [name])
            if cursor.fetchone()[0] is not None:
                _partitions_known.add(name)
                continue
        end = _month_start(start + timedelta(days=32))
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                # DDL takes no bind parameters; the bounds are datetimes made here.
                cursor.execute(
                    f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF metering_usageevent "
                    f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
                )
        except (IntegrityError, ProgrammingError):
            pass  # created by a concurrent request at the same moment
        _partitions_known.add(name)
