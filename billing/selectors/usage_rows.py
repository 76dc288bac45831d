"""Rollup rows and events as rating items: hourly rows, daily rows for days that rate
alike throughout, and the hours the allowance, a volume tier or a credit's expiry splits
(rated event by event, in kpis.md's order: time, source, id)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, time, timedelta
from functools import reduce
from operator import or_

from django.db.models import F, Q

from billing.domain.rating.books import ContractBook
from billing.domain.rating.types import ContractVersion, UsageItem
from billing.domain.rating.types import PromotionalCredit as CreditIn
from billing.models import Price
from metering.selectors.factory import deployment_version_list
from metering.selectors.usage import (
    daily_usage_list,
    event_key_list,
    hourly_usage_list,
    usage_event_list,
)
from portal.periods import day_floor, hour_floor

HOUR = timedelta(hours=1)

DAY = timedelta(days=1)


def _rollup_rows(rows, when: str) -> dict[int, dict[datetime, list[dict]]]:
    """Rollup rows with ok usage, per tenant id and start instant (`when`: the hour, or the
    day's midnight for daily rows), with ok and compliant sums."""
    rows = (
        rows.filter(Q(ok_input_tokens__gt=0) | Q(ok_output_tokens__gt=0))
        .values(
            "tenant_id",
            "deployment_id",
            "requests",
            "errors",
            "compliant_input_tokens",
            "compliant_cached_tokens",
            "compliant_output_tokens",
        )
        .annotate(
            hour=F(when),
            input_tokens=F("ok_input_tokens"),
            cached_tokens=F("ok_cached_tokens"),
            output_tokens=F("ok_output_tokens"),
            model=F("deployment__model__slug"),
            pool=F("deployment__pool__slug"),
            deployment=F("deployment__slug"),
        )
        .order_by("tenant_id", when, "deployment_id")
    )
    by_tenant: dict[int, dict[datetime, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        hour = row["hour"]
        if isinstance(hour, datetime):
            row["hour"] = hour.astimezone(UTC)
        else:  # a daily row's date: its midnight
            row["hour"] = datetime.combine(hour, time.min, tzinfo=UTC)
        by_tenant[row["tenant_id"]][row["hour"]].append(row)
    return by_tenant


def hourly_rows(
    start: datetime, end: datetime, tenant_ids
) -> dict[int, dict[datetime, list[dict]]]:
    rows = hourly_usage_list(start=start, end=end)
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=tenant_ids)
    return _rollup_rows(rows, "hour")


def _days_changing(instants: Iterable[datetime | None], start: datetime, end: datetime):
    """The days of [start, end) inside which one of the instants falls (not at midnight)."""
    return {
        day_floor(t) for t in instants if t is not None and start <= t < end and t != day_floor(t)
    }


def _hourly_cells(days: dict[int, set[datetime]]) -> dict[int, dict[datetime, list[dict]]]:
    """The hourly rows of the given (tenant id, day) cells, in one query."""
    tenants_by_day: dict[datetime, list[int]] = defaultdict(list)
    for tenant_id, tenant_days in days.items():
        for day in tenant_days:
            tenants_by_day[day].append(tenant_id)
    if not tenants_by_day:
        return {}
    condition = reduce(
        or_,
        (
            Q(hour__gte=day, hour__lt=day + DAY, tenant_id__in=sorted(tenants))
            for day, tenants in sorted(tenants_by_day.items())
        ),
    )
    return _rollup_rows(hourly_usage_list().filter(condition), "hour")


def day_rows(
    daily: dict[int, dict[datetime, list[dict]]],
    *,
    month: tuple[datetime, datetime],
    period: tuple[datetime, datetime],
    contracts: dict[int, list[ContractVersion]],
    promotions: dict[int, list[CreditIn]],
) -> dict[int, dict[datetime, list[dict]]]:
    """Each tenant's rows keyed by start instant: a day's daily rows where the whole day
    rates alike, the hourly rows of the days that need them — a day holding the period's
    start or end, a price, contract or deployment version change, a credit's expiry, or
    where the allowance runs out or a volume tier is reached."""
    start, end = month
    common = _days_changing(
        [
            *period,
            *Price.objects.filter(effective_from__gte=start, effective_from__lt=end).values_list(
                "effective_from", flat=True
            ),
            *deployment_version_list(start=start, end=end).values_list("effective_from", flat=True),
        ],
        start,
        end,
    )
    books, allowances, hourly_days = {}, {}, {}
    for tenant_id, by_day in daily.items():
        books[tenant_id] = book = ContractBook(contracts[tenant_id])
        opening = book.at(when=start)
        allowances[tenant_id] = opening.free_tokens_per_month if opening is not None else 0
        changing = _days_changing(
            [c.effective_from for c in contracts[tenant_id]]
            + [c.expires_at for c in promotions.get(tenant_id, [])],
            start,
            end,
        )
        crossing = split_hours(
            by_day, contracts=book, allowance=allowances[tenant_id], promotions=[]
        )
        hourly_days[tenant_id] = (common | changing | crossing) & by_day.keys()
    while True:
        hourly = _hourly_cells(hourly_days)
        mixed, again = {}, False
        for tenant_id, by_day in daily.items():
            whole = {day: rows for day, rows in by_day.items() if day not in hourly_days[tenant_id]}
            mixed[tenant_id] = dict(sorted({**whole, **hourly.get(tenant_id, {})}.items()))
            # Seen hour by hour, the split days can move a crossing into a whole day.
            crossing = split_hours(
                mixed[tenant_id],
                contracts=books[tenant_id],
                allowance=allowances[tenant_id],
                promotions=[],
            )
            if moved := crossing & whole.keys():
                hourly_days[tenant_id] |= moved
                again = True
        if not again:
            return mixed


def split_hours(
    by_hour: dict[datetime, list[dict]],
    *,
    contracts: ContractBook,
    allowance: int,
    promotions: list[CreditIn],
) -> set[datetime]:
    """Hours inside which the allowance runs out, a tier is reached or a credit expires.

    Paid tokens before an hour are known as a range once an hour was split (its paid
    share is only known event by event), so the tier test is conservative."""
    split = {
        hour_floor(c.expires_at)
        for c in promotions
        if c.expires_at is not None and c.expires_at.astimezone(UTC).timestamp() % 3600
    }
    consumed = 0
    paid_low = paid_high = 0
    for hour in sorted(by_hour):
        tokens = sum(row["input_tokens"] + row["output_tokens"] for row in by_hour[hour])
        contract = contracts.at(when=hour)
        is_paid_contract = contract is not None and contract.kind == "paid"
        if consumed < allowance < consumed + tokens:
            split.add(hour)
            if is_paid_contract:
                paid_high += tokens
        elif consumed + tokens > allowance and is_paid_contract:
            if any(paid_low < t.from_tokens <= paid_high + tokens for t in contract.volume_tiers):
                split.add(hour)
            paid_low += tokens
            paid_high += tokens
        consumed += tokens
    return split


def split_events(cells: set[tuple[int, datetime]]) -> dict[tuple[int, datetime], list[dict]]:
    """The ok events of the given (tenant id, hour) cells, with their (source, id), in
    two queries whatever the number of cells."""
    if not cells:
        return {}
    condition = reduce(
        or_, (Q(tenant_id=t, time__gte=h, time__lt=h + HOUR) for t, h in sorted(cells))
    )
    events = list(
        usage_event_list()
        .filter(condition, is_error=False)
        .values(
            "id",
            "time",
            "tenant_id",
            "deployment_id",
            "input_tokens",
            "cached_tokens",
            "output_tokens",
            "ttft_ms",
            "tpot_ms",
            "requests",
        )
    )
    keys = {
        pk: (source, event_id)
        for pk, source, event_id in event_key_list(ids=[e["id"] for e in events]).values_list(
            "id", "source", "event_id"
        )
    }
    by_cell: dict[tuple[int, datetime], list[dict]] = defaultdict(list)
    for event in events:
        event["time"] = event["time"].astimezone(UTC)
        event["source"], event["event_id"] = keys[event["id"]]
        hour = hour_floor(event["time"])
        by_cell[(event["tenant_id"], hour)].append(event)
    return by_cell


def _row_totals(row: dict) -> tuple[int, int, int, int]:
    ok_requests = row["requests"] - row["errors"]
    return row["input_tokens"], row["cached_tokens"], row["output_tokens"], ok_requests


def _item(time, row, input_tokens, cached_tokens, output_tokens, **extra) -> UsageItem:
    return UsageItem(
        time=time,
        model=row["model"],
        pool=row["pool"],
        deployment=row["deployment"],
        input_tokens=input_tokens,
        cached_tokens=cached_tokens,
        output_tokens=output_tokens,
        **extra,
    )


def hour_items(hour: datetime, rows: list[dict], events: list[dict]) -> list[UsageItem]:
    """A split hour: its events as items, plus what the rollups hold beyond them."""
    names = {row["deployment_id"]: row for row in rows}
    items = []
    explained: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # in, cached, out, n
    for event in events:
        row = names.get(event["deployment_id"])
        if row is None:  # not rolled up yet: the caller folds pending events first
            continue
        tokens = (event["input_tokens"], event["cached_tokens"], event["output_tokens"])
        items.append(
            _item(
                event["time"],
                row,
                *tokens,
                requests=event["requests"],
                source=event["source"],
                id=event["event_id"],
            )
        )
        sums = explained[event["deployment_id"]]
        for index, value in enumerate((*tokens, event["requests"])):
            sums[index] += value
    for row in rows:
        rest = [
            max(total - seen, 0)
            for total, seen in zip(_row_totals(row), explained[row["deployment_id"]], strict=True)
        ]
        if rest[0] or rest[2]:
            rest[1] = min(rest[1], rest[0])
            items.append(_item(hour, row, *rest[:3], requests=rest[3]))
    return items


def row_item(hour: datetime, row: dict) -> UsageItem:
    """A rollup row as one aggregate item of its hour (or day)."""
    *tokens, requests = _row_totals(row)
    return _item(hour, row, *tokens, requests=requests)


def daily_rows(start: datetime, end: datetime, tenant_ids) -> dict[int, dict[datetime, list[dict]]]:
    rows = daily_usage_list(start=start, end=end)
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=tenant_ids)
    return _rollup_rows(rows, "day")
