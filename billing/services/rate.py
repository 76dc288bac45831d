"""Rate a tenant's month from the database: rollups, with event detail where it matters.

Hourly rollups are exact rating items when nothing changes inside the hour: prices and
contracts change on whole hours, so only three things can split an hour — the free
allowance running out, a volume tier being reached, and a promotional credit expiring.
Such hours are rated event by event (kpis.md orders them by time, source, id); every
other hour is one aggregate item per deployment. Rollup tokens that no stored event
explains (demo rollups) stay an aggregate item of their hour.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import F, Q

from metering.models import EventKey, HourlyUsage, UsageEvent
from portal.models import Tenant

from ..models import Contract, Invoice, Price, PromotionalCredit, PromotionUse
from ..rating import (
    ContractVersion,
    PriceVersion,
    RatedMonth,
    UsageItem,
    VolumeTier,
    month_bounds,
    rate_month,
)
from ..rating import (
    PromotionalCredit as CreditIn,
)
from ..rating.books import ContractBook

HOUR = timedelta(hours=1)


def contract_versions(*, tenant: Tenant) -> list[ContractVersion]:
    return [
        ContractVersion(
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
        for c in Contract.objects.filter(tenant=tenant)
    ]


def price_versions(*, model_slugs) -> list[PriceVersion]:
    return [
        PriceVersion(
            model=p.model.slug,
            token_class=p.token_class,
            per_million=p.per_million,
            effective_from=p.effective_from,
            currency=p.currency,
        )
        for p in Price.objects.filter(model__slug__in=model_slugs).select_related("model")
    ]


def promotions_available(*, tenant: Tenant, month_start: datetime) -> list[CreditIn]:
    """Credits in effect before the month ends, not expired at its start, less what the
    invoices of earlier months (void ones excepted) consumed."""
    start, end = month_bounds(month_start=month_start)
    credits = PromotionalCredit.objects.filter(tenant=tenant, effective_from__lt=end).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=start)
    )
    used: dict[int, Decimal] = defaultdict(Decimal)  # summed here: SQLite sums floats
    for credit_id, amount in (
        PromotionUse.objects.filter(credit__in=credits, invoice__period_start__lt=start)
        .exclude(invoice__status=Invoice.Status.VOID)
        .values_list("credit_id", "amount")
    ):
        used[credit_id] += amount
    available = []
    for credit in credits:
        left = credit.amount - used.get(credit.pk, Decimal(0))
        if left > 0:
            available.append(
                CreditIn(
                    id=str(credit.pk),
                    amount=left,
                    expires_at=credit.expires_at,
                    description=credit.description,
                    currency=credit.currency,
                )
            )
    return available


def _hourly(tenant: Tenant, start: datetime, end: datetime) -> dict[datetime, list[dict]]:
    rows = (
        HourlyUsage.objects.filter(tenant=tenant, hour__gte=start, hour__lt=end)
        .filter(Q(ok_input_tokens__gt=0) | Q(ok_output_tokens__gt=0))
        .values("hour", "deployment_id", "requests", "errors")
        .annotate(
            input_tokens=F("ok_input_tokens"),
            cached_tokens=F("ok_cached_tokens"),
            output_tokens=F("ok_output_tokens"),
            model=F("deployment__model__slug"),
            pool=F("deployment__pool__slug"),
            deployment=F("deployment__slug"),
        )
        .order_by("hour", "deployment_id")
    )
    by_hour: dict[datetime, list[dict]] = defaultdict(list)
    for row in rows:
        by_hour[row["hour"].astimezone(UTC)].append(row)
    return by_hour


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


def _events_of_hour(tenant: Tenant, hour: datetime, rows: list[dict]) -> list[UsageItem]:
    """The hour's ok events as items, plus what the rollups hold beyond them."""
    names = {row["deployment_id"]: row for row in rows}
    events = list(
        UsageEvent.objects.filter(
            tenant=tenant, time__gte=hour, time__lt=hour + HOUR, is_error=False
        ).values("id", "time", "deployment_id", "input_tokens", "cached_tokens", "output_tokens")
    )
    keys = {
        pk: (source, event_id)
        for pk, source, event_id in EventKey.objects.filter(
            id__in=[e["id"] for e in events]
        ).values_list("id", "source", "event_id")
    }
    items = []
    explained: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # in, cached, out, n
    for event in events:
        row = names.get(event["deployment_id"])
        if row is None:  # not rolled up yet: the caller folds pending events first
            continue
        source, event_id = keys[event["id"]]
        tokens = (event["input_tokens"], event["cached_tokens"], event["output_tokens"])
        items.append(_item(event["time"], row, *tokens, requests=1, source=source, id=event_id))
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


def usage_items(*, tenant: Tenant, month_start: datetime, contracts, promotions) -> list[UsageItem]:
    """The month's ok usage of a tenant as rating items (see the module docstring)."""
    start, end = month_bounds(month_start=month_start)
    by_hour = _hourly(tenant, start, end)
    book = ContractBook(contracts)
    opening = book.at(when=start)
    allowance = opening.free_tokens_per_month if opening is not None else 0
    split = _split_hours(by_hour, contracts=book, allowance=allowance, promotions=promotions)
    items = []
    for hour, rows in by_hour.items():
        if hour in split:
            items.extend(_events_of_hour(tenant, hour, rows))
        else:
            for row in rows:
                *tokens, requests = _row_totals(row)
                items.append(_item(hour, row, *tokens, requests=requests))
    return items


def tenant_month_rate(*, tenant: Tenant, month_start: datetime) -> RatedMonth:
    """Rate one tenant's UTC month as it stands in the rollups (RatingError names a
    missing price)."""
    contracts = contract_versions(tenant=tenant)
    promotions = promotions_available(tenant=tenant, month_start=month_start)
    items = usage_items(
        tenant=tenant, month_start=month_start, contracts=contracts, promotions=promotions
    )
    return rate_month(
        month_start=month_start,
        items=items,
        contracts=contracts,
        prices=price_versions(model_slugs={item.model for item in items}),
        promotions=promotions,
        currency=settings.FACTORY_CURRENCY,
    )
