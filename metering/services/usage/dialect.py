"""The few spellings of the usage rollups' SQL that PostgreSQL and SQLite do not share
(metering.services.usage.rollup writes them): truncating a timestamp to its UTC hour or
5-minute bucket, a JSON array, a timestamp read back, a value as a parameter, and a
temporary table filled with rows (COPY on PostgreSQL)."""

from collections.abc import Iterable
from datetime import UTC, date, datetime

from django.db import connection


def dialect(postgresql: str, sqlite: str) -> str:
    return postgresql if connection.vendor == "postgresql" else sqlite


def hour_sql(column: str) -> str:
    """The UTC hour of a timestamp column (SQLite stores naive UTC text)."""
    return dialect(
        f"date_trunc('hour', {column}, 'UTC')", f"strftime('%Y-%m-%d %H:00:00', {column})"
    )


def five_minute_sql(column: str) -> str:
    """The start of a timestamp's UTC 5-minute bucket."""
    return dialect(
        f"date_bin('5 minutes', {column}, TIMESTAMPTZ '2000-01-01 00:00:00+00')",
        # The statements it is in take parameters: a literal % is written %%.
        f"strftime('%%Y-%%m-%%d %%H:', {column}) || "
        f"printf('%%02d', CAST(strftime('%%M', {column}) AS integer) / 5 * 5) || ':00'",
    )


def array_sql(items: Iterable[str]) -> str:
    return "{}({})".format(dialect("jsonb_build_array", "json_array"), ", ".join(items))


def instant_read(value: str | datetime) -> datetime:
    """A timestamp read back from SQL, in UTC."""
    if isinstance(value, str):  # SQLite
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def temp_stage(cursor, table: str, columns: str) -> None:
    """A temporary table of this connection, empty (an earlier batch of an enclosing
    transaction may have left rows)."""
    temp = dialect(f"{table} ({columns}) ON COMMIT DELETE ROWS", f"{table} ({columns})")
    cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {temp}")
    # Table names and columns are the callers' constants, never input.
    cursor.execute(f"DELETE FROM {table}")  # noqa: S608


def rows_stage(cursor, table: str, columns: str, types: list[str], rows: Iterable[tuple]) -> None:
    """Fill a temporary table of this connection (`temp_stage`) with `rows`."""
    temp_stage(cursor, table, columns)
    if connection.vendor == "postgresql":
        with cursor.cursor.copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"ANALYZE {table}")
        return
    cursor.executemany(
        f"INSERT INTO {table} VALUES ({', '.join(['%s'] * len(types))})",  # noqa: S608
        [tuple(stored_value(v) for v in row) for row in rows],
    )


def stored_value(value):
    """A query parameter as the database stores it (SQLite: timestamps as naive UTC text)."""
    if connection.vendor == "postgresql":
        return value
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    if isinstance(value, date):
        return connection.ops.adapt_datefield_value(value)
    return value
