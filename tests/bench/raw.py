"""The baselines: what the database does with the raw rows and no application code.

- bulk loading of the datasets (binary COPY, not a measurement);
- raw binary COPY and deduplicating COPY of ingestion batches (the limits to beat);
- the usage and KPI queries computed from raw events (what the rollups stand in for).

psycopg only, no Django: these run in the orchestrator process.
"""

from __future__ import annotations

import multiprocessing
import time
from datetime import datetime, timedelta

import psycopg

from tests.bench import config
from tests.bench.events import EventGenerator, Row, project_slug

CHUNK = 100_000  # events per generated chunk (the same chunks in every dataset size)
# The usage event's columns as the binary COPYs write them, and their types.
EVENT_COLUMNS = (
    "id, time, tenant_id, deployment_id, input_tokens, cached_tokens, output_tokens, "
    "ttft_ms, tpot_ms, latency_ms, is_error"
)
EVENT_TYPES = ("int8", "timestamptz", *("int8",) * 5, *("float8",) * 3, "bool")
# The bulk load writes each event's project too (0: none; ingestion's events name none).
DATASET_COLUMNS = EVENT_COLUMNS + ", project_id"
DATASET_TYPES = (*EVENT_TYPES, "int8")
# The bare table of the ingestion limit: the key, the payload hash and the event's columns.
BARE_COLUMNS = "source, event_id, payload_hash, " + EVENT_COLUMNS.removeprefix("id, ")
BARE_TYPES = ("text", "text", "text", *EVENT_TYPES[1:])
BARE_COLUMNS_DDL = ", ".join(
    f"{name} {kind}" for name, kind in zip(BARE_COLUMNS.split(", "), BARE_TYPES, strict=True)
)


def partition_name(month: datetime) -> str:
    return f"metering_usageevent_p{month:%Y%m}"


def _event_values(r: Row, tenant_ids: list[int], deployment_ids: list[int]) -> tuple:
    """The row's EVENT_COLUMNS after the id, tenant and deployment resolved to their ids."""
    return (
        r.time,
        tenant_ids[r.tenant],
        deployment_ids[r.deployment],
        r.input_tokens,
        r.cached_tokens,
        r.output_tokens,
        r.ttft_ms,
        r.tpot_ms,
        r.latency_ms,
        r.is_error,
    )


def _project_ids(conn: psycopg.Connection, tenant_ids: list[int]) -> list[list[int]]:
    """Per tenant rank, the ids of its projects p01…p{config.PROJECTS} (setup made them)."""
    ids = {
        (tenant_id, slug): pk
        for tenant_id, slug, pk in conn.execute("SELECT tenant_id, slug, id FROM portal_project")
    }
    numbers = range(1, config.PROJECTS + 1)
    return [[ids[tenant_id, project_slug(n)] for n in numbers] for tenant_id in tenant_ids]


def _load_chunk(args: tuple) -> int:
    dsn, seq0, count, tenant_ids, deployment_ids, project_ids, table = args
    generator = EventGenerator()
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        rows = list(
            generator.rows(
                seq0=seq0,
                count=count,
                start=config.MONTH_START,
                days=config.DAYS,
                projects=config.PROJECTS,
            )
        )
        with cur.copy(
            "COPY metering_eventkey (id, source, event_id, payload_hash, received_at) "
            "FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["int8", "text", "text", "text", "timestamptz"])
            for r in rows:
                copy.write_row(
                    (r.seq + 1, r.source, r.event_id, r.payload_hash, r.time + timedelta(seconds=2))
                )
        with cur.copy(f"COPY {table} ({DATASET_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(DATASET_TYPES))
            for r in rows:
                project = project_ids[r.tenant][r.project - 1] if r.project else 0
                copy.write_row((r.seq + 1, *_event_values(r, tenant_ids, deployment_ids), project))
        conn.commit()
    return count


def bulk_load(
    *, dsn: str, count: int, tenant_ids: list[int], deployment_ids: list[int], log
) -> float:
    """Write `count` events of the dataset month with COPY: into a bare table attached as the
    month's partition afterwards, and into the key table with its unique index rebuilt after
    (index builds by sort beat 10M random inserts); each event of a project (events.project_of)
    with the id setup gave its tenant's project of that slug. Returns seconds."""
    started = time.perf_counter()
    table = partition_name(config.MONTH_START)
    with psycopg.connect(dsn, autocommit=True) as conn:
        project_ids = _project_ids(conn, tenant_ids)
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(
            f"CREATE TABLE {table} (LIKE metering_usageevent INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        )
        conn.execute("ALTER TABLE metering_eventkey DROP CONSTRAINT event_key_unique")
    chunks = [
        (dsn, seq0, min(CHUNK, count - seq0), tenant_ids, deployment_ids, project_ids, table)
        for seq0 in range(0, count, CHUNK)
    ]
    done = 0
    with multiprocessing.get_context("fork").Pool(2) as pool:
        for n in pool.imap_unordered(_load_chunk, chunks):
            done += n
            if done % 1_000_000 < CHUNK or done == count:
                log(
                    f"    {done:,} / {count:,} events written ({time.perf_counter() - started:.0f} s)"
                )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(
            "ALTER TABLE metering_eventkey ADD CONSTRAINT event_key_unique UNIQUE (source, event_id)"
        )
        start, end = config.MONTH_START, config.MONTH_END
        conn.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_range CHECK "
            f"(time >= '{start.isoformat()}' AND time < '{end.isoformat()}')"
        )
        conn.execute(
            f"ALTER TABLE metering_usageevent ATTACH PARTITION {table} "
            f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
        )
        conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_range")
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('metering_eventkey', 'id'), "
            "(SELECT max(id) FROM metering_eventkey))"
        )
    return time.perf_counter() - started


def vacuum_analyze(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")


# --- ingestion limits ------------------------------------------------------------------


class RawIngest:
    """One connection writing ingestion batches without the application: the limits."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn)
        with self.conn.cursor() as cur:
            cur.execute(
                "CREATE TEMP TABLE raw_stage (source text, event_id text, payload_hash text) "
                "ON COMMIT DELETE ROWS"
            )
            cur.execute("DROP TABLE IF EXISTS bench_raw_copy")
            cur.execute(
                "CREATE TABLE bench_raw_copy (LIKE metering_usageevent INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
            )
            cur.execute("ALTER TABLE bench_raw_copy ADD PRIMARY KEY (id)")
            cur.execute("CREATE INDEX ON bench_raw_copy (tenant_id, time)")
            # The bare limit: one table, a unique (source, id) key and a (tenant, time) index,
            # holding the dataset's events as the project's tables do (an insert's index
            # depth and cache misses grow with the table: both sides start from one size,
            # and their new keys fall on random pages of it alike: `resolved`).
            cur.execute("DROP TABLE IF EXISTS bench_bare")
            cur.execute(f"CREATE TABLE bench_bare ({BARE_COLUMNS_DDL})")
            event = ", ".join(f"e.{c}" for c in EVENT_COLUMNS.split(", ")[1:])
            cur.execute(
                f"INSERT INTO bench_bare ({BARE_COLUMNS}) SELECT k.source, k.event_id, "  # noqa: S608
                f"k.payload_hash, {event} FROM metering_eventkey k "
                "JOIN metering_usageevent e ON e.id = k.id"
            )
            cur.execute("ALTER TABLE bench_bare ADD UNIQUE (source, event_id)")
            cur.execute("CREATE INDEX ON bench_bare (tenant_id, time)")
            cur.execute("ANALYZE bench_bare")
            cur.execute("CREATE TEMP TABLE bare_stage (LIKE bench_bare) ON COMMIT DELETE ROWS")
        self.conn.commit()
        self.next_id = 1

    def close(self) -> None:
        self.conn.close()

    def wal_lsn(self) -> int:
        """The server's WAL insert position in bytes: two readings' difference is the WAL
        written between them, by every session."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::int8")
            lsn = cur.fetchone()[0]
        self.conn.commit()
        return lsn

    def dedup_copy(self, batches: list[list[tuple]]) -> float:
        """Stage keys with COPY, INSERT … ON CONFLICT DO NOTHING RETURNING, COPY the new
        events; one transaction per batch. Rows: (source, event_id, hash, time, tenant_id,
        deployment_id, input, cached, output, ttft, tpot, latency, is_error)."""
        conn = self.conn
        started = time.perf_counter()
        for batch in batches:
            with conn.cursor() as cur:
                with cur.copy("COPY raw_stage (source, event_id, payload_hash) FROM STDIN") as copy:
                    for r in batch:
                        copy.write_row(r[:3])
                cur.execute(
                    "INSERT INTO metering_eventkey (source, event_id, payload_hash, received_at) "
                    "SELECT source, event_id, payload_hash, now() FROM raw_stage "
                    "ORDER BY source, event_id ON CONFLICT (source, event_id) DO NOTHING "
                    "RETURNING id, source, event_id"
                )
                new = {(s, i): pk for pk, s, i in cur.fetchall()}
                with cur.copy(f"COPY metering_usageevent ({EVENT_COLUMNS}) FROM STDIN") as copy:
                    for r in batch:
                        pk = new.get((r[0], r[1]))
                        if pk is not None:
                            copy.write_row((pk, *r[3:]))
            conn.commit()
        return time.perf_counter() - started

    def bare_dedup_copy(self, batches: list[list[tuple]]) -> float:
        """The bare limit: binary COPY of whole events into a temporary table, then
        `INSERT … SELECT … ON CONFLICT (source, event_id) DO NOTHING` into one table with only
        that unique key and a (tenant, time) index; one transaction per batch."""
        conn = self.conn
        started = time.perf_counter()
        for batch in batches:
            with conn.cursor() as cur:
                with cur.copy(
                    f"COPY bare_stage ({BARE_COLUMNS}) FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(list(BARE_TYPES))
                    for r in batch:
                        copy.write_row(r)
                cur.execute(
                    f"INSERT INTO bench_bare ({BARE_COLUMNS}) SELECT {BARE_COLUMNS} FROM bare_stage "  # noqa: S608
                    "ON CONFLICT (source, event_id) DO NOTHING"
                )
            conn.commit()
        return time.perf_counter() - started

    def binary_copy(self, batches: list[list[tuple]]) -> float:
        """Binary COPY into a table with a primary key and a (tenant, time) index, no dedup."""
        conn = self.conn
        started = time.perf_counter()
        for batch in batches:
            with (
                conn.cursor() as cur,
                cur.copy(
                    f"COPY bench_raw_copy ({EVENT_COLUMNS}) FROM STDIN (FORMAT BINARY)"
                ) as copy,
            ):
                copy.set_types(list(EVENT_TYPES))
                for r in batch:
                    copy.write_row((self.next_id, *r[3:]))
                    self.next_id += 1
            conn.commit()
        return time.perf_counter() - started


def resolved(
    rows: list[Row], tenant_ids: list[int], deployment_ids: list[int], suffix: str
) -> list[tuple]:
    """Rows as the raw writers take them (ids resolved beforehand, not timed), each event
    id with `suffix`: keys apart from the API's in the key table, yet spread over its
    index as theirs are (a prefix to the source would put every one in one corner of it,
    a few hot pages, while the API's land on random pages of the whole index)."""
    return [
        (
            r.source,
            r.event_id + suffix,
            r.payload_hash,
            *_event_values(r, tenant_ids, deployment_ids),
        )
        for r in rows
    ]


# --- reads on raw rows -----------------------------------------------------------------

# GET /api/v1/usage (granularity=day) answered from raw events: the first page of the same
# rows. (The API also counts the groups; this baseline does not, so it flatters raw rows.)
RAW_USAGE_SQL = """
SELECT date_trunc('day', e.time) AS period_start, t.slug, m.slug, p.slug,
       count(*), count(*) FILTER (WHERE e.is_error),
       sum(e.input_tokens), sum(e.cached_tokens), sum(e.output_tokens)
FROM metering_usageevent e
JOIN portal_tenant t ON t.id = e.tenant_id
JOIN metering_deployment d ON d.id = e.deployment_id
JOIN metering_servedmodel m ON m.id = d.model_id
JOIN metering_pool p ON p.id = d.pool_id
WHERE e.time >= %(start)s AND e.time < %(end)s
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4
LIMIT 100
"""

# The factory KPIs' event-side inputs from raw events, per pool: production in output-token
# units and standard GPU-seconds (version in force at the event's time), SLA-compliant
# production, and the paid events' output tokens, list value and realized revenue, with the
# free allowance consumed in (time, source, id) order per tenant (kpis.md section 3).
# Volume tiers and promotions are left out, which again flatters raw rows.
RAW_KPI_SQL = """
WITH ver AS (
    SELECT deployment_id, r_ref, w_in, slo_ttft_ms, slo_tpot_ms,
           tstzrange(effective_from, lead(effective_from)
               OVER (PARTITION BY deployment_id ORDER BY effective_from)) AS span
    FROM metering_deploymentversion
), con AS (
    SELECT tenant_id, kind, discount_pct, free_tokens_per_month,
           tstzrange(effective_from, lead(effective_from)
               OVER (PARTITION BY tenant_id ORDER BY effective_from)) AS span
    FROM billing_contract
), price AS (
    SELECT model_id, token_class, per_million,
           tstzrange(effective_from, lead(effective_from)
               OVER (PARTITION BY model_id, token_class ORDER BY effective_from)) AS span
    FROM billing_price
), ev AS MATERIALIZED (
    SELECT e.tenant_id, d.pool_id, d.model_id, e.time, k.source, k.event_id, e.is_error,
           e.input_tokens, e.cached_tokens, e.output_tokens,
           (e.output_tokens + v.w_in * (e.input_tokens - e.cached_tokens)) / v.r_ref AS std,
           e.output_tokens + v.w_in * (e.input_tokens - e.cached_tokens) AS tok,
           NOT e.is_error
             AND (v.slo_ttft_ms IS NULL OR e.ttft_ms IS NULL OR e.ttft_ms <= v.slo_ttft_ms)
             AND (v.slo_tpot_ms IS NULL OR e.tpot_ms IS NULL OR e.tpot_ms <= v.slo_tpot_ms)
             AS compliant
    FROM metering_usageevent e
    JOIN metering_eventkey k ON k.id = e.id
    JOIN metering_deployment d ON d.id = e.deployment_id
    JOIN ver v ON v.deployment_id = e.deployment_id AND v.span @> e.time
    WHERE e.time >= %(start)s AND e.time < %(end)s
), ordered AS (
    SELECT ev.*, sum(ev.input_tokens + ev.output_tokens) OVER (
               PARTITION BY ev.tenant_id ORDER BY ev.time, ev.source, ev.event_id
               ROWS UNBOUNDED PRECEDING) AS running
    FROM ev WHERE NOT ev.is_error
), paid AS (
    SELECT o.*, c.discount_pct
    FROM ordered o
    JOIN con c ON c.tenant_id = o.tenant_id AND c.span @> o.time AND c.kind = 'paid'
    JOIN con c0 ON c0.tenant_id = o.tenant_id AND c0.span @> %(start)s::timestamptz
    WHERE o.running > c0.free_tokens_per_month
), valued AS (
    SELECT p.pool_id, p.output_tokens, p.discount_pct, p.std, p.compliant,
           ((p.input_tokens - p.cached_tokens) * pi.per_million + p.cached_tokens * pc.per_million
             + p.output_tokens * po.per_million) / 1000000 AS list_value
    FROM paid p
    JOIN price pi ON pi.model_id = p.model_id AND pi.token_class = 'input' AND pi.span @> p.time
    JOIN price pc ON pc.model_id = p.model_id AND pc.token_class = 'cached_input' AND pc.span @> p.time
    JOIN price po ON po.model_id = p.model_id AND po.token_class = 'output' AND po.span @> p.time
)
SELECT a.pool_id, a.tok, a.std, a.compliant_std, a.output_tokens,
       b.paid_output_tokens, b.compliant_paid_std, b.list_value, b.realized
FROM (SELECT pool_id, sum(tok) AS tok, sum(std) AS std,
             sum(std) FILTER (WHERE compliant) AS compliant_std, sum(output_tokens) AS output_tokens
      FROM ev GROUP BY pool_id) a
LEFT JOIN (SELECT pool_id, sum(output_tokens) AS paid_output_tokens,
                  sum(std) FILTER (WHERE compliant) AS compliant_paid_std,
                  sum(list_value) AS list_value,
                  sum(list_value * (1 - discount_pct / 100)) AS realized
           FROM valued GROUP BY pool_id) b ON b.pool_id = a.pool_id
ORDER BY a.pool_id
"""


class RawReads:
    """The read baselines on one database, one connection."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)

    def close(self) -> None:
        self.conn.close()

    def _timed(self, sql: str) -> tuple[float, list]:
        started = time.perf_counter()
        rows = self.conn.execute(
            sql, {"start": config.MONTH_START, "end": config.MONTH_END}
        ).fetchall()
        return time.perf_counter() - started, rows

    def usage(self) -> float:
        return self._timed(RAW_USAGE_SQL)[0]

    def kpis(self) -> tuple[float, list]:
        return self._timed(RAW_KPI_SQL)
