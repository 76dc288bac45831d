"""Price book, contracts and promotional credits: effective-dated, create-only once in force."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Model

from billing.models import Contract, Price, PromotionalCredit
from billing.services.rating import rating_queue
from metering.domain.usage.fields import SERVICE_TIERS, STANDARD
from portal.closing import version_closed_check
from portal.errors import FieldError
from portal.models import Tenant
from portal.money import CURRENCY_EXPONENTS
from portal.services import audit_object
from portal.versions import effective_from_check, version_create


def _check_currency(currency: str) -> None:
    """Prices, contracts and promotions are in the ledger's one currency (kpis.md: money is in
    FACTORY_CURRENCY); another, known or not, is refused naming `currency`."""
    if currency not in CURRENCY_EXPONENTS:
        raise FieldError("currency", f"unknown currency {currency!r}")
    if currency != settings.FACTORY_CURRENCY:
        raise FieldError(
            "currency",
            f"must be {settings.FACTORY_CURRENCY}, the ledger's currency (FACTORY_CURRENCY)",
        )


@transaction.atomic
def price_create(
    *,
    model: Model,  # a metering ServedModel
    token_class: str,
    per_million: Decimal,
    currency: str,
    effective_from: datetime,
    service_tier: str = STANDARD,
    by=None,
) -> Price:
    """Add a list price version of a model's token class in a service tier (standard by
    default: a tier without a price of its own takes the standard one's times its
    multiplier); an existing version at the same instant is a conflict."""
    _check_currency(currency)
    effective_from_check(effective_from)
    if per_million < 0:
        raise FieldError("per_million", "must not be negative")
    if service_tier not in SERVICE_TIERS:
        raise FieldError("tier", f"must be one of {', '.join(SERVICE_TIERS)}")
    rating_queue(start=effective_from)  # every tenant's usage from then on
    tier = "" if service_tier == STANDARD else f" {service_tier}"
    return version_create(
        Price(
            model=model,
            token_class=token_class,
            per_million=per_million,
            currency=currency,
            effective_from=effective_from,
            service_tier=service_tier,
        ),
        series={"model": model, "token_class": token_class, "service_tier": service_tier},
        conflict=f"{model.slug}{tier} {token_class} already has a price from that instant",
        by=by,
    )


def _tiers(volume_tiers: list[dict]) -> list[dict]:
    tiers = []
    for index, tier in enumerate(volume_tiers):
        try:
            from_tokens = int(tier["from_tokens"])
            pct = Decimal(str(tier["discount_pct"]))
        except (KeyError, TypeError, ValueError, ArithmeticError):
            raise FieldError(
                f"volume_tiers[{index}]", "needs from_tokens (integer) and discount_pct (number)"
            ) from None
        if from_tokens < 0 or not 0 <= pct <= 100:
            raise FieldError(
                f"volume_tiers[{index}]", "from_tokens ≥ 0 and discount_pct in [0, 100]"
            )
        tiers.append({"from_tokens": from_tokens, "discount_pct": str(pct)})
    if len({t["from_tokens"] for t in tiers}) != len(tiers):
        raise FieldError("volume_tiers", "two tiers start at the same token count")
    return sorted(tiers, key=lambda t: t["from_tokens"])


def _credit_tiers(credit_tiers: list) -> list[list[str]]:
    tiers = []
    for index, tier in enumerate(credit_tiers):
        try:
            below, pct = (Decimal(str(value)) for value in tier)
        except (TypeError, ValueError, ArithmeticError):
            raise FieldError(
                f"credit_tiers[{index}]", "must be [uptime below, percent], e.g. [0.999, 10]"
            ) from None
        if not (0 < below <= 1 and 0 <= pct <= 100):
            raise FieldError(f"credit_tiers[{index}]", "uptime in (0, 1], percent in [0, 100]")
        tiers.append([str(below), str(pct)])
    return sorted(tiers, key=lambda t: Decimal(t[0]), reverse=True)


@transaction.atomic
def contract_create(
    *,
    tenant: Tenant,
    kind: str,
    effective_from: datetime,
    currency: str,
    discount_pct: Decimal = Decimal(0),
    free_tokens_per_month: int = 0,
    volume_tiers: list[dict] | None = None,
    committed_minimum: Decimal = Decimal(0),
    credit_tiers: list | None = None,
    payment_terms_days: int = 30,
    slo_target: Decimal | None = None,
    by=None,
) -> Contract:
    """Add a contract version for a tenant, in force from effective_from."""
    _check_currency(currency)
    effective_from_check(effective_from)
    if kind not in Contract.Kind.values:
        raise FieldError("kind", f"must be one of {', '.join(Contract.Kind.values)}")
    if not 0 <= discount_pct <= 100:
        raise FieldError("discount_pct", "must be between 0 and 100")
    if free_tokens_per_month < 0:
        raise FieldError("free_tokens_per_month", "must not be negative")
    if committed_minimum < 0:
        raise FieldError("committed_minimum", "must not be negative")
    if not 0 <= payment_terms_days <= 365:
        raise FieldError("payment_terms_days", "must be between 0 and 365 days")
    if slo_target is not None and not 0 < slo_target < 1:
        raise FieldError("slo_target", "must be between 0 and 1, such as 0.995")
    contract = Contract(
        tenant=tenant,
        kind=kind,
        discount_pct=discount_pct,
        free_tokens_per_month=free_tokens_per_month,
        volume_tiers=_tiers(volume_tiers or []),
        committed_minimum=committed_minimum,
        currency=currency,
        payment_terms_days=payment_terms_days,
        slo_target=slo_target,
        effective_from=effective_from,
    )
    if credit_tiers is not None:
        contract.credit_tiers = _credit_tiers(credit_tiers)
    rating_queue(tenant=tenant, start=effective_from)
    return version_create(
        contract,
        series={"tenant": tenant},
        conflict=f"{tenant.slug} already has a contract from then",
        by=by,
    )


@transaction.atomic
def promotion_grant(
    *,
    tenant: Tenant,
    amount: Decimal,
    currency: str,
    effective_from: datetime,
    expires_at: datetime | None = None,
    description: str = "",
    by=None,
) -> PromotionalCredit:
    """Grant a promotional credit; it pays for paid usage before cash until it expires. It
    may not take effect before the end of the last closed month (its invoices are issued)."""
    _check_currency(currency)
    version_closed_check(moment=effective_from, field="effective_from")
    if amount <= 0:
        raise FieldError("amount", "must be positive")
    if expires_at is not None and expires_at <= effective_from:
        raise FieldError("expires_at", "must be after effective_from")
    credit = PromotionalCredit.objects.create(
        tenant=tenant,
        amount=amount,
        currency=currency,
        effective_from=effective_from,
        expires_at=expires_at,
        description=description,
    )
    audit_object(
        obj=credit,
        actor=by,
        action=f"{PromotionalCredit.audit_type}.grant",
        object_type=PromotionalCredit.audit_type,
    )
    rating_queue(tenant=tenant, start=effective_from, hours=False)
    return credit
