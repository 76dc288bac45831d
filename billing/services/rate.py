"""Rate tenants' months from the database: rollups, with event detail where it matters.

Hourly rollups are exact rating items when nothing changes inside the hour: prices and
contracts change on whole hours, so only three things can split an hour — the free
allowance running out, a volume tier being reached, and a promotional credit expiring.
Such hours are rated event by event (kpis.md orders them by time, source, id); every
other hour is one aggregate item per deployment. Rollup tokens that no stored event
explains (demo rollups) stay an aggregate item of their hour.

`month_rate` rates every tenant of a month with a fixed number of queries, whatever the
number of tenants or events; `tenant_month_rate` is the one-tenant view of it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import reduce
from operator import or_

from django.conf import settings
from django.db.models import F, Q

from metering.models import EventKey, HourlyUsage, UsageEvent
from portal.models import Tenant

from ..models import Contract, Invoice, Price, PromotionalCredit, PromotionUse
from ..rating import (
    ContractVersion,
    PriceVersion,
    RatedMonth,
    RatingError,
    UsageItem,
    VolumeTier,
    month_bounds,
    rate_month,
)
from ..rating import PromotionalCredit as CreditIn
from ..rating.books import ContractBook

HOUR = timedelta(hours=1)


def _contract_version(c: Contract) -> ContractVersion:
    return ContractVersion(
        effective_from=c.effective_from,
        kind=c.kind,
        discount_pct=c.discount_pct,
        free_tokens_per_month=c.free_tokens_per_month,
        volume_tiers=tuple(
            VolumeTier(
                from_tokens=int(t["from_tokens"]), discount_pct=Decimal(str(t["discount_pct"]))
            )
            for t in c.volume_tiers
        ),
        committed_minimum=c.committed_minimum,
        currency=c.currency,
    )


def contract_versions(*, tenant: Tenant) -> list[ContractVersion]:
    return [_contract_version(c) for c in Contract.objects.filter(tenant=tenant)]


def price_versions(*, model_slugs=None) -> list[PriceVersion]:
    prices = Price.objects.select_related("model")
    if model_slugs is not None:
        prices = prices.filter(model__slug__in=model_slugs)
    return [
        PriceVersion(
            model=p.model.slug,
            token_class=p.token_class,
            per_million=p.per_million,
            effective_from=p.effective_from,
            currency=p.currency,
        )
        for p in prices
    ]


def _promotions(*, month_start: datetime, tenant_ids=None) -> dict[int, list[CreditIn]]:
    """Credits in effect before the month ends, not expired at its start, less what the
    invoices of earlier months (void ones excepted) consumed; per tenant id."""
    start, end = month_bounds(month_start=month_start)
    credits = PromotionalCredit.objects.filter(effective_from__lt=end).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=start)
    )
    if tenant_ids is not None:
        credits = credits.filter(tenant_id__in=tenant_ids)
    credits = list(credits)
    used: dict[int, Decimal] = defaultdict(Decimal)  # summed here: SQLite sums floats
    for credit_id, amount in (
        PromotionUse.objects.filter(credit__in=credits, invoice__period_start__lt=start)
        .exclude(invoice__status=Invoice.Status.VOID)
        .values_list("credit_id", "amount")
    ):
        used[credit_id] += amount
    available: dict[int, list[CreditIn]] = defaultdict(list)
    for credit in credits:
        left = credit.amount - used[credit.pk]
        if left > 0:
            available[credit.tenant_id].append(
                CreditIn(
                    id=str(credit.pk),
                    amount=left,
                    expires_at=credit.expires_at,
                    description=credit.description,
                    currency=credit.currency,
                )
            )
    return available


def promotions_available(*, tenant: Tenant, month_start: datetime) -> list[CreditIn]:
    return _promotions(month_start=month_start, tenant_ids=[tenant.pk]).get(tenant.pk, [])


def _hourly(start: datetime, end: datetime, tenant_ids) -> dict[int, dict[datetime, list[dict]]]:
    """Rollup rows with ok usage, per tenant id and hour (ok and compliant sums)."""
    rows = HourlyUsage.objects.filter(hour__gte=start, hour__lt=end).filter(
        Q(ok_input_tokens__gt=0) | Q(ok_output_tokens__gt=0)
    )
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=tenant_ids)
    rows = (
        rows.values(
            "hour",
            "tenant_id",
            "deployment_id",
            "requests",
            "errors",
            "compliant_input_tokens",
            "compliant_cached_tokens",
            "compliant_output_tokens",
        )
        .annotate(
            input_tokens=F("ok_input_tokens"),
            cached_tokens=F("ok_cached_tokens"),
            output_tokens=F("ok_output_tokens"),
            model=F("deployment__model__slug"),
            pool=F("deployment__pool__slug"),
            deployment=F("deployment__slug"),
        )
        .order_by("tenant_id", "hour", "deployment_id")
    )
    by_tenant: dict[int, dict[datetime, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        row["hour"] = row["hour"].astimezone(UTC)
        by_tenant[row["tenant_id"]][row["hour"]].append(row)
    return by_tenant


def _split_hours(
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
        c.expires_at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
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


def _events(cells: set[tuple[int, datetime]]) -> dict[tuple[int, datetime], list[dict]]:
    """The ok events of the given (tenant id, hour) cells, with their (source, id), in
    two queries whatever the number of cells."""
    if not cells:
        return {}
    condition = reduce(
        or_, (Q(tenant_id=t, time__gte=h, time__lt=h + HOUR) for t, h in sorted(cells))
    )
    events = list(
        UsageEvent.objects.filter(condition, is_error=False).values(
            "id",
            "time",
            "tenant_id",
            "deployment_id",
            "input_tokens",
            "cached_tokens",
            "output_tokens",
            "ttft_ms",
            "tpot_ms",
        )
    )
    keys = {
        pk: (source, event_id)
        for pk, source, event_id in EventKey.objects.filter(
            id__in=[e["id"] for e in events]
        ).values_list("id", "source", "event_id")
    }
    by_cell: dict[tuple[int, datetime], list[dict]] = defaultdict(list)
    for event in events:
        event["time"] = event["time"].astimezone(UTC)
        event["source"], event["event_id"] = keys[event["id"]]
        hour = event["time"].replace(minute=0, second=0, microsecond=0)
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


def _hour_items(hour: datetime, rows: list[dict], events: list[dict]) -> list[UsageItem]:
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
                requests=1,
                source=event["source"],
                id=event["event_id"],
            )
        )
        sums = explained[event["deployment_id"]]
        for index, value in enumerate((*tokens, 1)):
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


@dataclass
class MonthRating:
    """Every tenant's rating of one UTC month, and the rows it was built from."""

    month_start: datetime
    tenants: dict[int, Tenant]
    rated: dict[int, RatedMonth] = field(default_factory=dict)  # tenant id -> rating
    errors: dict[int, RatingError] = field(default_factory=dict)  # tenant id -> why not
    rows: dict[int, dict[datetime, list[dict]]] = field(default_factory=dict)  # rollup rows
    events: dict[tuple[str, str], dict] = field(default_factory=dict)  # (source, id) -> event


def month_rate(*, month_start: datetime, tenants: Iterable[Tenant] | None = None) -> MonthRating:
    """Rate the month of every tenant with usage in it (or of `tenants`), in a fixed number
    of queries; a tenant that cannot be rated gets its RatingError instead."""
    start, end = month_bounds(month_start=month_start)
    ids = None if tenants is None else [t.pk for t in tenants]
    by_tenant = _hourly(start, end, ids)
    if ids is None:
        ids = list(by_tenant)
    tenant_map = {t.pk: t for t in Tenant.objects.filter(pk__in=ids)}
    contracts: dict[int, list[ContractVersion]] = defaultdict(list)
    for contract in Contract.objects.filter(tenant_id__in=ids):
        contracts[contract.tenant_id].append(_contract_version(contract))
    promotions = _promotions(month_start=start, tenant_ids=ids)
    prices = price_versions()
    split: dict[int, set[datetime]] = {}
    for tenant_id in ids:
        book = ContractBook(contracts[tenant_id])
        opening = book.at(when=start)
        split[tenant_id] = _split_hours(
            by_tenant.get(tenant_id, {}),
            contracts=book,
            allowance=opening.free_tokens_per_month if opening is not None else 0,
            promotions=promotions.get(tenant_id, []),
        )
    events = _events({(t, h) for t, hours in split.items() for h in hours})
    result = MonthRating(month_start=start, tenants=tenant_map, rows=dict(by_tenant))
    for tenant_id in ids:
        items: list[UsageItem] = []
        for hour, rows in by_tenant.get(tenant_id, {}).items():
            if hour in split[tenant_id]:
                hour_events = events.get((tenant_id, hour), [])
                items.extend(_hour_items(hour, rows, hour_events))
                result.events.update(((e["source"], e["event_id"]), e) for e in hour_events)
            else:
                for row in rows:
                    *tokens, requests = _row_totals(row)
                    items.append(_item(hour, row, *tokens, requests=requests))
        try:
            result.rated[tenant_id] = rate_month(
                month_start=start,
                items=items,
                contracts=contracts[tenant_id],
                prices=prices,
                promotions=promotions.get(tenant_id, []),
                currency=settings.FACTORY_CURRENCY,
            )
        except RatingError as error:
            result.errors[tenant_id] = error
    return result


def tenant_month_rate(*, tenant: Tenant, month_start: datetime) -> RatedMonth:
    """Rate one tenant's UTC month as it stands in the rollups (RatingError names a
    missing price)."""
    rating = month_rate(month_start=month_start, tenants=[tenant])
    if tenant.pk in rating.errors:
        raise rating.errors[tenant.pk]
    return rating.rated[tenant.pk]
