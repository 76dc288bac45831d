"""Demo billing: list prices from demo-factory.md, a contract per tenant, promotions, and the
invoices of the last complete month in the data (paid where it is old enough)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TextIO

from django.conf import settings

from billing.models import Contract, Invoice, Price, PromotionalCredit
from billing.services.invoices import invoice_pay, invoice_run
from billing.services.pricing import contract_create, price_create, promotion_grant
from metering.selectors.factory import served_model_get
from metering.selectors.usage import hourly_usage_list
from portal import clock
from portal.demo import DEMO_TENANTS, demo_step
from portal.models import Tenant
from portal.periods import month_start

PRICES_FROM = datetime(2026, 1, 1, tzinfo=UTC)
# Per million tokens: input / cached input / output (demo-factory.md, published price lists).
LIST_PRICES = {
    "llama-3.3-70b": ("0.88", "0.44", "0.88"),
    "qwen3-235b-a22b": ("0.35", "0.175", "1.40"),
    "deepseek-r1": ("0.55", "0.14", "2.19"),
}
B = 1_000_000_000
# Negotiated terms of the paid tenants: discount %, free tokens a month, volume tiers.
# Large accounts buy at deep discounts (the factory is weak at selling: ρ near 0.70).
PAID_TERMS = {
    "acme": (Decimal(40), 0, [{"from_tokens": 2000 * B, "discount_pct": "10"}]),
    "initech": (Decimal(35), 0, [{"from_tokens": 1000 * B, "discount_pct": "5"}]),
    "umbrella": (Decimal(35), 0, []),
    "stark": (Decimal(30), 0, []),
    "wayne": (Decimal(25), 100 * B, []),
    "hooli": (Decimal(25), 100 * B, []),
    "piedpiper": (Decimal(20), 100 * B, []),
    "soylent": (Decimal(15), 100 * B, []),
    "tyrell": (Decimal(15), 100 * B, []),
}
DEFAULT_PAID = (Decimal(0), 100 * B, [])
CONTRACTS_FROM = datetime(2026, 1, 1, tzinfo=UTC)


@demo_step("billing: price book, contracts, promotions, last month's invoices")
def demo_billing(*, stdout: TextIO) -> None:
    currency = settings.FACTORY_CURRENCY
    for slug, prices in LIST_PRICES.items():
        model = served_model_get(slug=slug)
        if model is None or Price.objects.filter(model=model).exists():
            continue
        for token_class, per_million in zip(
            ("input", "cached_input", "output"), prices, strict=True
        ):
            price_create(
                model=model,
                token_class=token_class,
                per_million=Decimal(per_million),
                currency=currency,
                effective_from=PRICES_FROM,
            )
    for _name, slug, kind in DEMO_TENANTS:
        tenant = Tenant.objects.get(slug=slug)
        if Contract.objects.filter(tenant=tenant).exists():
            continue
        discount, free, tiers = PAID_TERMS.get(slug, DEFAULT_PAID) if kind == "paid" else (0, 0, [])
        contract_create(
            tenant=tenant,
            kind=kind,
            discount_pct=Decimal(discount),
            free_tokens_per_month=free,
            volume_tiers=tiers,
            currency=currency,
            effective_from=CONTRACTS_FROM,
        )
    now = clock.now()
    this_month = month_start(now)
    if not PromotionalCredit.objects.exists():
        promotion_grant(
            tenant=Tenant.objects.get(slug="dunder"),
            amount=Decimal("2500.00"),
            currency=currency,
            effective_from=CONTRACTS_FROM,
            expires_at=this_month + timedelta(days=90),
            description="Startup programme credit",
        )
    _invoice_last_month(now=now, stdout=stdout)


def _invoice_last_month(*, now, stdout: TextIO) -> None:
    """Invoice the month before this one when the demo data reaches into it."""
    last_month = month_start(month_start(now) - timedelta(days=1))
    if not hourly_usage_list(start=last_month, end=month_start(now)).exists():
        return
    run = invoice_run(month_start=last_month)
    for invoice in run.issued[::2]:  # every other tenant has paid already
        invoice_pay(invoice=invoice)
    issued = Invoice.objects.filter(period_start=last_month).count()
    stdout.write(f"  {issued} invoices for {last_month:%Y-%m}\n")
    for slug, message in run.errors.items():
        stdout.write(f"  {slug}: not invoiced: {message}\n")
