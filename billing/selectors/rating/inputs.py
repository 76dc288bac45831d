"""Reads for the billing pages and API: tenant-scoped in one place (portal.access)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Max, Q

from billing.domain.rating.books import ContractBook
from billing.domain.rating.engine import START, rate_month
from billing.domain.rating.hours import HourPrefix
from billing.domain.rating.types import (
    ContractVersion,
    InvoiceLine,
    LineKind,
    PriceVersion,
    PromotionApplication,
    RatedMonth,
    RatingError,
    Running,
    TokenClass,
    UsageItem,
    VolumeTier,
    month_bounds,
)
from billing.domain.rating.types import PromotionalCredit as CreditIn
from billing.domain.reservations import ReservationTerms, coverage_of
from billing.models import (
    Contract,
    CreditNote,
    Invoice,
    Price,
    PromotionalCredit,
    PromotionUse,
    RatedTenantMonth,
    RatingPending,
)
from billing.selectors.rating.items import (
    HourBounds,
    events_counted,
    hour_items,
    hourly_rows,
    row_item,
    split_events,
    split_hours,
    split_prefixes,
)
from billing.selectors.reservations import (
    reservation_terms,
    reserved_versions,
    reserving_tenants,
    tier_multipliers,
)
from metering.domain.usage.fields import STANDARD
from metering.selectors.changes import usage_changes_read
from metering.selectors.factory import deployment_version_list
from portal.closing import month_is_closed
from portal.models import Tenant
from portal.pipeline import RATE
from portal.projects import NONE_ID

ZERO = Decimal(0)
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


def _contracts_by_tenant(ids: list[int]) -> dict[int, list[ContractVersion]]:
    contracts: dict[int, list[ContractVersion]] = defaultdict(list)
    for contract in Contract.objects.filter(tenant_id__in=ids):
        contracts[contract.tenant_id].append(_contract_version(contract))
    return contracts


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
            service_tier=p.service_tier,
        )
        for p in prices
    ]


def _promotions(*, month_start: datetime, tenant_ids=None) -> dict[int, list[CreditIn]]:
    """Per tenant id, the credits the month's rating may apply. A tenant whose month is
    invoiced (void invoices excepted) gets exactly what its invoice applied: re-rated
    with late usage, the month bills that usage without credits, so a credit is never
    spent twice nor past its amount. Otherwise: credits in effect before the month ends,
    not expired at its start, less what live invoices of other months consumed (months
    can be invoiced out of order, and a voided month invoiced again). Once the month's close
    is done, a tenant without a document for it gets none: its late usage bills in full."""
    start, end = month_bounds(month_start=month_start)
    invoices = Invoice.objects.filter(period_start=start, kind=Invoice.Kind.USAGE).exclude(
        status=Invoice.Status.VOID
    )
    credits = PromotionalCredit.objects.filter(effective_from__lt=end).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=start)
    )
    if tenant_ids is not None:
        invoices = invoices.filter(tenant_id__in=tenant_ids)
        credits = credits.filter(tenant_id__in=tenant_ids)
    # A month that netted below zero is billed by the close's credit note instead.
    netted = CreditNote.objects.filter(period_start=start, invoice__isnull=True)
    if tenant_ids is not None:
        netted = netted.filter(tenant_id__in=tenant_ids)
    invoiced = set(invoices.values_list("tenant_id", flat=True))
    invoiced |= set(netted.values_list("tenant_id", flat=True))
    if month_is_closed(start, by_close=True):  # closed: what its documents applied, no more
        invoiced |= {credit.tenant_id for credit in credits}
    available: dict[int, list[CreditIn]] = defaultdict(list)
    for use in PromotionUse.objects.filter(
        Q(invoice__in=invoices) | Q(credit_note__in=netted)
    ).select_related("credit"):
        available[use.credit.tenant_id].append(_credit_in(use.credit, use.amount))
    credits = [credit for credit in credits if credit.tenant_id not in invoiced]
    used: dict[int, Decimal] = defaultdict(Decimal)  # summed here: SQLite sums floats
    for credit_id, amount in (
        PromotionUse.objects.filter(credit__in=credits)
        .filter(Q(invoice__isnull=True) | ~Q(invoice__status=Invoice.Status.VOID))
        .values_list("credit_id", "amount")
    ):
        used[credit_id] += amount
    for credit in credits:
        left = credit.amount - used[credit.pk]
        if left > 0:
            available[credit.tenant_id].append(_credit_in(credit, left))
    return available


def _credit_in(credit: PromotionalCredit, amount: Decimal) -> CreditIn:
    return CreditIn(
        id=str(credit.pk),
        amount=amount,
        expires_at=credit.expires_at,
        description=credit.description,
        currency=credit.currency,
    )


def promotions_available(*, tenant: Tenant, month_start: datetime) -> list[CreditIn]:
    return _promotions(month_start=month_start, tenant_ids=[tenant.pk]).get(tenant.pk, [])


@dataclass
class MonthRating:
    """Every tenant's rating of one UTC month (or of its hours from some hour on), and the
    rows it was built from."""

    month_start: datetime
    tenants: dict[int, Tenant]
    rated: dict[int, RatedMonth] = field(default_factory=dict)  # tenant id -> rating
    errors: dict[int, RatingError] = field(default_factory=dict)  # tenant id -> why not
    rows: dict[int, dict[datetime, list[dict]]] = field(default_factory=dict)  # rollup rows
    events: dict[tuple[str, str], dict] = field(default_factory=dict)  # (source, id) -> event
    promotions: dict[int, list[CreditIn]] = field(default_factory=dict)  # the month may apply
    openings: dict[int, ContractVersion | None] = field(default_factory=dict)  # at its start
    reservations: dict[int, list[ReservationTerms]] = field(default_factory=dict)
    # (tenant id, split hour) -> the time up to which the events of its deployments no
    # reservation covers were rated one by one, and those covered (ids: read whole)
    settled: dict[tuple[int, datetime], tuple[datetime, frozenset[int]]] = field(
        default_factory=dict
    )
    # (tenant id, split hour) -> the state inside it the hour was rated from (month_rate's
    # `prefixes`, those still valid): its events up to the state's time were not read
    resumed: dict[tuple[int, datetime], HourPrefix] = field(default_factory=dict)
    versions: int = 0  # the last deployment version's id (HourPrefix.versions)


def month_rate(
    *,
    month_start: datetime,
    tenants: Iterable[Tenant] | None = None,
    resume: Mapping[int, tuple[datetime, Running]] | None = None,
    settle: bool = True,
    prefixes: Mapping[int, HourPrefix] | None = None,
) -> MonthRating:
    """Rate the month of every tenant with usage or reservations in it (or of `tenants`) hour
    by hour, in a fixed number of queries; a tenant that cannot be rated gets its RatingError instead.
    With `resume` (tenant id -> (hour, the running totals before it), for every tenant
    rated), each tenant's hours from that hour on are rated, before promotions: the rate
    stage applies the month's promotions to what it stores (billing.domain.rating.hours).
    A split hour's events are read up to where its bounds are settled and the rest rated
    from the rollups (billing.selectors.rating.items.split_prefixes); `settle=False` reads
    and rates every one of them, which gives the same figures. `prefixes` (tenant id -> a
    state inside the hour it is rated from, HourPrefix): the hour is rated from that state
    on, its events up to it not read again, where the state still holds (`_resumable`)."""
    start, end = month_bounds(month_start=month_start)
    ids = None if tenants is None else [t.pk for t in tenants]
    since = {pk: hour for pk, (hour, _) in (resume or {}).items()}
    first = min(since.values(), default=start)
    by_tenant = hourly_rows(first, end, ids)
    if ids is None:  # every tenant with usage or reservations in the month
        ids = sorted(set(by_tenant) | reserving_tenants(start=start, end=end))
    for tenant_id, hours in by_tenant.items():
        for hour in [h for h in hours if h < since.get(tenant_id, start)]:
            del hours[hour]
    tenant_map = {t.pk: t for t in Tenant.objects.filter(pk__in=ids)}
    contracts = _contracts_by_tenant(ids)
    promotions = _promotions(month_start=start, tenant_ids=ids)
    prices = price_versions()
    multipliers = tier_multipliers()
    reserved = reservation_terms(tenant_ids=ids, start=start, end=end)
    version_at = reserved_versions() if reserved else None
    split: dict[tuple[int, datetime], HourBounds] = {}
    openings: dict[int, Running] = {pk: running for pk, (_, running) in (resume or {}).items()}
    result = MonthRating(
        month_start=start,
        tenants=tenant_map,
        rows=dict(by_tenant),
        promotions={pk: promotions.get(pk, []) for pk in ids},
        reservations={pk: reserved.get(pk, []) for pk in ids},
    )
    coverage: dict[int, dict] = {}
    for tenant_id in ids:
        book = ContractBook(contracts[tenant_id])
        opening = result.openings[tenant_id] = book.at(when=start)
        hours = by_tenant.get(tenant_id)
        if tenant_id in reserved and version_at is not None and hours:
            # Only the hours with usage look their coverage up: from the first to the last.
            coverage[tenant_id] = coverage_of(
                reserved[tenant_id], version_at=version_at, start=min(hours), end=max(hours) + HOUR
            )
        for hour, bounds in split_hours(
            by_tenant.get(tenant_id, {}),
            contracts=book,
            allowance=opening.free_tokens_per_month if opening is not None else 0,
            promotions=promotions.get(tenant_id, []),
            opening=openings.get(tenant_id, START),
            coverage=coverage.get(tenant_id),
        ).items():
            split[tenant_id, hour] = bounds
    result.versions = deployment_version_list().aggregate(last=Max("pk"))["last"] or 0
    if settle and prefixes:
        result.resumed = _resumable(prefixes, since, split, versions=result.versions)
        for (tenant_id, hour), prefix in result.resumed.items():
            openings[tenant_id] = prefix.state.running
            if tenant_id in coverage:  # spent by then: nothing of the hour's rest is covered
                coverage[tenant_id] = {
                    key: hour_coverage
                    for key, hour_coverage in coverage[tenant_id].items()
                    if key[1] != hour
                }
    # The events of deployments a reservation covers are read whole, the others up to where
    # their hour is settled (or from where it was rated before).
    if not settle:
        events, settled = split_events(dict.fromkeys(split)), {}
    else:
        unread = {cell: b for cell, b in split.items() if cell not in result.resumed}
        events = split_events({cell: b.covered for cell, b in unread.items() if b.covered})
        read, settled = split_prefixes(unread)
        for cell, hour_events in read.items():
            events[cell] = events.get(cell, []) + hour_events
        settled.update((cell, prefix.at) for cell, prefix in result.resumed.items())
    result.settled = {
        cell: (time, frozenset() if cell in result.resumed else split[cell].covered)
        for cell, time in settled.items()
    }
    for tenant_id in ids:
        items = _items(tenant_id, by_tenant.get(tenant_id, {}), split, events, result)
        try:
            result.rated[tenant_id] = rate_month(
                month_start=start,
                items=items,
                contracts=contracts[tenant_id],
                prices=prices,
                promotions=() if resume is not None else promotions.get(tenant_id, []),
                currency=settings.FACTORY_CURRENCY,
                opening=openings.get(tenant_id, START),
                multipliers=multipliers,
                coverage=coverage.get(tenant_id),
                reservations=reserved.get(tenant_id, ()),
            )
        except RatingError as error:
            result.errors[tenant_id] = error
    return result


def _resumable(
    prefixes: Mapping[int, HourPrefix],
    since: Mapping[int, datetime],
    split: Mapping[tuple[int, datetime], HourBounds],
    *,
    versions: int,
) -> dict[tuple[int, datetime], HourPrefix]:
    """The states inside an hour the hour can be rated from: of the first hour rated of its
    tenant, a split hour whose deployments a reservation covers all had their capacity spent
    by the state's time (every later event of theirs on demand), still settled where the
    state stands (its tokens now, more of them, may have brought a tier boundary within
    reach: its on-demand tokens so far count, as the hour's can only be more), no
    deployment version made since (an SLO from the hour's start changes what was compliant),
    and its events up to the state's time as many as it rated (a late event among them
    rates them again)."""
    candidates = {
        (tenant_id, prefix.hour): prefix
        for tenant_id, prefix in prefixes.items()
        if since.get(tenant_id) == prefix.hour
        and prefix.versions == versions
        and (bounds := split.get((tenant_id, prefix.hour))) is not None
        and bounds.covered <= prefix.spent
        and bounds.settled(prefix.tokens, prefix.at)
    }
    counted = events_counted({cell: prefix.at for cell, prefix in candidates.items()})
    return {
        cell: prefix
        for cell, prefix in candidates.items()
        if counted.get(cell[0], 0) == prefix.events
    }


def _items(tenant_id, hours: dict, split: Mapping, events: dict, result: MonthRating) -> list:
    """A tenant's usage items: an hour's rollup rows as they are, or its events where the
    hour is split (an allowance, tier or promotion expiry falls inside it: up to where it is
    settled, or from where it was rated before, the rest from the rows), the events kept in
    `result`."""
    items: list[UsageItem] = []
    for hour, rows in hours.items():
        if (tenant_id, hour) in split:
            hour_events = events.get((tenant_id, hour), [])
            settled, covered = result.settled.get((tenant_id, hour), (None, frozenset()))
            prefix = result.resumed.get((tenant_id, hour))
            items.extend(
                hour_items(
                    hour,
                    rows,
                    hour_events,
                    settled=settled,
                    covered=covered,
                    before=prefix.explained if prefix else None,
                )
            )
            result.events.update(((e["source"], e["event_id"]), e) for e in hour_events)
        else:
            items.extend(row_item(hour, row) for row in rows)
    return items


def tenant_month_rate(*, tenant: Tenant, month_start: datetime) -> RatedMonth:
    """Rate one tenant's UTC month as it stands in the rollups (RatingError names a
    missing price)."""
    rating = month_rate(month_start=month_start, tenants=[tenant])
    if tenant.pk in rating.errors:
        raise rating.errors[tenant.pk]
    return rating.rated[tenant.pk]


@dataclass(frozen=True)
class BilledMonth:
    """A tenant-month's lines and credits applied as its invoice bills them."""

    currency: str
    lines: tuple[InvoiceLine, ...]
    promotions: tuple[PromotionApplication, ...]


def month_billed(*, tenant: Tenant, month_start: datetime) -> RatedMonth | BilledMonth:
    """The tenant's month as an invoice bills it: the lines the rate stage stored with
    rated usage when it is current (nothing for the tenant-month waits in metering's change
    log or billing's queue), else the month rated now (RatingError names what is missing)."""
    start, end = month_bounds(month_start=month_start)
    stored = RatedTenantMonth.objects.filter(tenant=tenant, month_start=start).first()
    waiting = RatingPending.objects.filter(
        Q(tenant=tenant) | Q(tenant__isnull=True), start__lt=end
    ).exists() or any(
        change.tenant_id == tenant.pk and start <= change.start < end
        for change in usage_changes_read(consumer=RATE).entries
    )
    if stored is None or waiting:
        return tenant_month_rate(tenant=tenant, month_start=start)
    if stored.error:
        raise RatingError(stored.error)
    return BilledMonth(
        currency=stored.currency,
        lines=tuple(line_of(line) for line in stored.lines),
        promotions=tuple(
            PromotionApplication(
                credit_id=credit_id,
                applied_amount=Decimal(applied),
                billed_amount=Decimal(billed),
            )
            for credit_id, applied, billed in stored.credits_applied
        ),
    )


def line_row(line: InvoiceLine) -> list:
    """An invoice line as a rated tenant-month keeps it (RatedTenantMonth.lines): a list,
    money and prices as decimal strings."""
    price, hours = line.list_unit_price, line.gpu_hours
    return [
        str(line.kind), line.model, str(line.token_class or ""), str(line.price_class or ""),
        line.quantity, None if price is None else str(price), str(line.list_amount),
        str(line.discount), str(line.amount), str(line.discount_pct), line.description,
        line.service_tier, None if hours is None else str(hours), line.reservation,
    ]  # fmt: skip


def line_of(row: list) -> InvoiceLine:
    """A line as RatedTenantMonth.lines keeps it (line_row), read back (its last three
    fields are absent from the lines stored before service tiers and reservations)."""
    kind, model, token, priced, quantity, price, list_amount, discount, amount, pct, text = row[:11]
    tier, hours, reservation = (*row[11:], "", None, None)[:3]
    return InvoiceLine(
        kind=LineKind(kind),
        model=model,
        token_class=TokenClass(token) if token else None,
        price_class=TokenClass(priced) if priced else None,
        quantity=quantity,
        list_unit_price=None if price is None else Decimal(price),
        list_amount=Decimal(list_amount),
        discount=Decimal(discount),
        amount=Decimal(amount),
        discount_pct=Decimal(pct),
        description=text,
        service_tier=tier,
        gpu_hours=None if hours is None else Decimal(hours),
        reservation=reservation,
    )


def quantities_of(stored: list[list]) -> dict:
    """Stored paid quantities per usage line and project (`quantities_json`) as the rating
    keys them: those stored before service tiers (without a tier and a multiplier) are
    standard ones, those stored before projects the tenant's (none)'s."""
    quantities = {}
    for row in stored:
        if len(row) in (8, 9):  # [model, token, priced, price, c, t, tier from, q, (project)]
            row = [row[0], STANDARD, *row[1:4], None, *row[4:]]
        if len(row) == 10:  # [..., q]: no project
            row = [*row, NONE_ID]
        model, service_tier, token, priced, price, multiplier, c, t, tier_from, q, project = row
        key = (
            model, service_tier, TokenClass(token), TokenClass(priced), Decimal(price),
            None if multiplier is None else Decimal(multiplier),
            (Decimal(c), Decimal(t), tier_from), project,
        )  # fmt: skip
        quantities[key] = q
    return quantities
