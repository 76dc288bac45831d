"""Rollup rows and events as rating items: hourly rows, and the hours the allowance, a
volume tier, a credit's expiry or a reservation's capacity splits (rated event by event, in
kpis.md's order: time, source, id)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import reduce
from operator import or_

from django.db.models import F, Q

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


def split_hours(
    by_hour: dict[datetime, list[dict]],
    *,
    contracts: ContractBook,
    allowance: int,
    promotions: list[CreditIn],
    opening: Running = START,
    coverage: Mapping[tuple[str, datetime], Coverage] | None = None,
) -> set[datetime]:
    """Hours inside which the allowance runs out, a tier is reached, a credit expires or a
    deployment's usage crosses its reservations' capacity (kpis.md 3d), the running totals
    before the first hour being `opening`'s.

    Once an hour was split, the tokens before a later hour are known as a range (what an
    hour's coverage leaves on demand, and so paid, is only known event by event), so the
    allowance and tier tests are conservative: an hour is split unless every one of its
    tokens is certainly on the same side of every boundary."""
    split = {
        hour_floor(c.expires_at)
        for c in promotions
        if c.expires_at is not None and c.expires_at.astimezone(UTC).timestamp() % 3600
    }
    coverage = coverage or {}
    consumed_low = consumed_high = opening.consumed
    paid_low = paid_high = opening.paid_tokens
    for hour in sorted(by_hour):
        certain, uncertain = 0, 0  # the hour's tokens on demand for sure, and perhaps
        by_deployment: dict[str, list[dict]] = defaultdict(list)
        for row in by_hour[hour]:
            by_deployment[row["deployment"]].append(row)
        for deployment, rows in by_deployment.items():
            tokens = sum(row["input_tokens"] + row["output_tokens"] for row in rows)
            covered = coverage.get((deployment, hour))
            if covered is None:
                certain += tokens
            elif sum(_production(row, covered.w_in) for row in rows) > covered.cap:
                split.add(hour)  # its capacity runs out inside the hour
                uncertain += tokens
        contract = contracts.at(when=hour)
        is_paid_contract = contract is not None and contract.kind == "paid"
        low, high = certain, certain + uncertain
        if consumed_high + high <= allowance:
            pass  # free, every token of it
        elif consumed_low >= allowance:  # beyond the allowance, every token of it
            if is_paid_contract:
                if any(paid_low < t.from_tokens <= paid_high + high for t in contract.volume_tiers):
                    split.add(hour)
                paid_low += low
                paid_high += high
        else:
            split.add(hour)
            if is_paid_contract:
                paid_high += high
        consumed_low += low
        consumed_high += high
    return split


def _production(row: dict, w_in: Decimal) -> Decimal:
    """The ok production of a rollup row (tok, kpis.md section 1)."""
    return production_tokens(
        output_tokens=row["output_tokens"],
        input_tokens=row["input_tokens"],
        cached_tokens=row["cached_tokens"],
        w_in=w_in,
    )


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
            "service_tier",
            "project_id",
            *TOKEN_FIELDS,
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


def hour_items(hour: datetime, rows: list[dict], events: list[dict]) -> list[UsageItem]:
    """A split hour: its events as items, plus what the rollups hold beyond them."""
    names = {row_cell(row): row for row in rows}
    items = []
    explained: dict[tuple, list[int]] = defaultdict(lambda: [0] * (len(TOKEN_FIELDS) + 1))  # + n
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
            items.append(_item(hour, row, tokens, requests=requests))
    return items


def row_item(hour: datetime, row: dict) -> UsageItem:
    """A rollup row as one aggregate item of its hour (or day)."""
    *tokens, requests = _row_totals(row)
    return _item(hour, row, tokens, requests=requests)
