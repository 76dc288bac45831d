"""Many new rows into one table at once, for the writers of tens of thousands of rows (the
rating's rated usage, the demo's rollups): the ORM's bulk_create converts every field of
every row and binds each value as a query parameter, seconds per 100,000 rows."""

from collections.abc import Iterable, Sequence

from django.db import connection


def rows_insert(table: str, columns: Sequence[str], rows: Iterable[tuple]) -> None:
    """Insert `rows`, each a tuple of `columns` values as the database stores them (a
    datetime through connection.ops.adapt_datetimefield_value, JSON as its text; a model's
    Python-side defaults are not applied, so every column without a database default is
    given): COPY on PostgreSQL, one executemany elsewhere."""
    quote = connection.ops.quote_name
    names = ", ".join(quote(column) for column in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {quote(table)} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join(["%s"] * len(columns))
            cursor.executemany(f"INSERT INTO {quote(table)} ({names}) VALUES ({marks})", rows)  # noqa: S608 (names from the models)
