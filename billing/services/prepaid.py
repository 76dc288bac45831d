"""Prepaid balances (kpis.md "Credit notes, balances and receivables"): a purchase at face
value, invoiced at once on its own `purchase` invoice and booked as deferred revenue; drawn
by the month-end closes (billing.services.invoices, a `prepaid` line); the unused rest is
breakage revenue on its expiry day, booked by the close of that month after its draw."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction

from billing.domain.rating.types import LineKind
from billing.models import Invoice, InvoiceLine, LedgerTransaction, PrepaidBalance, PrepaidBreakage
from billing.selectors.balances import prepaid_remaining
from billing.services.invoices.issue import invoice_finalize
from billing.services.ledger import Leg, account_deferred_revenue, account_named, ledger_post
from portal import clock
from portal.closing import month_closed_check
from portal.errors import FieldError
from portal.formatting import money_text
from portal.models import Tenant
from portal.money import currency_places, money_parse
from portal.periods import day_floor, next_month
from portal.services import audit_record


def _day(value: datetime, field: str) -> datetime:
    value = value.astimezone(UTC)
    if value != day_floor(value):
        raise FieldError(field, "must be a whole UTC day (00:00:00Z)")
    return value


@transaction.atomic
def prepaid_purchase(
    *,
    tenant: Tenant,
    amount,
    expires_at: datetime,
    starts_at: datetime | None = None,
    currency: str | None = None,
    by=None,
    now: datetime | None = None,
) -> PrepaidBalance:
    """A prepaid purchase of `amount` (face value), usable from the day `starts_at` (default
    today; not in a closed month) through the day `expires_at` (after it), in the ledger's
    currency (another `currency` is refused): its purchase
    invoice issued at once, dated its issue day, booking deferred revenue only."""
    now = now or clock.now()
    if currency is not None and currency != settings.FACTORY_CURRENCY:
        raise FieldError(
            "currency", f"the ledger is kept in {settings.FACTORY_CURRENCY}: buy in it"
        )
    currency = settings.FACTORY_CURRENCY
    amount = money_parse(amount, field="amount", places=currency_places(currency), positive=True)
    starts_at = _day(starts_at, "starts_at") if starts_at else day_floor(now)
    month_closed_check(moment=starts_at, field="starts_at")
    expires_at = _day(expires_at, "expires_at")
    if expires_at <= starts_at:
        raise FieldError("expires_at", "must be a day after starts_at")
    day = day_floor(now)
    invoice = Invoice.objects.create(
        tenant=tenant,
        kind=Invoice.Kind.PURCHASE,
        period_start=day,
        period_end=day + timedelta(days=1),
        currency=currency,
        total=amount,
    )
    InvoiceLine.objects.create(
        invoice=invoice,
        position=1,
        kind=LineKind.PURCHASE,
        list_amount=amount,
        discount=Decimal(0),
        amount=amount,
        description=(
            f"Prepaid balance of {money_text(amount=amount, currency=currency)}, usable "
            f"{starts_at:%-d %b %Y} through {expires_at:%-d %b %Y} (UTC)"
        ),
        for_month=day,
    )
    balance = PrepaidBalance.objects.create(
        tenant=tenant,
        amount=amount,
        currency=currency,
        starts_at=starts_at,
        expires_at=expires_at,
        invoice=invoice,
        created_by=by,
    )
    balance.invoice = invoice_finalize(invoice=invoice, by=by, now=now)
    audit_record(
        actor=by, action="prepaid.purchase", object_type="prepaid", object_id=str(balance.pk),
        after={"tenant": tenant.slug, "amount": str(amount), "expires_at": expires_at.isoformat()},
    )  # fmt: skip
    return balance


def prepaid_breakage_book(*, month_start: datetime, by=None) -> list[PrepaidBreakage]:
    """The close of a month books the unused rest of every balance expiring in it as
    breakage revenue on its expiry day, once (after the month's invoices drew it)."""
    booked = []
    expiring = PrepaidBalance.objects.filter(
        expires_at__gte=month_start,
        expires_at__lt=next_month(month_start),
        breakage__isnull=True,
        invoice__status__in=(Invoice.Status.ISSUED, Invoice.Status.PAID),
    ).select_related("tenant")
    for balance in expiring:
        left = prepaid_remaining(balance)
        if left <= 0:
            continue
        with transaction.atomic():
            entry = ledger_post(
                kind=LedgerTransaction.Kind.BREAKAGE,
                memo=f"Breakage of prepaid balance #{balance.pk}, {balance.tenant.name}, "
                f"expired {balance.expires_at:%Y-%m-%d}",
                legs=[
                    Leg(account_deferred_revenue(tenant=balance.tenant), left),
                    Leg(account_named("revenue:breakage"), -left),
                ],
                currency=balance.currency,
                tenant=balance.tenant,
                period_start=month_start,
                occurred_at=balance.expires_at,
                accounting_date=balance.expires_at.date(),
                idempotency_key=f"prepaid-breakage:{balance.pk}",
                by=by,
                by_close=True,
            )
            booked.append(
                PrepaidBreakage.objects.create(balance=balance, amount=left, transaction=entry)
            )
    return booked
