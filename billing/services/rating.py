"""Rated usage: billing's read model of what each tenant's month rated to, kept current by
the rate stage (portal.pipeline). The stage reads what changed past its own cursors:
metering's change log (a tenant's usage of an hour) and billing's own queue (a price,
contract or promotion from an hour on, an invoice that spent promotions); it rates those
tenant-months again from their first changed hour, resuming from the state stored with the
hour before (RatedHour: the allowance and tier running totals, billing.domain.rating.hours),
or, when later events of their last hour are all that changed, from the state stored inside
it (RatedHourPrefix), in one `month_rate` per month; then, in one short transaction, it replaces their rated
usage from that hour (RatedUsage: per tenant, deployment, hour and sale, before
promotions), the hours' states and the month's totals, lines and promotions
(RatedTenantMonth), appends the hours whose rated usage changed per tenant to billing's
change log, and consumes what it read, recording how far usage was folded when it read
it: that is the published cut every read of an open period answers as of (portal.pipeline),
and the rated usage is exactly the cut's, as the stage reads the log and the rollups it rates
in one snapshot (portal.snapshot). The measurement, TFOM revenue, price realization, SLA
credits and draft invoices read the stored rows and never run the rating.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from decimal import ROUND_DOWN, Decimal
from functools import reduce
from operator import or_

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Min, Q
from django.db.models.functions import TruncMonth

from billing.domain.rating.engine import START
from billing.domain.rating.hours import (
    HourPrefix,
    HourState,
    MissingCut,
    hour_states,
    month_summary,
    quantities_add,
    realized_before,
)
from billing.domain.rating.types import month_bounds
from billing.domain.reservations import reservation_lines
from billing.models import (
    RatedChange,
    RatedHour,
    RatedHourPrefix,
    RatedMark,
    RatedTenantMonth,
    RatedUsage,
    RatingPending,
)
from billing.selectors.rating.inputs import MonthRating, line_row, month_rate, quantities_of
from billing.selectors.reservations import reserving_tenant_months, reserving_tenants
from billing.services.rated_rows import (
    HOUR_FIELDS,
    RATED_FIELDS,
    RATED_SUMS,
    hour_prefixes,
    hour_row,
    hour_state_of,
    month_cells,
    month_totals_move,
    prefix_of_row,
    prefix_row,
    quantities_json,
    rated_usage_rows,
)
from metering.selectors.changes import usage_changes_read
from metering.selectors.usage import (
    daily_usage_list,
    raw_months_archived,
    usage_metered_until,
)
from portal import clock
from portal.bulk import rows_insert, rows_upsert
from portal.models import Tenant
from portal.money import PRO_RATA, fraction_to_decimal
from portal.periods import hour_floor, next_month
from portal.periods import month_start as month_floor
from portal.pipeline import MEASURE, RATE, log_append, log_consume, log_prune, stage_schedule
from portal.snapshot import read_snapshot

log = logging.getLogger(__name__)
ZERO = Decimal(0)
HOUR = timedelta(hours=1)

_TOTALS = (
    "currency", "usage_amount", "reserved_amount", "minimum_shortfall", "realized",
    "promotions", "promotion_rate", "quantities", "lines", "credits_applied", "error",
    "rated_at",
)  # fmt: skip
RATE_QUANTUM = Decimal(10) ** -30  # the promotion rate's precision (RatedTenantMonth)


def rating_queue(*, start: datetime, tenant: Tenant | None = None, hours: bool = True) -> None:
    """Ask the rate stage to rate again the usage of `tenant` (None: every tenant) from
    `start` on: a price or contract from then. `hours=False` when only the promotions the
    months from then apply changed (a credit granted, an invoice that spent credits): no
    hour is rated again, the months' totals are. In the caller's transaction."""
    RatingPending.objects.create(tenant=tenant, start=start, hours=hours)
    stage_schedule(RATE)


def rated_usage_update() -> int:
    """The rate stage: every tenant-month that metering's change log (past this stage's
    cursor) or billing's queue names is rated again from its first changed hour, resuming
    from the state stored with the hour before; then its rated usage from that hour, its
    hours' states and its totals are replaced and the changes appended to billing's change
    log in one short transaction that consumes what was read (the rating itself runs
    before it: on SQLite a write transaction holds back ingestion). Returns the
    tenant-months rated."""
    while True:
        with read_snapshot():  # the log and the rollups rated of one instant: the cut's
            metered_until = usage_metered_until()  # before the log: what it holds is folded
            changes = usage_changes_read(consumer=RATE)
            queued = list(RatingPending.objects.values_list("pk", "tenant_id", "start", "hours"))
            stale = _usage_months(changes.entries)
            resumable = {month: set(since) for month, since in stale.items()}
            for month, since in [*_queued_months(queued).items(), *_reserved_months().items()]:
                resumable.get(month, set()).difference_update(since)  # not usage alone
                for tenant_id, hour in since.items():
                    stale[month][tenant_id] = min(hour, stale[month].get(tenant_id, hour))
            for month in raw_months_archived() & stale.keys():  # never rated from missing events
                log.error(
                    "rate: the raw events of %s are archived: its rated usage is kept",
                    f"{month:%Y-%m}",
                )
                del stale[month]
            ratings = [
                _rate(month, since, resumable=resumable.get(month, set()))
                for month, since in sorted(stale.items())
            ]
        with transaction.atomic():
            claimed, _ = RatingPending.objects.filter(pk__in=[q[0] for q in queued]).delete()
            # The cut every read answers as of moves with the rated usage (portal.pipeline).
            if not log_consume(changes, until=metered_until) or claimed != len(queued):
                transaction.set_rollback(True)  # another run took them meanwhile: again
                continue
            for rating in ratings:
                _store(rating)
            RatedMark.objects.update_or_create(pk=1, defaults={"rated_until": metered_until})
            stage_schedule(MEASURE)  # the open day and month, measured to the new cut
        log_prune(RatedChange, log="billing.rated")
        return sum(len(rating.months) for rating in ratings)


def _usage_months(changes) -> dict[datetime, dict[int, datetime]]:
    """Per month, the tenants whose usage metering changed and the first hour it changed."""
    months: dict[datetime, dict[int, datetime]] = defaultdict(dict)
    for change in changes:
        if change.tenant_id is not None:
            hour = hour_floor(change.start)
            since = months[month_floor(hour)]
            since[change.tenant_id] = min(hour, since.get(change.tenant_id, hour))
    return months


def _reserved_months() -> dict[datetime, dict[int, datetime]]:
    """The tenant-months of this month and the last that a reservation bills but nothing
    rated yet (a month without usage begins): rated from their start."""
    months: dict[datetime, dict[int, datetime]] = {}
    this = month_floor(clock.now())
    for month in (month_floor(this - HOUR), this):
        rated = RatedTenantMonth.objects.filter(month_start=month).values_list(
            "tenant_id", flat=True
        )
        missing = reserving_tenants(start=month, end=next_month(month)) - set(rated)
        if missing:
            months[month] = dict.fromkeys(missing, month)
    return months


def _queued_months(queued: list[tuple]) -> dict[datetime, dict[int, datetime]]:
    """The tenant-months with usage or reservations (up to this month) that billing's queue
    (pk, tenant id, start, hours) names, and the hour from which each rates differently (for
    promotions alone, the month's last hour: its totals are worked out again from the hour
    before)."""
    if not queued:
        return {}
    months: dict[datetime, dict[int, datetime]] = defaultdict(dict)
    first = min(month_floor(start) for _, _, start, _ in queued)
    usage = {
        (_month_of(month), tenant_id)
        for month, tenant_id in daily_usage_list(start=first, end=datetime(2101, 1, 1, tzinfo=UTC))
        .annotate(month=TruncMonth("day"))
        .values_list("month", "tenant_id")
        .distinct()
    }
    # A reservation bills its months, usage or not.
    usage |= reserving_tenant_months(start=first, end=next_month(month_floor(clock.now())))
    for month, tenant_id in sorted(usage):
        _, end = month_bounds(month_start=month)
        since = [
            max(month, hour_floor(start)) if hours else end - HOUR
            for _, pk, start, hours in queued
            if (pk is None or pk == tenant_id) and month >= month_floor(start)
        ]
        if since:
            months[month][tenant_id] = min(since)
    return months


def _month_of(value) -> datetime:
    """A TruncMonth of a date (a date on SQLite and PostgreSQL alike) as its first instant."""
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.combine(value, time.min, tzinfo=UTC)


@dataclass(frozen=True)
class _Rated:
    """One month's rating of some tenants from their first changed hours, ready to store."""

    month_start: datetime
    since: dict[int, datetime]  # tenant id -> the first hour rated again
    months: list[RatedTenantMonth]  # the tenant-months' totals
    usage: list[tuple]  # rated usage rows of RATED_FIELDS, without the tenant-month
    hours: list[tuple]  # the states of the hours rated, rows of HOUR_FIELDS
    promotions_moved: set[int]  # tenants whose month's promotion rate changed
    prefixes: list[RatedHourPrefix]  # the states inside their last hour the next run rates from


def _rate(
    month_start: datetime, since: dict[int, datetime], *, resumable: Collection[int] = ()
) -> _Rated:
    """Rate the tenants' month from their hours in `since` on (a tenant-month never rated,
    or that could not be, from its start), and read the rated usage it replaces (reads
    only: if another run stores these tenant-months first, it consumed what this run read,
    and this run's `log_consume` or queue claim fails: it reads again). The `resumable`
    tenants, whose usage alone changed, rate their first hour from the state stored inside
    it (RatedHourPrefix) where it holds."""
    stored = {
        pk: (rate, quantities_of(quantities))
        for pk, rate, quantities in RatedTenantMonth.objects.filter(
            month_start=month_start, tenant_id__in=since, error=""
        ).values_list("tenant_id", "promotion_rate", "quantities")
    }
    since = {pk: hour if pk in stored else month_start for pk, hour in since.items()}
    openings = _openings(month_start, since)
    replaced: dict[int, list[dict]] = defaultdict(list)  # the hours' quantities rated again
    later = {pk: hour for pk, hour in since.items() if hour > month_start}
    if later:
        for pk, quantities in RatedHour.objects.filter(
            _hours(later), month_start=month_start
        ).values_list("tenant_id", "quantities"):
            replaced[pk].append(quantities_of(quantities))
    inside = {
        row.tenant_id: prefix_of_row(row)
        for row in RatedHourPrefix.objects.filter(
            month_start=month_start, tenant_id__in=[pk for pk in since if pk in resumable]
        )
        if row.hour.astimezone(UTC) == since[row.tenant_id]
    }
    rating = month_rate(
        month_start=month_start,
        tenants=list(Tenant.objects.filter(pk__in=since)),
        resume={
            pk: (hour, openings[pk].running if pk in openings else START)
            for pk, hour in since.items()
        },
        prefixes=inside,
    )
    rows, hours = [], []
    lasts, wanted = {}, {}  # the states inside the tenants' last hours: kept, to work out
    for pk in sorted(since):
        row = RatedTenantMonth(tenant_id=pk, month_start=month_start, rated_at=clock.now())
        if pk in rating.errors:
            row.error = str(rating.errors[pk])
        else:
            kept = {}
            if pk in stored and since[pk] > month_start:
                kept = quantities_add(stored[pk][1], replaced[pk], sign=-1)
            resumed = rating.resumed.get((pk, since[pk]))
            opening = resumed.state if resumed else openings.get(pk)
            try:
                states = _month_close(row, rating, since[pk], opening, kept, inside=bool(resumed))
            except MissingCut:  # a credit's expiry unknown when its hour was rated
                return _rate(month_start, {**since, pk: month_start})
            hours.extend(hour_row(pk, month_start, state) for state in states)
            last = _last_prefix(rating, pk, opening, inside=bool(resumed))
            if isinstance(last, HourPrefix):
                lasts[pk] = last
            elif last is not None:
                wanted[pk] = last
        rows.append(row)
    lasts.update(hour_prefixes(rating, wanted))
    moved = {
        row.tenant_id for row in rows if stored.get(row.tenant_id, (None,))[0] != row.promotion_rate
    }
    prefix_rows = [prefix_row(pk, month_start, prefix) for pk, prefix in sorted(lasts.items())]
    return _Rated(month_start, since, rows, rated_usage_rows(rating), hours, moved, prefix_rows)


def _last_prefix(
    rating: MonthRating, pk: int, opening: HourState | None, *, inside: bool
) -> HourPrefix | tuple[HourState, datetime, frozenset[int]] | None:
    """The state inside the tenant's last hour with usage to rate it from next time (the
    running hour, which later events change), when that hour is split and settled
    (MonthRating.settled): this run's where it rated from one there, else where its events
    were rated one by one up to, as hour_prefixes is asked for it (the state then, that
    time and the deployments its reservations cover)."""
    hours = rating.rows.get(pk)
    if not hours:
        return None
    cell = (pk, max(hours))
    at, covered = rating.settled.get(cell, (None, frozenset()))
    if at is None:
        return None
    if cell in rating.resumed:
        return rating.resumed[cell]
    expiries = {c.expires_at for c in rating.promotions[pk] if c.expires_at}
    state = hour_states(
        items=[rated for rated in rating.rated[pk].items if rated.item.time <= at],
        opening=opening,
        instants=[instant for instant in expiries if rating.month_start < instant <= at],
        inside=inside,
    )[-1]
    return state, at, covered


def _openings(month_start: datetime, since: dict[int, datetime]) -> dict[int, HourState]:
    """Per tenant rated from an hour after its month's start, the stored state of its last
    hour with usage before that hour (none: no usage before it)."""
    later = {pk: hour for pk, hour in since.items() if hour > month_start}
    if not later:
        return {}
    lasts = dict(
        RatedHour.objects.filter(_hours(later, lookup="lt"), hour__gte=month_start)
        .values("tenant_id")
        .annotate(last=Max("hour"))
        .values_list("tenant_id", "last")
    )
    return {
        row.tenant_id: hour_state_of(row)
        for row in RatedHour.objects.filter(tenant_id__in=lasts, hour__in=set(lasts.values()))
        if row.hour == lasts[row.tenant_id]
    }


def _month_close(
    row: RatedTenantMonth,
    rating: MonthRating,
    since: datetime,
    opening: HourState | None,
    kept: dict,
    *,
    inside: bool = False,
) -> list[HourState]:
    """The states of the hours rated, and the tenant-month's totals and lines in `row`: its
    paid quantities are those of the hours before `since` (`kept`) and of the hours rated,
    its realized amount the last state's (`inside`: `opening` is a state inside the hour
    `since`, hour_states)."""
    pk, month_start = row.tenant_id, rating.month_start
    promotions = rating.promotions[pk]
    _, end = month_bounds(month_start=month_start)
    instants = sorted({c.expires_at for c in promotions if c.expires_at})
    instants = [instant for instant in instants if month_start < instant < end]
    states = hour_states(
        items=rating.rated[pk].items, opening=opening, instants=instants, inside=inside
    )
    known = [opening] if opening else []
    for instant in instants:
        if instant < since:
            earlier = (
                RatedHour.objects.filter(tenant_id=pk, hour__gte=month_start, hour__lt=instant)
                .order_by("-hour")
                .first()
            )
            known += [hour_state_of(earlier)] if earlier else []
    known = sorted({state.hour: state for state in [*known, *states]}.values(), key=_hour_of)
    pools = {instant: realized_before(instant, known) for instant in instants}
    last = states[-1] if states else opening
    realized = last.realized if last else ZERO
    quantities = quantities_add(kept, (state.quantities for state in states))
    reserved = reservation_lines(
        rating.reservations.get(pk, ()),
        month_start=month_start,
        month_end=end,
        currency=settings.FACTORY_CURRENCY,
    )
    closing = month_summary(
        month_start=month_start,
        quantities=quantities,
        realized=realized,
        pools=pools,
        promotions=promotions,
        opening=rating.openings[pk],
        currency=settings.FACTORY_CURRENCY,
        reserved=reserved,
    )
    promoted = fraction_to_decimal(closing.promoted)
    row.currency = settings.FACTORY_CURRENCY
    row.usage_amount = closing.usage_amount
    row.reserved_amount = sum((line.amount for line in reserved), ZERO)
    row.minimum_shortfall = closing.minimum_shortfall
    row.realized = realized
    row.promotions = promoted
    row.promotion_rate = (
        PRO_RATA.divide(promoted, realized).quantize(
            RATE_QUANTUM, rounding=ROUND_DOWN, context=PRO_RATA
        )
        if realized
        else ZERO
    )
    row.quantities = quantities_json(quantities)
    row.lines = [line_row(line) for line in closing.lines]
    row.credits_applied = [
        [use.credit_id, str(use.applied_amount), str(use.billed_amount)]
        for use in closing.promotions
    ]
    return states


def _hour_of(state: HourState) -> datetime:
    return state.hour


def _hours(since: dict[int, datetime], *, lookup: str = "gte") -> Q:
    """Rows of each tenant from its hour on (lookup "lt": before it)."""
    by_hour: dict[datetime, list[int]] = defaultdict(list)
    for pk, hour in since.items():
        by_hour[hour].append(pk)
    return reduce(
        or_,
        (
            Q(tenant_id__in=ids, **{f"hour__{lookup}": hour})
            for hour, ids in sorted(by_hour.items())
        ),
    )


def _store(rated: _Rated) -> None:
    """Replace the tenant-months' rated usage and hour states from their first hour rated,
    and their totals; move their month totals of rated usage by what was replaced (summed by
    the database); append to billing's change log the hours each tenant's rated usage
    changed in (the whole month where the month's promotion rate moved: every hour's share
    of it did)."""
    month = rated.month_start
    if not rated.since:
        return
    hours = _hours(rated.since)
    replaced = RatedUsage.objects.filter(hours, month_start=month)
    removed = month_cells(replaced)
    before = _rows_kept(replaced) if removed else None
    replaced.delete()
    RatedHour.objects.filter(hours, month_start=month).delete()
    rows_upsert(
        RatedTenantMonth,
        rated.months,
        unique_fields=("tenant", "month_start"),
        update_fields=_TOTALS,
    )
    ids = dict(
        RatedTenantMonth.objects.filter(month_start=month, tenant_id__in=rated.since).values_list(
            "tenant_id", "pk"
        )
    )
    rows_insert(
        RatedUsage._meta.db_table,
        (*RATED_FIELDS, "tenant_month_id"),
        ((*row, ids[row[0]]) for row in rated.usage),
    )
    rows_insert(RatedHour._meta.db_table, HOUR_FIELDS, rated.hours)
    RatedHourPrefix.objects.filter(month_start=month, tenant_id__in=rated.since).delete()
    RatedHourPrefix.objects.bulk_create(rated.prefixes)
    written = RatedUsage.objects.filter(hours, month_start=month)
    # nothing stored from those hours before: every hour written changed
    changes = _written_spans(written) if before is None else _changed_spans(before, written)
    month_totals_move(month, removed, month_cells(written))
    if rated.promotions_moved:
        _, end = month_bounds(month_start=month)
        changes = [c for c in changes if c.tenant_id not in rated.promotions_moved]
        changes += [
            RatedChange(tenant_id=pk, start=month, end=end) for pk in sorted(rated.promotions_moved)
        ]
    log_append(RatedChange, changes, log="billing.rated")


# A rated usage row as _changed_spans compares it: its cell, hour and sums.
_ROW = ("tenant_id", "project_id", "deployment_id", "hour", "sale", "service_tier", "covered",
        *RATED_SUMS)  # fmt: skip
_BEFORE = "billing_rated_before"  # the temporary table of the rows replaced


def _rows_kept(rows) -> str:
    """The rated usage rows about to be replaced, copied (_ROW) into a temporary table of
    this connection, for _changed_spans to compare with what replaces them in the database
    (not a dict of every row in Python: a month's re-rating replaces millions); returns its
    name."""
    sql, params = rows.values_list(*_ROW).order_by().query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_BEFORE}")
        cursor.execute(f"CREATE TEMPORARY TABLE {_BEFORE} AS {sql}", params)
    return _BEFORE


def _written_spans(rows) -> list[RatedChange]:
    """Per tenant, the hours from the first to the last of `rows` (`_changed_spans` of
    rows that replace none), read as two figures a tenant instead of every row."""
    return [
        RatedChange(tenant_id=pk, start=first.astimezone(UTC), end=last.astimezone(UTC) + HOUR)
        for pk, first, last in rows.values("tenant_id")
        .annotate(first=Min("hour"), last=Max("hour"))
        .values_list("tenant_id", "first", "last")
        .order_by("tenant_id")
    ]


def _changed_spans(before: str, rows) -> list[RatedChange]:
    """Per tenant, the hours from the first to the last whose rated usage differs between
    the rows replaced (the temporary table `before`, _rows_kept) and `rows` (a queryset of
    those replacing them): a row of either that the other lacks, cell, hour and sums alike
    (EXCEPT compares numbers by value, as Decimal does). The table is dropped."""
    sql, params = rows.values_list(*_ROW).order_by().query.sql_with_params()
    columns = ", ".join(_ROW)
    gone = f"SELECT {columns} FROM {before} EXCEPT {sql}"  # noqa: S608 (the ORM's SQL)
    new = f"{sql} EXCEPT SELECT {columns} FROM {before}"  # noqa: S608 (the ORM's SQL)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT tenant_id, MIN(hour), MAX(hour) FROM (SELECT tenant_id, hour FROM ({gone}) "  # noqa: S608
            f"AS gone UNION ALL SELECT tenant_id, hour FROM ({new}) AS new) AS changed "
            "GROUP BY tenant_id ORDER BY tenant_id",
            [*params, *params],
        )
        spans = cursor.fetchall()
        cursor.execute(f"DROP TABLE {before}")
    return [
        RatedChange(tenant_id=pk, start=_read_hour(first), end=_read_hour(last) + HOUR)
        for pk, first, last in spans
    ]


def _read_hour(value) -> datetime:
    """An hour read by raw SQL, as the ORM reads it (SQLite keeps naive UTC text)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
