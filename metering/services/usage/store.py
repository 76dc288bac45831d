"""Storing a batch of placed events (metering.services.usage.ingest stores through it): keys,
events, the fold's queue and the sources seen, in one transaction.

PostgreSQL: one statement, given the batch's keys as arrays, inserts them with
`INSERT … ON CONFLICT DO NOTHING` into the unpartitioned key table (the unique index
serialises concurrent replays) and returns which were new; only their events go to the
monthly partitions, by a binary COPY (a page of rows at a time), then one statement queues
their run of ids for the fold and upserts the batch's sources seen. Those statements are
prepared once a connection. SQLite (the embedded
default) writes the keys and events with one `executemany` each, and the sources seen with
one upsert.
Both paths queue the new events for the fold (FoldPending, one row a batch) in the same
transaction, and ask for a fold once it commits: the request itself never folds.
"""

from collections.abc import Sequence
from datetime import UTC, datetime

from django.db import IntegrityError, ProgrammingError, connection, transaction

from metering.domain.usage.dedupe import stored_conflicts
from metering.domain.usage.fields import EventIn
from metering.models import EventKey
from metering.selectors.ingestion import PlacedEvent, stored_digests
from metering.services.usage.sources import sources_seen_store, sources_seen_upsert
from portal.bulk import prepared_cursor
from portal.periods import month_start, next_month
from portal.pipeline import FOLD, stage_schedule
from portal.projects import NONE_ID, projects_ensure


class StoredConflict(Exception):
    """Events of the batch (their positions in it) reuse a stored (source, id) with another
    payload: nothing was stored."""

    def __init__(self, indexes: list[int]):
        super().__init__(f"{len(indexes)} conflicting event(s)")
        self.indexes = indexes


class ProjectsFull(Exception):
    """Events of the batch (their positions in it) name new projects of a tenant that has no
    room for them (portal.projects.MAX_PROJECTS), filled by a batch stored meanwhile:
    nothing was stored."""

    def __init__(self, indexes: list[int]):
        super().__init__(f"{len(indexes)} event(s) past their tenant's projects")
        self.indexes = indexes


# Key ids are handed out a block at a time (the key table's identity column steps by this,
# migration 0011): a batch's events take ids from its own block, so the fold's queue names
# them as one run (FoldPending) that no other batch's ids fall in. A batch of more new
# events is stored a block at a time, in the same transaction.
EVENT_ID_BLOCK = 10_000

_EVENT_COLUMNS = (
    "time, tenant_id, deployment_id, input_tokens, cached_tokens, output_tokens, ttft_ms, "
    "tpot_ms, latency_ms, is_error, requests, cache_write_tokens, reasoning_tokens, project_id, "
    "service_tier"
)


def events_store(rows: Sequence[PlacedEvent], events: Sequence[EventIn], received_at: datetime):
    """Store the rows (the first occurrence of each key of `events`) in one transaction,
    with the projects they name that their tenants lack (portal.projects); returns
    (accepted, replays of stored events)."""
    postgresql = connection.vendor == "postgresql"
    if postgresql:
        usage_partitions_ensure(times=[r.event.time for r in rows])
    for attempt in range(2):
        # SQLite: the first pass reads the stored keys before its transaction takes the
        # write lock, so other writers wait less; a key stored in between fails the insert
        # (IntegrityError) and the second pass reads them under the lock.
        stored = None if postgresql or attempt else stored_digests([r.event for r in rows])
        try:
            with transaction.atomic():
                projects = _projects(rows, events)
                if postgresql:
                    accepted, replayed = _store_postgresql(rows, events, received_at, projects)
                else:
                    accepted, replayed = _store_sqlite(rows, events, received_at, stored, projects)
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


def _projects(rows: Sequence[PlacedEvent], events: Sequence[EventIn]) -> dict:
    """The project id of each (tenant id, slug) the rows name, the ones their tenants lack
    created (in the storing transaction: a refused batch creates none); ProjectsFull for the
    events of projects a tenant has no room for."""
    wanted: dict[int, set[str]] = {}
    slugs: dict[int, str] = {}
    for row in rows:
        if row.event.project is not None:
            wanted.setdefault(row.tenant_id, set()).add(row.event.project)
            slugs[row.tenant_id] = row.event.tenant
    if not wanted:
        return {}
    ids, refused = projects_ensure(wanted, tenant_slugs=slugs)
    if refused:
        tenant_ids = {slug: pk for pk, slug in slugs.items()}
        raise ProjectsFull(
            [i for i, e in enumerate(events) if (tenant_ids.get(e.tenant), e.project) in refused]
        )
    return ids


def _store_sqlite(
    rows: Sequence[PlacedEvent],
    events: Sequence[EventIn],
    received_at: datetime,
    stored: dict[tuple[str, str], str] | None,
    projects: dict,
) -> tuple[int, int]:
    """Keys and events with one `executemany` each (the ORM's bulk_create spent four fifths
    of the time building statements), and their run in the fold's queue. The transaction
    holds SQLite's write lock from its start (IMMEDIATE, portal.settings), so this writer
    alone numbers the keys. `stored`: the keys of `rows` already stored, read before the
    transaction (None: read now)."""
    if stored is None:
        stored = stored_digests([r.event for r in rows])
    conflicts = stored_conflicts(events=events, stored=stored)
    if conflicts:
        raise StoredConflict(conflicts)
    new_rows = [r for r in rows if (r.event.source, r.event.id) not in stored]
    seen = [(*key, time) for key, time in _newest(rows).items()]
    sources_seen_store(seen=seen, received_at=received_at)
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
            f"VALUES ({', '.join(['%s'] * 16)})",
            [_event_row(pk, instant(r.event.time), r, projects) for pk, r in numbered],
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


def _event_row(pk: int, time: object, row: PlacedEvent, projects: dict) -> tuple:
    """An event's row as both stores write it: its id `pk`, then `_EVENT_COLUMNS` (`time` as
    the store writes it); `projects` holds the id of each (tenant id, project slug). One
    tuple made for each event, none joined to another."""
    e = row.event
    return (
        pk,
        time,
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
        NONE_ID if e.project is None else projects[(row.tenant_id, e.project)],
        e.service_tier,
    )


_EVENT_TYPES = [
    "int8", "timestamptz", "int8", "int8", "int8", "int8", "int8", "float8", "float8", "float8",
    "bool", "int4", "int8", "int8", "int8", "text",
]  # fmt: skip
# The batch's keys, each column as one text the statement splits (psycopg dumps a list's
# elements one by one in Python, a third of the storing's CPU): the separator, U+001F, is in
# no source or id (printable ASCII) nor hash (hex); `_joined` makes sure.
_SEPARATOR = "\x1f"
_KEY_ARRAYS = ", ".join(
    f"string_to_array(%({name})s::text, chr(31))" for name in ("sources", "ids", "hashes")
)


def _joined(values: list[str]) -> str:
    joined = _SEPARATOR.join(values)
    if values and joined.count(_SEPARATOR) != len(values) - 1:
        raise ValueError("a source, event id or payload hash holds U+001F")
    return joined


# The keys not stored yet take ids from one new block, by their position in the arrays
# (sorted: concurrent batches lock keys in the same order, no deadlock; by bytes, not by
# the database's collation, which costs more and orders them no better); returns the
# block's first id and the positions of the keys stored now. The keys come as three arrays
# (no stage table: no COPY, no temporary table to create, empty and truncate at commit).
_KEYS_STORE = (
    "WITH block AS MATERIALIZED (SELECT nextval(pg_get_serial_sequence('metering_eventkey', "  # noqa: S608 (constants)
    "'id')) AS first), "
    "keys AS (INSERT INTO metering_eventkey (id, source, event_id, payload_hash, received_at) "
    "SELECT block.first + s.n - 1, s.source, s.event_id, s.payload_hash, %(received)s "
    f"FROM unnest({_KEY_ARRAYS}) WITH ORDINALITY "
    "AS s (source, event_id, payload_hash, n), block "
    'ORDER BY s.source COLLATE "C", s.event_id COLLATE "C" '
    "ON CONFLICT (source, event_id) DO NOTHING RETURNING id) "
    "SELECT block.first, (SELECT array_agg((id - block.first)::int4) FROM keys) FROM block"
)
# The stored payload hash of each key (of those the insert found stored) that another
# payload hash names: a replay, or a conflict when the payload differs. One index lookup a
# key, whatever the plan would guess of the arrays' size.
_KEYS_STORED = (
    "WITH s AS MATERIALIZED (SELECT s.source, s.event_id, s.payload_hash, (SELECT "  # noqa: S608 (constants)
    "k.payload_hash FROM metering_eventkey k WHERE k.source = s.source AND k.event_id = "
    f"s.event_id) AS stored FROM unnest({_KEY_ARRAYS}) AS s (source, event_id, payload_hash)) "
    "SELECT source, event_id, stored FROM s WHERE stored <> payload_hash"
)
# Once the new keys' events are stored: their run joins the fold's queue, and the batch's
# sources seen (its replays too: the newest event time of each source and deployment) are
# upserted, their rows locked from here to the commit.
_QUEUE_STORE = (
    "WITH queued AS (INSERT INTO metering_foldpending (first_id, last_id, time_min, time_max, "  # noqa: S608 (constants)
    "events, queued_at) SELECT %(first)s::int8, %(last)s::int8, %(time_min)s::timestamptz, "
    "%(time_max)s::timestamptz, %(events)s::int4, %(received)s WHERE %(events)s::int4 > 0) "
    + sources_seen_upsert(
        "SELECT source, deployment_id, time, %(received)s FROM unnest(%(seen_sources)s::text[], "
        "%(seen_deployments)s::int8[], %(seen_times)s::timestamptz[]) AS s (source, "
        "deployment_id, time) ORDER BY source, deployment_id",
        vendor="postgresql",
    )
)


def _store_postgresql(
    rows: Sequence[PlacedEvent], events: Sequence[EventIn], received_at: datetime, projects: dict
) -> tuple[int, int]:
    """A block of rows at a time: their keys inserted by one statement, the new keys'
    events by a binary COPY into the partitioned table, then the fold's queue and the
    sources seen by one statement."""
    accepted = 0
    with connection.cursor() as cursor, prepared_cursor() as prepared:
        raw = cursor.cursor
        for start in range(0, len(rows), EVENT_ID_BLOCK):
            block = rows[start : start + EVENT_ID_BLOCK]
            keys = {
                "sources": [r.event.source for r in block],
                "ids": [r.event.id for r in block],
                "hashes": [r.event.payload_hash for r in block],
            }
            joined = {name: _joined(values) for name, values in keys.items()}
            prepared.execute(_KEYS_STORE, {**joined, "received": received_at})
            first, positions = prepared.fetchone()
            positions = sorted(positions or ())
            if positions:
                # A partition gone since this process saw it fails the COPY as the insert
                # did (IntegrityError): events_store looks again.
                with (
                    connection.wrap_database_errors,
                    raw.copy(
                        f"COPY metering_usageevent (id, {_EVENT_COLUMNS}) FROM STDIN (FORMAT BINARY)"
                    ) as copy,
                ):
                    copy.set_types(_EVENT_TYPES)
                    write_row = copy.write_row
                    for n in positions:
                        r = block[n]
                        write_row(_event_row(first + n, r.event.time, r, projects))
            times = [block[n].event.time for n in positions]
            seen = _newest(block)
            prepared.execute(
                _QUEUE_STORE,
                {
                    "first": first + positions[0] if positions else None,
                    "last": first + positions[-1] if positions else None,
                    "time_min": min(times, default=None),
                    "time_max": max(times, default=None),
                    "events": len(positions),
                    "received": received_at,
                    "seen_sources": [source for source, _ in seen],
                    "seen_deployments": [deployment for _, deployment in seen],
                    "seen_times": list(seen.values()),
                },
            )
            accepted += len(positions)
            if len(positions) < len(block):
                # Some keys were stored before: a replay, or a conflict when the payload differs.
                new = set(positions)
                before = [n for n in range(len(block)) if n not in new]
                prepared.execute(
                    _KEYS_STORED,
                    {name: _joined([v[n] for n in before]) for name, v in keys.items()},
                )
                digests = {(s, i): h for s, i, h in prepared.fetchall()}
                conflicts = stored_conflicts(events=events, stored=digests)
                if conflicts:
                    raise StoredConflict(conflicts)
    return accepted, len(rows) - accepted


def _newest(rows: Sequence[PlacedEvent]) -> dict[tuple[str, int], datetime]:
    """The newest event time of each (source, deployment id) of the rows, in key order."""
    newest: dict[tuple[str, int], datetime] = {}
    get = newest.get
    for row in rows:
        key = (row.event.source, row.deployment_id)
        time = row.event.time
        if get(key, time) <= time:
            newest[key] = time
    return dict(sorted(newest.items()))


# The partitions this process has seen exist: a batch looks each month up once a process,
# not once a batch. One that is gone since (archived) fails the insert, and `events_store`
# looks again.
_partitions_known: set[str] = set()


def usage_partitions_ensure(*, times: Sequence[datetime]) -> None:
    """Create the monthly partitions of the usage event table that `times` fall in."""
    # (year, month) of UTC times directly: this runs for every event of every batch.
    months = {(t.year, t.month) for t in times if t.tzinfo is UTC}
    starts = {datetime(year, month, 1, tzinfo=UTC) for year, month in months}
    starts.update(month_start(t) for t in times if t.tzinfo is not UTC)
    for start in sorted(starts):
        name = f"metering_usageevent_p{start:%Y%m}"
        if name in _partitions_known:
            continue
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s)", [name])
            if cursor.fetchone()[0] is not None:
                _partitions_known.add(name)
                continue
        end = next_month(start)
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
