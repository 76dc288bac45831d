"""The price book in force: list prices and contracts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, Max, QuerySet

from billing.domain.rating.books import PriceBook as RatingPrices
from billing.domain.rating.types import TokenClass
from billing.models import Contract, Price, PromotionalCredit
from billing.selectors.reservations import tier_multipliers
from metering.domain.usage.fields import SERVICE_TIERS
from portal.access import tenant_scoped
from portal.effective import in_force_by
from portal.models import Tenant
from portal.money import round_half_up
from portal.periods import next_month
from portal.versions import version_in_force, versions_in_force


@dataclass
class PriceBook:
    """What is in force at an instant, and what is scheduled or superseded."""

    at: datetime
    prices: list[dict]  # each: price, state in_force | scheduled | superseded
    contracts: list[dict]
    promotions: list[PromotionalCredit]
    multipliers: list[tuple[str, Decimal]]  # (tier, its multiplier in force), standard aside


def _states(versions, key, at):
    """Mark each effective-dated version in force, scheduled or superseded at `at`."""
    in_force = {k: series.at(at) for k, series in in_force_by(versions, series=key).items()}
    return [
        {
            "version": version,
            "state": "in_force"
            if in_force.get(key(version)) is version
            else ("scheduled" if version.effective_from > at else "superseded"),
        }
        for version in versions
    ]


def price_list() -> QuerySet[Price]:
    """Every price version, by model, token class and start (prices are the factory's,
    not a tenant's)."""
    return Price.objects.select_related("model").order_by(
        "model__slug", "token_class", "effective_from"
    )


def contract_list(*, user) -> QuerySet[Contract]:
    """The contract versions of the tenants the user may see."""
    return tenant_scoped(Contract.objects.select_related("tenant"), user=user)


def promotion_list(*, user) -> QuerySet[PromotionalCredit]:
    """The promotional credits of the tenants the user may see."""
    return tenant_scoped(PromotionalCredit.objects.select_related("tenant"), user=user)


def price_book_get(*, at: datetime, user) -> PriceBook:
    tiers = RatingPrices((), tier_multipliers())
    prices = list(price_list())
    contracts = list(contract_list(user=user))
    return PriceBook(
        at=at,
        prices=_states(prices, lambda p: (p.model_id, p.token_class, p.service_tier), at),
        contracts=_states(contracts, lambda c: c.tenant_id, at),
        promotions=list(promotion_list(user=user)),
        multipliers=[(tier, tiers.multiplier(tier=tier, when=at)) for tier in SERVICE_TIERS[1:]],
    )


def pricing_digest() -> tuple:
    """What every rating reads from pricing, as counts and last ids of the price, contract
    and promotion versions: it changes whenever a version is added or deleted (versions are
    never edited), so a reader can tell that a stored rating may be out of date."""
    return tuple(
        tuple(model.objects.aggregate(n=Count("id"), last=Max("id")).values())
        for model in (Price, Contract, PromotionalCredit)
    )


def _tenant_of(contract: Contract) -> int:
    return contract.tenant_id


def month_contracts(*, tenant_ids: list[int], month_start: datetime) -> dict[int, Contract]:
    """The contract whose SLA applies to each tenant's month: the one in force at the
    month's start, else the first that starts in it; tenants with neither are absent. One
    query however many tenants."""
    contracts = Contract.objects.filter(
        tenant_id__in=tenant_ids, effective_from__lt=next_month(month_start)
    )
    return {
        tenant_id: series.at(month_start) or next(iter(series))
        for tenant_id, series in in_force_by(contracts, series=_tenant_of).items()
    }


def contract_slo_targets(tenant_ids: list[int], at: datetime) -> dict[int, Decimal]:
    """The SLO target of each tenant's contract in force at `at`, where it sets one
    (kpis.md 3c: a tenant's burn rule falls back to it)."""
    contracts = Contract.objects.filter(tenant_id__in=tenant_ids)
    return {
        tenant_id: contract.slo_target
        for tenant_id, contract in versions_in_force(contracts, at=at, series=_tenant_of).items()
        if contract.slo_target is not None
    }


def contract_in_force(*, tenant: Tenant, when: datetime) -> Contract | None:
    return version_in_force(Contract.objects.filter(tenant=tenant), at=when)


def prices_in_force(*, at: datetime) -> list[Price]:
    """The list price of every model and token class in force at `at`, by model and the
    classes' invoice order."""
    versions = Price.objects.filter(effective_from__lte=at).select_related("model")
    prices = versions_in_force(versions, at=at, series=lambda p: (p.model_id, p.token_class))
    order = {token_class: n for n, token_class in enumerate(TokenClass)}
    return sorted(prices.values(), key=lambda p: (p.model.slug, order[p.token_class]))


@dataclass(frozen=True)
class TenantPrice:
    """A list price in force and what it is for one tenant after its contract's discount
    (before volume tiers, which depend on the month's volume)."""

    price: Price
    contract_pct: Decimal

    @property
    def words(self) -> str:
        return TokenClass(self.price.token_class).words

    @property
    def per_million(self) -> Decimal:
        exact = self.price.per_million * (100 - self.contract_pct) / 100
        return round_half_up(amount=exact, quantum=Decimal("0.000001")).normalize()


def tenant_prices(*, contract: Contract | None, at: datetime) -> list[TenantPrice]:
    """Every list price in force at `at`, with the contract's discount (none without one)."""
    pct = contract.discount_pct if contract and contract.kind == Contract.Kind.PAID else Decimal(0)
    return [TenantPrice(price=price, contract_pct=pct) for price in prices_in_force(at=at)]
