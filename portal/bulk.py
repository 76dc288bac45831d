"""Many rows into one table at once, for the writers of hundreds to tens of thousands of rows
(the rating's rated usage and tenant-months, the demo's rollups): the ORM's bulk_create converts
every field of every row and binds each value as a query parameter, seconds per 100,000 rows.
And PostgreSQL statements given a batch's values as arrays (`prepared_cursor`)."""

from collections.abc import Callable, Iterable, Sequence
from weakref import WeakKeyDictionary

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.types.array import ListBinaryDumper


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


def rows_upsert(
    model: type[models.Model],
    objs: Sequence[models.Model],
    *,
    unique_fields: Sequence[str],
    update_fields: Sequence[str],
) -> None:
    """Insert `objs` (every field but the key), or set `update_fields` on the rows that have
    their `unique_fields`: bulk_create(update_conflicts=True), but staged by COPY on
    PostgreSQL. Django binds each column of a bulk upsert as one array there, and psycopg
    quotes every quote inside a JSON element of an array in Python (0.18 s of the 0.97 s
    rating an hour's 190 tenant-months)."""
    if connection.vendor != "postgresql":
        model.objects.bulk_create(
            objs, update_conflicts=True, unique_fields=unique_fields, update_fields=update_fields
        )
        return
    meta, quote = model._meta, connection.ops.quote_name
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    names = ", ".join(quote(field.column) for field in fields)
    keys = ", ".join(quote(meta.get_field(name).column) for name in unique_fields)
    sets = ", ".join(
        f"{column} = EXCLUDED.{column}"
        for column in (quote(meta.get_field(name).column) for name in update_fields)
    )
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE upsert_stage AS SELECT {names} FROM {quote(meta.db_table)} "  # noqa: S608 (names from the model)
            "WITH NO DATA"
        )
        with cursor.cursor.copy(f"COPY upsert_stage ({names}) FROM STDIN") as copy:
            for obj in objs:
                copy.write_row(
                    [
                        field.get_db_prep_save(field.pre_save(obj, True), connection)
                        for field in fields
                    ]
                )
        cursor.execute(
            f"INSERT INTO {quote(meta.db_table)} ({names}) SELECT {names} FROM upsert_stage "  # noqa: S608
            f"ON CONFLICT ({keys}) DO UPDATE SET {sets}"
        )
        cursor.execute("DROP TABLE upsert_stage")


def rows_add(
    table: str, keys: Sequence[str], columns: Sequence[str], rows: Iterable[tuple]
) -> None:
    """Add `rows` (each a tuple of `keys` then `columns` values, as rows_insert's) to the
    table's rows of the same keys, column by column, inserting those it has not: one
    `INSERT … ON CONFLICT (keys) DO UPDATE SET c = c + EXCLUDED.c` (staged by COPY on
    PostgreSQL). A key at most once in `rows`."""
    quote = connection.ops.quote_name
    target = quote(table)
    names = ", ".join(quote(column) for column in (*keys, *columns))
    conflict = ", ".join(quote(key) for key in keys)
    sets = ", ".join(f"{c} = {target}.{c} + EXCLUDED.{c}" for c in map(quote, columns))
    upsert = f"ON CONFLICT ({conflict}) DO UPDATE SET {sets}"
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            marks = ", ".join(["%s"] * (len(keys) + len(columns)))
            cursor.executemany(f"INSERT INTO {target} ({names}) VALUES ({marks}) {upsert}", rows)  # noqa: S608 (names from the models)
            return
        cursor.execute(f"CREATE TEMP TABLE add_stage AS SELECT {names} FROM {target} WITH NO DATA")  # noqa: S608
        with cursor.cursor.copy(f"COPY add_stage ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {target} ({names}) SELECT {names} FROM add_stage {upsert}")  # noqa: S608
        cursor.execute("DROP TABLE add_stage")


def exact_sums(
    rows: models.QuerySet, keys: Sequence[str], columns: Sequence[str]
) -> dict[tuple, list]:
    """Per distinct `keys` of `rows`: how many, then the sum of each of `columns`, exact:
    summed by PostgreSQL (its numeric sums are exact), in Python elsewhere (SQLite sums
    floats)."""
    rows = rows.order_by()
    width = len(keys)
    if connections[rows.db].vendor == "postgresql":
        sums = {f"sum_{column}": models.Sum(column) for column in columns}
        found = rows.values(*keys).annotate(rows_counted=models.Count("*"), **sums)
        return {
            tuple(row[:width]): list(row[width:])
            for row in found.values_list(*keys, "rows_counted", *sums)
        }
    return counted_sums((row[:width], row[width:]) for row in rows.values_list(*keys, *columns))


def counted_sums(pairs: Iterable[tuple[tuple, Sequence]]) -> dict[tuple, list]:
    """Per key of the (key, values) pairs: how many, then the sum of each value (in
    Python: exact for Decimals)."""
    totals: dict[tuple, list] = {}
    for key, values in pairs:
        seen = totals.get(key)
        if seen is None:
            totals[key] = [1, *values]
            continue
        seen[0] += 1
        for index, value in enumerate(values, start=1):
            seen[index] += value
    return totals


# Django opens its connections with psycopg's automatic preparing off (prepare_threshold
# None), and psycopg then ignores `prepare=True` too. A _PreparedCursor's call sets a
# threshold no statement reaches for its own length: its statement is prepared at its first
# call and found by name after, while Django's statements (bound on the client side, their
# values in their text) are neither prepared nor counted and kept by psycopg. psycopg
# deallocates the prepared ones at a rollback and prepares them again at their next call.
_ON_REQUEST = 2**31 - 1


class _PreparedCursor(psycopg.Cursor):
    """Server-side binding, each statement prepared once a connection (planned once, not at
    each call), lists sent as binary arrays (a value's bytes, no literal to quote and parse)."""

    def __init__(self, connection: psycopg.Connection) -> None:
        super().__init__(connection)
        self.adapters.register_dumper(list, ListBinaryDumper)

    def execute(self, query, params=None, *, prepare=None, binary=None):  # type: ignore[override]
        threshold = self.connection.prepare_threshold
        if threshold is None:
            self.connection.prepare_threshold = _ON_REQUEST
        try:
            return super().execute(query, params, prepare=True, binary=binary)
        finally:
            self.connection.prepare_threshold = threshold

    def _send_query_prepared(self, name, pgq, *, binary=None) -> None:
        # The statement as Django's query log reads it (last_executed_query: the cursor's
        # `_query`), which psycopg records of an unprepared execution alone.
        self._query = pgq
        super()._send_query_prepared(name, pgq, binary=binary)


def prepared_cursor(using: str = DEFAULT_DB_ALIAS):
    """A cursor (PostgreSQL only) in the transaction of the connection `using` for statements
    run at every request: with hundreds of values each, given as arrays (`= ANY(%s)`,
    `unnest(%s)`), or read by every request (a bearer token, a gateway's budget). Django's
    cursor binds on the client side, so each value is quoted into the statement's text and
    the statement parsed and planned at each call. Logged and its errors wrapped as Django's
    own cursor's."""
    db = connections[using]
    db.ensure_connection()  # a thread's first statement may be this one
    cursor = _PreparedCursor(db.connection)
    if db.queries_logged:
        return db.make_debug_cursor(cursor)
    return db.make_cursor(cursor)


def statement_cursor(using: str = DEFAULT_DB_ALIAS):
    """A cursor for a statement of one's own read at every request: prepared on PostgreSQL
    (prepared_cursor), Django's elsewhere."""
    db = connections[using]
    return prepared_cursor(using) if db.vendor == "postgresql" else db.cursor()


# The statements of constant_rows, by database connection (each thread has its own) and by
# the function that builds their query.
_constant: WeakKeyDictionary[BaseDatabaseWrapper, dict[Callable, tuple]] = WeakKeyDictionary()


def constant_rows(model: type[models.Model], build: Callable[[], models.QuerySet]) -> list[tuple]:
    """The rows of the values_list queryset of `model` that `build` returns, for a read of
    every request whose statement, values included, never changes (a one-row mark or
    state): built and compiled once a connection (the ORM builds and compiles a query of
    subqueries in about a millisecond), prepared on PostgreSQL, its values converted as the
    ORM converts them; read where the ORM would read it."""
    using = model._default_manager.db
    db = connections[using]
    made = _constant.setdefault(db, {}).get(build)
    if made is None:
        compiler = build().query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        converters = compiler.get_converters([column[0] for column in compiler.select])
        made = _constant[db][build] = (sql, params, compiler, converters)
    sql, params, compiler, converters = made
    with statement_cursor(using) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not converters:
        return rows
    return [tuple(row) for row in compiler.apply_converters(rows, converters)]


class ModelColumns:
    """Model instances read from the columns of a statement of one's own, as the ORM reads
    them: each model's concrete columns under an alias of its table (`select`), converted
    by the ORM's converters of the connection `db` (JSON decoded, SQLite's datetimes made
    aware), each instance made by from_db, None for an outer join's missing row."""

    def __init__(self, db: BaseDatabaseWrapper, tables: Sequence[tuple[type[models.Model], str]]):
        self.db, self.tables = db, tables
        quote = db.ops.quote_name
        columns, self.converters = [], []
        for model, alias in tables:
            for field in model._meta.concrete_fields:
                columns.append(f"{alias}.{quote(field.column)}")
                col = field.get_col(alias)
                found = db.ops.get_db_converters(col) + col.get_db_converters(db)
                self.converters.append([(convert, col) for convert in found])
        self.select = ", ".join(columns)

    def read(self, row: Sequence) -> tuple[list, list]:
        """The instances of `row`, in the order of the tables, and its values after theirs."""
        values = list(row)
        for index, steps in enumerate(self.converters):
            for convert, col in steps:
                values[index] = convert(values[index], col, self.db)
        read, start = [], 0
        for model, _ in self.tables:
            meta = model._meta
            own = values[start : start + len(meta.concrete_fields)]
            start += len(meta.concrete_fields)
            absent = own[meta.concrete_fields.index(meta.pk)] is None
            read.append(None if absent else model.from_db(self.db.alias, None, own))
        return read, values[start:]
