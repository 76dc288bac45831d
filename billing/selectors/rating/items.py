"""Rollup rows and events as rating items: hourly rows, and the hours the allowance, a
volume tier, a credit's expiry or a reservation's capacity splits (rated event by event, in
kpis.md's order: time, source, id)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import reduce
from operator import or_

from django.db.models import Count, F, Q

from billing.domain.rating.books import ContractBook
from billing.domain.rating.engine import START
from billing.domain.rating.types import PromotionalCredit as CreditIn
from billing.domain.rating.types import Running, UsageItem
from billing.domain.reservations import Coverage
from metering.domain.usage.production import production_tokens
from metering.domain.usage.rollup import TOKEN_FIELDS
from metering.selectors.usage import (
    event_key_list,
    hourly_usage_list,
    usage_event_list,
)
from portal.periods import hour_floor

HOUR = timedelta(hours=1)
MICROSECOND = timedelta(microseconds=1)


def hourly_rows(
    start: datetime, end: datetime, tenant_ids
) -> dict[int, dict[datetime, list[dict]]]:
    """The hourly rollup rows of [start, end) with ok usage (of `tenant_ids`, or every
    tenant's), per tenant id and hour (a row per deployment and project), with ok and
    compliant sums."""
    rows = hourly_usage_list(start=start, end=end)
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=tenant_ids)
    rows = (
        rows.filter(Q(ok_input_tokens__gt=0) | Q(ok_output_tokens__gt=0))
        .values(
            "tenant_id",
            "deployment_id",
            "service_tier",
            "project_id",
            "hour",
            "requests",
            "errors",
            "compliant_input_tokens",
            "compliant_cached_tokens",
            "compliant_output_tokens",
        )
        .annotate(
            input_tokens=F("ok_input_tokens"),
            cached_tokens=F("ok_cached_tokens"),
            cache_write_tokens=F("ok_cache_write_tokens"),
            output_tokens=F("ok_output_tokens"),
            reasoning_tokens=F("ok_reasoning_tokens"),
            model=F("deployment__model__slug"),
            pool=F("deployment__pool__slug"),
            deployment=F("deployment__slug"),
        )
        .order_by("tenant_id", "hour", "deployment_id", "service_tier", "project_id")
    )
    by_tenant: dict[int, dict[datetime, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        row["hour"] = row["hour"].astimezone(UTC)
        by_tenant[row["tenant_id"]][row["hour"]].append(row)
    return by_tenant


@dataclass(frozen=True)
class HourBounds:
    """What may make a split hour's events rate otherwise than their sums (split_hours): the
    ranges of the allowance's and the tiers' running totals at the hour's start, the
    allowance, the volume tier boundaries of its paid contract, the credit expiries inside
    it, the most of its ok tokens (input + output) the allowance may count, and the
    deployments its tenant's reservations cover in it (ids: their events are all read, what
    a coverage leaves on demand being only known event by event)."""

    consumed: tuple[int, int]
    paid: tuple[int, int]
    allowance: int
    tiers: tuple[int, ...]
    instants: tuple[datetime, ...]
    tokens: int
    covered: frozenset[int]

    def settled(self, tokens: int, time: datetime) -> bool:
        """Whether, once the hour's events up to `time` (in rating order) are rated, `tokens`
        of them (input + output) on deployments no reservation covers, no boundary is left
        for the rest: every credit expiry is past, the allowance is spent (or every token of
        the hour is free) and no volume tier boundary lies between the least the paid total
        can be then and the most it can be at the hour's end. The rest of those deployments
        then rates alike whatever its order: its sums rated as one item give what its
        events give, summed."""
        if any(instant > time for instant in self.instants):
            return False
        (consumed_low, consumed_high), (paid_low, paid_high) = self.consumed, self.paid
        allowance = self.allowance
        if consumed_high + self.tokens <= allowance:
            return True
        if consumed_low + tokens < allowance:
            return False
        low = paid_low + max(consumed_low + tokens, allowance) - max(consumed_low, allowance)
        high = (
            paid_high + max(consumed_high + self.tokens, allowance) - max(consumed_high, allowance)
        )
        return not any(low < boundary <= high for boundary in self.tiers)


def split_hours(
    by_hour: dict[datetime, list[dict]],
    *,
    contracts: ContractBook,
    allowance: int,
    promotions: list[CreditIn],
    opening: Running = START,
    coverage: Mapping[tuple[str, datetime], Coverage] | None = None,
) -> dict[datetime, HourBounds]:
    """Hours with usage inside which the allowance runs out, a tier is reached, a credit
    expires or a deployment's usage crosses its reservations' capacity (kpis.md 3d), the
    running totals before the first hour being `opening`'s; each with its bounds.

    Once an hour was split, the tokens before a later hour are known as a range (what an
    hour's coverage leaves on demand, and so paid, is only known event by event), so the
    allowance and tier tests are conservative: an hour is split unless every one of its
    tokens is certainly on the same side of every boundary."""
    expiries = sorted(
        c.expires_at.astimezone(UTC)
        for c in promotions
        if c.expires_at is not None and c.expires_at.astimezone(UTC).timestamp() % 3600
    )
    coverage = coverage or {}
    split: dict[datetime, HourBounds] = {}
    consumed_low = consumed_high = opening.consumed
    paid_low = paid_high = opening.paid_tokens
    for hour in sorted(by_hour):
        instants = tuple(instant for instant in expiries if hour_floor(instant) == hour)
        split_here = bool(instants)
        certain, uncertain = 0, 0  # the hour's tokens on demand for sure, and perhaps
        covered_here: set[int] = set()
        by_deployment: dict[str, list[dict]] = defaultdict(list)
        for row in by_hour[hour]:
            by_deployment[row["deployment"]].append(row)
        for deployment, rows in by_deployment.items():
            tokens = sum(row["input_tokens"] + row["output_tokens"] for row in rows)
            covered = coverage.get((deployment, hour))
            if covered is None:
                certain += tokens
                continue
            covered_here.update(row["deployment_id"] for row in rows)
            if sum(_production(row, covered.w_in) for row in rows) > covered.cap:
                split_here = True  # its capacity runs out inside the hour
                uncertain += tokens
        contract = contracts.at(when=hour)
        is_paid_contract = contract is not None and contract.kind == "paid"
        bounds = HourBounds(
            consumed=(consumed_low, consumed_high),
            paid=(paid_low, paid_high),
            allowance=allowance,
            tiers=tuple(t.from_tokens for t in contract.volume_tiers) if is_paid_contract else (),
            instants=instants,
            tokens=certain + uncertain,
            covered=frozenset(covered_here),
        )
        low, high = certain, certain + uncertain
        if consumed_high + high <= allowance:
            pass  # free, every token of it
        elif consumed_low >= allowance:  # beyond the allowance, every token of it
            if is_paid_contract:
                if any(paid_low < t.from_tokens <= paid_high + high for t in contract.volume_tiers):
                    split_here = True
                paid_low += low
                paid_high += high
        else:
            split_here = True
            if is_paid_contract:
                paid_high += high
        consumed_low += low
        consumed_high += high
        if split_here:
            split[hour] = bounds
    return split


def _production(row: dict, w_in: Decimal) -> Decimal:
    """The ok production of a rollup row (tok, kpis.md section 1)."""
    return production_tokens(
        output_tokens=row["output_tokens"],
        input_tokens=row["input_tokens"],
        cached_tokens=row["cached_tokens"],
        w_in=w_in,
    )


EVENT_FIELDS = (
    "id", "time", "tenant_id", "deployment_id", "service_tier", "project_id", *TOKEN_FIELDS,
    "ttft_ms", "tpot_ms", "requests",
)  # fmt: skip


def _in_cells(cells: Iterable[tuple[int, datetime]]) -> Q:
    """Events of the (tenant id, hour) cells."""
    return reduce(or_, (Q(tenant_id=t, time__gte=h, time__lt=h + HOUR) for t, h in sorted(cells)))


def split_events(
    cells: Mapping[tuple[int, datetime], frozenset[int] | None],
) -> dict[tuple[int, datetime], list[dict]]:
    """The ok events of the given (tenant id, hour) cells on the given deployments (ids;
    None: every one), with their (source, id), in two queries whatever the number of cells."""
    if not cells:
        return {}
    condition = reduce(
        or_,
        (
            _in_cells([cell])
            if deployments is None
            else _in_cells([cell]) & Q(deployment_id__in=sorted(deployments))
            for cell, deployments in sorted(cells.items())
        ),
    )
    events = list(usage_event_list().filter(condition, is_error=False).values(*EVENT_FIELDS))
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


def events_counted(ends: Mapping[tuple[int, datetime], datetime]) -> dict[int, int]:
    """Per tenant, its ok events from the hour to the time (inclusive) of the given (tenant
    id, hour) cells, one cell a tenant: one query."""
    if not ends:
        return {}
    condition = reduce(
        or_,
        (
            Q(tenant_id=tenant_id, time__gte=hour, time__lte=end)
            for (tenant_id, hour), end in sorted(ends.items())
        ),
    )
    first, last = min(hour for _, hour in ends), max(ends.values())
    return dict(
        usage_event_list()
        .filter(condition, time__gte=first, time__lte=last, is_error=False)  # one time range
        .values("tenant_id")
        .annotate(events=Count("id"))
        .values_list("tenant_id", "events")
        .order_by()
    )


BLOCK = 2_000  # events whose keys are read at once


def split_prefixes(
    bounds: Mapping[tuple[int, datetime], HourBounds],
) -> tuple[dict[tuple[int, datetime], list[dict]], dict[tuple[int, datetime], datetime]]:
    """The ok events of the given split (tenant id, hour) cells on deployments no reservation
    covers in them, with their (source, id), each cell's up to the time its bounds are
    settled (HourBounds.settled), and that time per cell settled: its later events on those
    deployments rate as the rollups' rest (hour_items). One query in time order, left once
    every cell is settled; the keys read a block at a time."""
    events: dict[tuple[int, datetime], list[dict]] = defaultdict(list)
    settled: dict[tuple[int, datetime], datetime] = {}
    if not bounds:
        return events, settled
    condition = reduce(
        or_,
        (
            _in_cells([cell]) & ~Q(deployment_id__in=sorted(cell_bounds.covered))
            if cell_bounds.covered
            else _in_cells([cell])
            for cell, cell_bounds in sorted(bounds.items())
        ),
    )
    rows = (
        usage_event_list()
        .filter(condition, is_error=False)
        .order_by("time")
        .values_list(*EVENT_FIELDS)
        .iterator(chunk_size=BLOCK)
    )
    tokens: dict[tuple[int, datetime], int] = defaultdict(int)
    block: list[dict] = []

    def rate_block() -> None:
        keys = {
            pk: (source, event_id)
            for pk, source, event_id in event_key_list(ids=[e["id"] for e in block]).values_list(
                "id", "source", "event_id"
            )
        }
        for event in block:
            event["source"], event["event_id"] = keys[event["id"]]
        block.sort(key=lambda e: (e["time"], e["source"], e["event_id"]))
        touched: set[tuple[int, datetime]] = set()
        for index, event in enumerate(block):
            cell = (event["tenant_id"], hour_floor(event["time"]))
            if cell not in settled:
                events[cell].append(event)
                tokens[cell] += event["input_tokens"] + event["output_tokens"]
                touched.add(cell)
            later = block[index + 1]["time"] if index + 1 < len(block) else None
            if later != event["time"]:  # the end of the events of this time
                for done in touched:
                    if bounds[done].settled(tokens[done], event["time"]):
                        settled[done] = event["time"]
                touched.clear()
        block.clear()

    for values in rows:
        event = dict(zip(EVENT_FIELDS, values, strict=True))
        event["time"] = event["time"].astimezone(UTC)
        if len(block) >= BLOCK and event["time"] != block[-1]["time"]:
            rate_block()
            if len(settled) == len(bounds):
                break
        block.append(event)
    else:
        if block:
            rate_block()
    return events, settled


def _row_totals(row: dict) -> tuple[int, ...]:
    """The row's ok token counts (TOKEN_FIELDS) and ok requests."""
    return (*(row[name] for name in TOKEN_FIELDS), row["requests"] - row["errors"])


def _item(time, row, tokens: Iterable[int], **extra) -> UsageItem:
    return UsageItem(
        time=time,
        model=row["model"],
        pool=row["pool"],
        deployment=row["deployment"],
        service_tier=row["service_tier"],
        project=row["project_id"],
        **dict(zip(TOKEN_FIELDS, tokens, strict=True)),
        **extra,
    )


def row_cell(row: dict) -> tuple[int, str, int]:
    """What a rollup row (or event) is one of in its tenant's hour: (deployment, tier,
    project)."""
    return row["deployment_id"], row["service_tier"], row["project_id"]


def hour_items(
    hour: datetime,
    rows: list[dict],
    events: list[dict],
    *,
    settled: datetime | None = None,
    covered: frozenset[int] = frozenset(),
    before: Mapping[tuple, Sequence[int]] | None = None,
) -> list[UsageItem]:
    """A split hour: its events as items, plus what the rollups hold beyond them: an item a
    row at the hour's start (events not folded yet), or, on a deployment not `covered`,
    just after `settled`, the time up to which its events were read (split_prefixes) or
    rated before (`before`: their sums per row_cell, tokens and requests first:
    HourPrefix.explained)."""
    after = hour if settled is None else min(settled + MICROSECOND, hour + HOUR - MICROSECOND)
    names = {row_cell(row): row for row in rows}
    items = []
    explained: dict[tuple, list[int]] = defaultdict(lambda: [0] * (len(TOKEN_FIELDS) + 1))  # + n
    for cell, sums in (before or {}).items():
        explained[cell] = list(sums[: len(TOKEN_FIELDS) + 1])
    for event in events:
        row = names.get(row_cell(event))
        if row is None:  # not rolled up yet: the caller folds pending events first
            continue
        tokens = tuple(event[name] for name in TOKEN_FIELDS)
        items.append(
            _item(
                event["time"],
                row,
                tokens,
                requests=event["requests"],
                source=event["source"],
                id=event["event_id"],
            )
        )
        sums = explained[row_cell(event)]
        for index, value in enumerate((*tokens, event["requests"])):
            sums[index] += value
    for row in rows:
        rest = [
            max(total - seen, 0)
            for total, seen in zip(_row_totals(row), explained[row_cell(row)], strict=True)
        ]
        input_tokens, cached, written, output_tokens, reasoning, requests = rest
        if input_tokens or output_tokens:
            cached = min(cached, input_tokens)
            written = min(written, input_tokens - cached)
            reasoning = min(reasoning, output_tokens)
            tokens = (input_tokens, cached, written, output_tokens, reasoning)
            rest_at = hour if row["deployment_id"] in covered else after
            items.append(_item(rest_at, row, tokens, requests=requests))
    return items


def row_item(hour: datetime, row: dict) -> UsageItem:
    """A rollup row as one aggregate item of its hour (or day)."""
    *tokens, requests = _row_totals(row)
    return _item(hour, row, tokens, requests=requests)
