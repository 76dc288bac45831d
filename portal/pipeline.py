"""The pipeline (architecture.md "The pipeline: one owner per read model"): its stages in
order, declared once; how a write or a stage asks for the next run of a stage; the change
logs between stages and each consumer's cursor over them.

    usage events, capacity ──fold──▶ rollups ──rate──▶ rated usage ──measure──▶ KPI snapshots

Each stage is a Celery task named here, owned by one app, writing only its own tables. A
stage that changed its read model appends what changed to its app's change log in the same
transaction (`log_append`); the log's consumers are asked to run once it commits. A request
asks a stage to run (`stage_schedule`) and never runs one. Asking is debounced: at most one
run of a stage is pending, and one asked for while a run is in progress runs after it. The
beat runs every stage on its cadence too, as the safety net (settings.CELERY_BEAT_SCHEDULE).

Every read of an open period answers as of one **cut** (kpis.md section 0, "The window
actually measured"; `cut_read`): where the rate stage, the last stage whose figures a read
uses as they are stored (rated usage), consumed metering's change log, and how far usage
was folded when it read it (the fold's data_until). The window's `to` is the cut's time,
not floored to the hour; billing's figures are the cut's by construction (the rate writes
them with its cursor); metering's reads of the hour holding `to` leave out what the fold
added after the cut (metering.selectors.usage); flywheel measures from both. A GET reads
them in one snapshot of the database (portal.snapshot), so a rate that commits meanwhile
is either wholly in a page or not at all.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from weakref import WeakKeyDictionary

from django.db import connection, connections, models, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from portal import clock
from portal.bulk import constant_rows, statement_cursor
from portal.celery import app as celery_app
from portal.models import Cursor, StageRequest

log = logging.getLogger(__name__)

FOLD = "metering.fold"
RATE = "billing.rate"
MEASURE = "flywheel.measure"
# Not a stage of the pipeline, but asked for the same way, debounced: sending the events
# raised (portal.delivery).
DELIVER = "portal.deliver"

# The stages in the order each reads the one before (task names).
STAGES = (FOLD, RATE, MEASURE)

# The stages that read each change log, in stage order.
LOG_CONSUMERS = {
    "metering.usage": (RATE, MEASURE),  # rollups, capacity and deployment versions changed
    "billing.rated": (MEASURE,),  # rated usage changed
}

# The cut every read of an open period answers as of: the rate stage's read of metering's
# log (module docstring).
CUT = (RATE, "metering.usage")


def stage_schedule(name: str) -> None:
    """Ask for a run of the stage `name` once the caller's transaction commits (at once
    outside one). Debounced: nothing is sent while a run is already pending. A failure to
    reach the broker never fails the caller's write: the beat runs the stage anyway."""
    if name not in (*STAGES, DELIVER):
        raise ValueError(f"unknown stage {name!r}: one of {', '.join((*STAGES, DELIVER))}")
    # Asked once per transaction however many writes in it ask (a batch of events): an ask
    # already queued at this savepoint or an outer one commits, or rolls back, with ours.
    here = set(connection.savepoint_ids)
    for savepoints, callback, _ in connection.run_on_commit:
        if getattr(callback, "stage", None) == name and savepoints <= here:
            return

    def ask() -> None:
        _request(name)

    ask.stage = name
    # Eager (unit tests only): a failing stage fails the test that asked for it.
    robust = not celery_app.conf.task_always_eager
    transaction.on_commit(ask, robust=robust)


# Whether a run of each stage is pending, as its ask reads it after every write's commit
# (every ingested batch): a statement built once a connection, prepared on PostgreSQL.
_PENDING = {
    name: lambda name=name: StageRequest.objects.filter(name=name).values_list("pending")
    for name in (*STAGES, DELIVER)
}


def _request(name: str) -> None:
    now = clock.now()
    # Read first: under a stream of writes a run is pending for most of them, and then
    # this one read is all an ask costs.
    pending = [row[0] for row in constant_rows(StageRequest, _PENDING[name])]
    if pending == [True]:
        return  # a run is pending already: it will see this change
    if pending:
        asked = StageRequest.objects.filter(name=name, pending=False).update(
            pending=True, requested_at=now
        )
        if not asked:
            return  # asked for by another write since the read
    else:  # the first ask
        row = StageRequest(name=name, pending=True, requested_at=now)
        StageRequest.objects.bulk_create([row], ignore_conflicts=True)
        # two first asks at once send twice, once
    try:
        _task(name).apply_async()
    except Exception:
        StageRequest.objects.filter(name=name).update(pending=False)
        if celery_app.conf.task_always_eager:
            raise
        log.exception("could not ask for a run of %s (the beat runs it)", name)


def stage_begin(name: str) -> None:
    """A run of the stage starts: a change committed from now on asks for another run."""
    StageRequest.objects.filter(name=name, pending=True).update(pending=False)


def stages_run(*, before: str | None = None) -> None:
    """Run, in this process and in the declared order, every stage (every stage before
    `before`): what a command that must read exact figures does first (`measure`,
    `close`). By task name, as the worker would run them."""
    for name in STAGES:
        if name == before:
            return
        _task(name).apply(throw=True)


def stage_run(name: str) -> None:
    """Run the stage `name` once, in this process, by task name (the close's own rate)."""
    if name not in (*STAGES, DELIVER):
        raise ValueError(f"unknown stage {name!r}: one of {', '.join((*STAGES, DELIVER))}")
    _task(name).apply(throw=True)


def _task(name: str):
    """The registered task of a stage (the apps' task modules are imported on first use), of
    the portal's Celery app whatever thread asks."""
    if name not in celery_app.tasks:
        celery_app.loader.import_default_modules()
    return celery_app.tasks[name]


def log_append(model: type[models.Model], entries: Iterable[models.Model], *, log: str) -> int:
    """Append `entries` to the change log `log` (table `model`) in the caller's transaction
    and ask its consumers to run once it commits. Appends are serialised until commit, so
    entry ids are in commit order and a consumer reading past its cursor never skips one
    that commits late."""
    entries = list(entries)
    if not entries:
        return 0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_key(model)])
    model.objects.bulk_create(entries)
    for name in LOG_CONSUMERS[log]:
        stage_schedule(name)
    return len(entries)


def _lock_key(model: type[models.Model]) -> int:
    return zlib.crc32(model._meta.db_table.encode())


@dataclass(frozen=True)
class LogRead:
    """What one consumer read of a change log: the entries past its cursor, and where its
    cursor stood when it read them."""

    name: str  # the cursor's name, "<consumer>:<log>"
    position: int
    entries: list


def log_read(model: type[models.Model], *, consumer: str, log: str) -> LogRead:
    """The entries of `log` past the cursor of `consumer`, oldest first. Read before the
    stage writes anything: a stage plans its work from them outside a write transaction
    (on SQLite a write transaction stops every other writer, ingestion included), in a
    read snapshot with the rows it reads (portal.snapshot), then writes in a short one that
    consumes them (`log_consume`)."""
    if consumer not in LOG_CONSUMERS[log]:
        raise ValueError(f"{consumer} does not read {log}")
    name = f"{consumer}:{log}"
    position = Cursor.objects.filter(name=name).values_list("position", flat=True).first() or 0
    entries = list(model.objects.filter(id__gt=position).order_by("id"))
    return LogRead(name=name, position=position, entries=entries)


def log_consume(read: LogRead, *, until: datetime | None = None) -> bool:
    """In the transaction that writes what the entries of `read` caused: move the cursor
    past them, if it still stands where it stood when they were read, and record `until`,
    how far in time what the stage read reached (the cut, `cut_read`). False when another
    run of the stage has consumed them meanwhile: the caller rolls back and reads again.
    The cursor's row stays locked until the transaction ends, so two runs never both
    consume the same entries, and a killed run consumes nothing."""
    position = read.entries[-1].id if read.entries else read.position
    if not read.position:  # a first read (reads write nothing: the cursor is made here)
        Cursor.objects.bulk_create([Cursor(name=read.name)], ignore_conflicts=True)
    moved = {"position": position} | ({"until": until} if until is not None else {})
    return Cursor.objects.filter(name=read.name, position=read.position).update(**moved) == 1


@dataclass(frozen=True)
class Cut:
    """The published cut (module docstring): the entries of metering's log up to `position`
    are in every figure read, none after; usage folded until `until`."""

    position: int
    until: datetime


def _cut_row() -> models.QuerySet:
    consumer, log = CUT
    return Cursor.objects.filter(name=f"{consumer}:{log}", until__isnull=False)


def cut_read() -> Cut | None:
    """The cut every read of an open period answers as of; None before the rate stage first
    ran (a new installation: reads then take what is folded, up to data_until)."""
    found = _cut_row().values_list("position", "until").first()
    return cut_of(*found) if found is not None else None


def cut_columns() -> dict[str, models.Subquery]:
    """The cut as columns of another one-row query, so a read that needs it with its own
    marks asks once (the budget read); `cut_of` reads them."""
    row = _cut_row().order_by()
    return {
        "cut_position": models.Subquery(row.values("position")[:1]),
        "cut_until": models.Subquery(row.values("until")[:1]),
    }


# The statements of columns_read, by database connection (each thread has its own) and by
# the function that builds their columns; the model each function's first column reads.
_columns: WeakKeyDictionary[BaseDatabaseWrapper, dict[Callable, tuple]] = WeakKeyDictionary()
_column_models: dict[Callable, type[models.Model]] = {}


def columns_read(build: Callable[[], dict[str, models.Subquery]]) -> dict:
    """The values of the one-value subqueries `build` returns (`cut_columns`' and the like)
    read in one statement, where no table has the one row to hang them on (an installation
    may have no fold mark nor cut yet), each converted as the ORM converts its field. Their
    statement never changes (no value of a request in it): it is built and compiled once a
    connection (the ORM took some milliseconds at every page) and prepared on PostgreSQL."""
    if (model := _column_models.get(build)) is None:
        model = _column_models[build] = next(iter(build().values())).query.model
    db = connections[router.db_for_read(model)]
    made = _columns.setdefault(db, {}).get(build)
    if made is None:
        parts, params, converters = [], [], []
        for name, subquery in build().items():
            sql, part_params = subquery.query.get_compiler(connection=db).as_sql()
            parts.append(f"({sql})")
            params.extend(part_params)
            found = db.ops.get_db_converters(subquery)
            found += subquery.output_field.get_db_converters(db)
            converters.append((name, subquery, found))
        made = _columns[db][build] = ("SELECT " + ", ".join(parts), params, converters)
    sql, params, converters = made
    with statement_cursor(db.alias) as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    values = {}
    for (name, subquery, found), value in zip(converters, row, strict=True):
        for convert in found:
            value = convert(value, subquery, db)
        values[name] = value
    return values


def cut_of(position: int | None, until: datetime | None) -> Cut | None:
    """The cut from `cut_columns`' values, in their order (None: the rate never ran)."""
    return None if until is None else Cut(position=position, until=until.astimezone(UTC))


def log_read_by_all(*, log: str) -> int:
    """The id up to which every consumer of `log` has read it: its entries up to there may
    be pruned; those past it are still there. 0 while a consumer never ran."""
    names = tuple(f"{consumer}:{log}" for consumer in LOG_CONSUMERS[log])
    positions = dict(constant_rows(Cursor, _positions_query(names)))
    return min(positions.values()) if len(positions) == len(names) else 0


def log_positions(*, consumer: str) -> tuple[tuple[str, int], ...]:
    """Where the stage `consumer` has read each change log it reads, by cursor name (0: it
    never ran): a read that depends on what the stage wrote may name it by these."""
    names = tuple(
        f"{consumer}:{log}" for log, readers in LOG_CONSUMERS.items() if consumer in readers
    )
    positions = dict(constant_rows(Cursor, _positions_query(names)))
    return tuple((name, positions.get(name, 0)) for name in names)


@cache
def _positions_query(names: tuple[str, ...]) -> Callable[[], models.QuerySet]:
    """The query of the positions of the cursors `names`, one function a tuple of names, so
    that constant_rows builds it once a connection (pages read them at every view)."""
    return lambda: Cursor.objects.filter(name__in=names).values_list("name", "position")


def log_prune(model: type[models.Model], *, log: str) -> int:
    """Drop the entries of `log` every consumer has read (the log's owner calls it)."""
    read = log_read_by_all(log=log)
    if not read:
        return 0  # a consumer that never ran has read nothing
    deleted, _ = model.objects.filter(id__lte=read).delete()
    return deleted
