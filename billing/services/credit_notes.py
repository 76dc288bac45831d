"""Credit notes (kpis.md "Credit notes, balances and receivables"): against an issued
invoice for an amount or parts of its lines, or for a month whose lines netted below zero;
numbered CN-YYYY-NNNNNN, gapless; posted on their own date. A note first reduces what is
still outstanding on its invoice; the rest is refunded (cash) or credited to the tenant's
balance, which its next invoices draw. The invoice itself never changes (a note that leaves
nothing outstanding settles it: paid)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import transaction

from billing.domain.rating.types import LineKind
from billing.models import (
    CreditNote,
    CreditNoteLine,
    Invoice,
    InvoiceLine,
    LedgerTransaction,
    PromotionUse,
    SlaCredit,
)
from billing.selectors.invoices import MonthLines, invoice_outstanding
from billing.services.events import credit_note_issued_raise
from billing.services.invoices.issue import line_legs
from billing.services.ledger import (
    Leg,
    account_credit_balance,
    account_named,
    account_receivable,
    accrual_date,
    ledger_post,
)
from billing.services.numbering import document_number
from portal import clock
from portal.errors import FieldError
from portal.formatting import money_text
from portal.models import Tenant
from portal.money import currency_places, money_parse
from portal.services import audit_record

ZERO = Decimal(0)


@dataclass(frozen=True)
class LinePart:
    """The part of one invoice line a note credits."""

    line: int  # the invoice line's id
    amount: Decimal


def _money(value, *, field: str, currency: str) -> Decimal:
    return money_parse(value, field=field, places=currency_places(currency), positive=True)


def _parts(invoice: Invoice, lines: list[dict]) -> list[tuple[InvoiceLine, Decimal]]:
    """The invoice lines credited, each checked against what earlier notes left of it."""
    if not lines:
        raise FieldError("lines", "must list at least one line")
    own = {line.pk: line for line in invoice.lines.all()}
    credited: dict[int, Decimal] = {}
    for line_id, amount in CreditNoteLine.objects.filter(invoice_line__in=own).values_list(
        "invoice_line_id", "amount"
    ):
        credited[line_id] = credited.get(line_id, ZERO) + amount
    parts, seen = [], set()
    for index, part in enumerate(lines):
        line = own.get(part.get("line")) if isinstance(part, dict) else None
        if line is None:
            raise FieldError(f"lines[{index}].line", f"is not a line of {invoice}")
        if line.pk in seen:
            raise FieldError(f"lines[{index}].line", "is listed twice")
        seen.add(line.pk)
        amount = _money(
            part.get("amount"), field=f"lines[{index}].amount", currency=invoice.currency
        )
        left = line.amount - credited.get(line.pk, ZERO)
        if amount > left:
            raise FieldError(
                f"lines[{index}].amount",
                f"exceeds what is left to credit on that line: "
                f"{money_text(amount=max(left, ZERO), currency=invoice.currency)}",
            )
        parts.append((line, amount))
    return parts


@transaction.atomic
def credit_note_issue(
    *,
    invoice: Invoice,
    reason: str,
    settle: str,
    amount=None,
    lines: list[dict] | None = None,
    memo: str = "",
    by=None,
    now: datetime | None = None,
) -> CreditNote:
    """Credit an issued (or paid) invoice for `amount` or for parts of its `lines`
    ([{"line": id, "amount": "…"}]), with a reason, settled as `refund` or to the tenant's
    `balance`. Refused naming the field: a bad reason or settlement, both or neither of
    amount and lines, an amount past what earlier notes left of the invoice (`amount`) or of
    a line. Posted in one transaction with its number: contra-revenue on its issue day,
    receivable reduced by what is outstanding, the rest to cash or the credit balance."""
    invoice, parts, total = _credited(
        invoice=invoice, reason=reason, settle=settle, amount=amount, lines=lines
    )
    now = now or clock.now()
    outstanding = invoice_outstanding(invoice=invoice)
    reduced = min(total, outstanding)
    settled = total - reduced
    tenant, currency = invoice.tenant, invoice.currency
    number = document_number(series="CN", issued_at=now)
    entry = _credit_post(
        invoice=invoice, number=number, reason=reason, settle=settle, total=total,
        reduced=reduced, now=now, by=by,
    )  # fmt: skip
    note = CreditNote.objects.create(
        number=number, tenant=tenant, invoice=invoice, period_start=invoice.period_start,
        reason=reason, settle=settle, currency=currency, total=total, reduced=reduced,
        settled=settled, memo=memo[:300], issued_at=now, transaction=entry, created_by=by,
    )  # fmt: skip
    CreditNoteLine.objects.bulk_create(
        CreditNoteLine(
            credit_note=note,
            position=position,
            invoice_line=line,
            kind=line.kind,
            model=line.model,
            amount=part,
            description=f"Credit on: {line.description}"[:300],
            for_month=line.for_month,
        )
        for position, (line, part) in enumerate(parts, start=1)
    )
    if invoice.status == Invoice.Status.ISSUED and reduced == outstanding:
        invoice.status, invoice.paid_at, invoice.paid_amount = Invoice.Status.PAID, now, ZERO
        invoice.save(update_fields=["status", "paid_at", "paid_amount"])
    audit_record(
        actor=by, action="credit_note.issue", object_type="credit_note", object_id=number,
        after={"invoice": invoice.number, "reason": reason, "settle": settle, "total": str(total)},
    )  # fmt: skip
    credit_note_issued_raise(note)
    return note


def _credited(*, invoice: Invoice, reason: str, settle: str, amount, lines):
    """The invoice (locked, with its tenant: one note at a time), the lines credited and
    their parts, and the total; FieldError naming what is refused."""
    if reason not in CreditNote.Reason.values:
        raise FieldError("reason", f"must be one of {', '.join(CreditNote.Reason.values)}")
    if settle not in CreditNote.Settle.values:
        raise FieldError("settle", f"must be one of {', '.join(CreditNote.Settle.values)}")
    Tenant.objects.select_for_update().filter(pk=invoice.tenant_id).first()  # one note at a time
    invoice = Invoice.objects.select_for_update().select_related("tenant").get(pk=invoice.pk)
    if invoice.status not in Invoice.LIVE:
        raise FieldError(
            "invoice", f"{invoice} is {invoice.status}; only issued invoices are credited"
        )
    if (amount is None) == (lines is None):
        raise FieldError("amount", "give either an amount or lines, not both")
    currency = invoice.currency
    parts = [] if lines is None else _parts(invoice, lines)
    total = (
        sum((a for _, a in parts), ZERO)
        if parts
        else _money(amount, field="amount", currency=currency)
    )
    earlier = sum(invoice.credit_notes.values_list("total", flat=True), ZERO)
    if total > invoice.total - earlier:
        raise FieldError(
            "amount",
            f"exceeds what is left to credit on {invoice}: "
            f"{money_text(amount=max(invoice.total - earlier, ZERO), currency=currency)} "
            f"(total {money_text(amount=invoice.total, currency=currency)}, "
            f"{money_text(amount=earlier, currency=currency)} credited before)",
        )
    return invoice, parts, total


def _credit_post(*, invoice, number, reason, settle, total, reduced, now, by) -> LedgerTransaction:
    """The note's ledger transaction: contra-revenue for its total; the receivable reduced
    by what was outstanding, the rest refunded (cash) or credited to the tenant's balance."""
    tenant = invoice.tenant
    settle_account = (
        account_named("cash") if settle == CreditNote.Settle.REFUND
        else account_credit_balance(tenant=tenant)
    )  # fmt: skip
    return ledger_post(
        kind=LedgerTransaction.Kind.CREDIT_NOTE,
        memo=f"Credit note {number} on {invoice.number}, {tenant.name}: {reason}",
        legs=[
            Leg(account_named("contra:credit-notes"), total),
            Leg(account_receivable(tenant=tenant), -reduced),
            Leg(settle_account, -(total - reduced)),
        ],
        currency=invoice.currency,
        tenant=tenant,
        period_start=invoice.period_start,
        occurred_at=now,
        idempotency_key=f"credit-note:{number}",
        by=by,
    )


@transaction.atomic
def credit_note_for_month(
    *, tenant: Tenant, month_start: datetime, billed: MonthLines, by=None, now: datetime
) -> CreditNote:
    """The note the close issues instead of an invoice for a month whose lines net below
    zero: the month's lines as an invoice would have billed them, the net credited to the
    tenant's balance (never a negative invoice), posted on the month's last day."""
    total = -billed.total
    reason = (
        CreditNote.Reason.SLA
        if any(line.kind == LineKind.SLA_CREDIT for line, _ in billed.lines)
        else CreditNote.Reason.BILLING_ERROR
    )
    number = document_number(series="CN", issued_at=now)
    entry = _month_note_post(
        tenant=tenant, month_start=month_start, billed=billed, number=number, by=by, now=now
    )
    note = CreditNote.objects.create(
        number=number, tenant=tenant, invoice=None, period_start=month_start, reason=reason,
        settle=CreditNote.Settle.BALANCE, currency=billed.currency, total=total, reduced=ZERO,
        settled=total, memo=f"{month_start:%Y-%m} nets below zero", issued_at=now,
        transaction=entry, created_by=by,
    )  # fmt: skip
    CreditNoteLine.objects.bulk_create(
        CreditNoteLine(
            credit_note=note,
            position=position,
            kind=line.kind,
            model=line.model or "",
            list_amount=line.list_amount,
            discount=line.discount,
            amount=line.amount,
            description=line.description[:300],
            for_month=for_month,
        )
        for position, (line, for_month) in enumerate(billed.lines, start=1)
    )
    PromotionUse.objects.bulk_create(
        PromotionUse(credit_id=int(use.credit_id), credit_note=note, amount=use.billed_amount)
        for use in billed.promotions
        if use.billed_amount > 0
    )
    SlaCredit.objects.filter(pk__in=[credit.pk for credit in billed.sla]).update(credit_note=note)
    audit_record(
        actor=by, action="credit_note.issue", object_type="credit_note", object_id=number,
        after={"month": f"{month_start:%Y-%m}", "reason": reason, "total": str(total)},
    )  # fmt: skip
    return note


def _month_note_post(*, tenant, month_start, billed: MonthLines, number, by, now):
    """A netted month's ledger transaction, on the month's last day: its lines posted as
    an invoice's would be, the net credited to the tenant's balance."""
    total = -billed.total
    legs = [Leg(account_credit_balance(tenant=tenant), -total)]
    known: dict = {}
    for line, _ in billed.lines:
        legs += line_legs(
            tenant=tenant, kind=line.kind, model=line.model, list_amount=line.list_amount,
            discount=line.discount, amount=line.amount, known=known,
        )  # fmt: skip
    return ledger_post(
        kind=LedgerTransaction.Kind.CREDIT_NOTE,
        memo=f"Credit note {number}, {tenant.name}, {month_start:%Y-%m}: the month nets below zero",
        legs=legs,
        currency=billed.currency,
        tenant=tenant,
        period_start=month_start,
        occurred_at=now,
        accounting_date=accrual_date(month=month_start, occurred_at=now, by_close=True),
        idempotency_key=f"month-credit-note:{tenant.slug}:{month_start:%Y-%m}",
        by=by,
        by_close=True,
    )
