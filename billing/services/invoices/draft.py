"""Drafting a tenant's invoice for a month: what the month bills now (billing.selectors.invoices:
the rating, late-usage adjustments, SLA credits waiting), then its credit balance and
prepaid balances drawn; a draft left by an earlier run is drafted again if that changed.
The month-end close (billing.services.close) drafts one per tenant."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db import transaction

from billing.domain.invoices import invoice_total
from billing.domain.rating.types import InvoiceLine as LineIn
from billing.domain.rating.types import LineKind, month_bounds
from billing.models import (
    Invoice,
    InvoiceLine,
    PrepaidDraw,
    PromotionUse,
    SlaCredit,
)
from billing.selectors.balances import credit_balance, prepaid_usable
from billing.selectors.invoices import MonthLines, month_lines
from portal import clock
from portal.formatting import money_text
from portal.models import Tenant
from portal.money import round_money

BALANCE_KINDS = (LineKind.CREDIT, LineKind.PREPAID)  # how an amount due is paid, not what


def _balance_line(*, tenant: Tenant, total: Decimal, currency: str) -> LineIn | None:
    """The `credit` line drawing the tenant's credit balance, up to the amount due."""
    drawn = min(credit_balance(tenant=tenant), total)
    if drawn <= 0:
        return None
    zero = round_money(amount=Decimal(0), currency=currency)
    return LineIn(
        kind=LineKind.CREDIT,
        list_amount=zero,
        discount=drawn,
        amount=-drawn,
        description=f"Drawn from the credit balance ({money_text(amount=drawn, currency=currency)})",
    )


def _is_current(draft: Invoice, billed: MonthLines) -> bool:
    """Whether a draft still bills what the month bills now (its balance lines aside)."""
    kept = [
        (line.kind, line.model, line.token_class, line.quantity, line.amount, line.for_month)
        for line in draft.lines.exclude(kind__in=BALANCE_KINDS).order_by("position")
    ]
    now = [
        (str(line.kind), line.model or "", str(line.token_class or ""), line.quantity,
         line.amount, for_month)
        for line, for_month in billed.lines
    ]  # fmt: skip
    return kept == now


@transaction.atomic
def invoice_draft(*, tenant: Tenant, month_start: datetime) -> tuple[Invoice | None, bool]:
    """The tenant's invoice for the month as a draft: (invoice, created). Returns the live
    invoice when one exists; a draft left by an earlier run is discarded (voided, unnumbered)
    and drafted again when what the month bills has changed since. (None, False) when
    nothing is due or the month nets below zero (the close credits it instead). RatingError
    propagates."""
    start, end = month_bounds(month_start=month_start)
    invoice = (
        Invoice.objects.select_for_update()
        .filter(tenant=tenant, period_start=start, kind=Invoice.Kind.USAGE)
        .exclude(status=Invoice.Status.VOID)
        .first()
    )
    if invoice and invoice.status != Invoice.Status.DRAFT:
        return invoice, False
    billed = month_lines(tenant=tenant, month_start=start, draft=invoice)
    if invoice:
        if _is_current(invoice, billed):
            return invoice, False
        invoice.status, invoice.voided_at = Invoice.Status.VOID, clock.now()
        invoice.save(update_fields=["status", "voided_at"])
        SlaCredit.objects.filter(invoice=invoice).update(invoice=None)
    if billed.is_empty or billed.total < 0:
        return None, False
    lines = list(billed.lines)
    if balance := _balance_line(tenant=tenant, total=billed.total, currency=billed.currency):
        lines.append((balance, start))
    due = invoice_total(lines=[line for line, _ in lines])
    prepaid, draws = _prepaid_line(
        tenant=tenant, month_start=start, due=due, currency=billed.currency
    )
    if prepaid:
        lines.append((prepaid, start))
    invoice = Invoice.objects.create(
        tenant=tenant,
        period_start=start,
        period_end=end,
        currency=billed.currency,
        total=invoice_total(lines=[line for line, _ in lines]),
    )
    InvoiceLine.objects.bulk_create(
        _line_row(invoice, position, line, for_month)
        for position, (line, for_month) in enumerate(lines, start=1)
    )
    PromotionUse.objects.bulk_create(
        PromotionUse(credit_id=int(use.credit_id), invoice=invoice, amount=use.billed_amount)
        for use in billed.promotions
        if use.billed_amount > 0
    )
    SlaCredit.objects.filter(pk__in=[credit.pk for credit in billed.sla]).update(invoice=invoice)
    PrepaidDraw.objects.bulk_create(
        PrepaidDraw(balance=balance, invoice=invoice, amount=amount) for balance, amount in draws
    )
    return invoice, True


def _prepaid_line(
    *, tenant: Tenant, month_start: datetime, due: Decimal, currency: str
) -> tuple[LineIn | None, list]:
    """The `prepaid` line drawing what is still due from the tenant's prepaid balances usable
    in the month, earliest expiry first, and the draw from each."""
    draws, left = [], due
    for balance, remaining in prepaid_usable(tenant=tenant, month_start=month_start):
        if left <= 0:
            break
        amount = min(remaining, left)
        draws.append((balance, amount))
        left -= amount
    drawn = due - left
    if drawn <= 0:
        return None, []
    zero = round_money(amount=Decimal(0), currency=currency)
    line = LineIn(
        kind=LineKind.PREPAID,
        list_amount=zero,
        discount=drawn,
        amount=-drawn,
        description=f"Drawn from prepaid balances ({money_text(amount=drawn, currency=currency)})",
    )
    return line, draws


def _line_row(invoice: Invoice, position: int, line: LineIn, for_month: datetime) -> InvoiceLine:
    return InvoiceLine(
        invoice=invoice,
        position=position,
        kind=line.kind,
        model=line.model,
        token_class=line.token_class or "",
        price_class=line.price_class or "",
        quantity=line.quantity,
        list_unit_price=line.list_unit_price,
        service_tier=line.service_tier,
        reservation_id=line.reservation,
        gpu_hours=line.gpu_hours,
        list_amount=line.list_amount,
        discount_pct=line.discount_pct,
        discount=line.discount,
        amount=line.amount,
        description=line.description,
        for_month=for_month,
    )
