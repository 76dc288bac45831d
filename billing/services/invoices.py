"""Invoices: draft a tenant's month from the rating (its late-usage adjustments, SLA credits
and credit balance drawn), issue it with a gapless number and a ledger transaction, pay it,
void it by reversal. The month-end close (billing.services.close) does it for every tenant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Min, Q

from billing.domain.accounts import (
    CREDIT_BALANCE,
    DEFERRED_REVENUE,
    SLA_PAYABLE,
    liability_code,
    line_leg_codes,
    revenue_code,
)
from billing.domain.invoices import BILLED_KINDS, adjustment_line, invoice_total
from billing.domain.rating.types import InvoiceLine as LineIn
from billing.domain.rating.types import LineKind, month_bounds
from billing.domain.receivables import outstanding_amount
from billing.models import (
    CreditNote,
    CreditNoteLine,
    Invoice,
    InvoiceLine,
    LedgerTransaction,
    PrepaidDraw,
    PromotionalCredit,
    PromotionUse,
    RatedTenantMonth,
    SlaCredit,
)
from billing.selectors.balances import credit_balance, prepaid_usable
from billing.selectors.pricing import contract_in_force
from billing.selectors.rating.inputs import month_billed
from billing.services.events import (
    invoice_issued_raise,
    invoice_overdue_raise,
    payment_received_raise,
)
from billing.services.ledger import (
    Leg,
    account_credit_balance,
    account_deferred_revenue,
    account_named,
    account_receivable,
    account_revenue,
    account_sla_payable,
    accrual_date,
    ledger_post,
    ledger_reverse,
)
from billing.services.numbering import document_number
from billing.services.rating import rating_queue
from portal import clock
from portal.closing import closed_months, month_is_closed
from portal.formatting import decimal_plain, money_text
from portal.models import Tenant
from portal.money import round_money
from portal.periods import day_floor, months_before
from portal.services import audit_record

ADJUSTMENT_MONTHS = 12  # how far back late usage re-rates invoiced months


class InvoiceError(Exception):
    """An invoice operation that the invoice's state does not allow; the API answers it
    naming `status`."""

    http_status = 400

    def api_errors(self) -> list[dict]:
        return [{"field": "status", "message": str(self)}]


class InvoiceConflict(InvoiceError):
    """A transition the invoice's state no longer allows (finalizing past draft, paying or
    voiding what is not issued): a 409, so a retried request learns the invoice's state
    instead of being told it succeeded."""

    http_status = 409


BALANCE_KINDS = (LineKind.CREDIT, LineKind.PREPAID)  # how an amount due is paid, not what


def _billed_months(*, tenant: Tenant, month_start: datetime) -> list[datetime]:
    """The earlier months late usage may have changed for the tenant (within
    ADJUSTMENT_MONTHS): those billed by a live invoice or a netted month's credit note, and
    the closed months it was rated in without a document (all its usage came late). A month
    whose close is still running is its close's to bill, not a later month's."""
    since = months_before(month_start, ADJUSTMENT_MONTHS)
    within = {"period_start__gte": since, "period_start__lt": month_start}
    months = set(
        Invoice.objects.filter(
            tenant=tenant, kind=Invoice.Kind.USAGE, status__in=Invoice.LIVE, **within
        ).values_list("period_start", flat=True)
    )
    months |= set(
        CreditNote.objects.filter(tenant=tenant, invoice=None, **within).values_list(
            "period_start", flat=True
        )
    )
    rated = RatedTenantMonth.objects.filter(
        tenant=tenant, month_start__gte=since, month_start__lt=month_start
    ).values_list("month_start", flat=True)
    months |= set(rated) & closed_months(start=since, end=month_start, by_close=True)
    return sorted(months)


def _billed_lines(*, tenant: Tenant, month: datetime) -> list[LineIn]:
    """Every line billed for the month so far: its document's usage, promotion and minimum
    lines, and the adjustments for it on later invoices."""
    lines = InvoiceLine.objects.filter(
        Q(invoice__tenant=tenant, invoice__status__in=Invoice.LIVE, invoice__period_start=month,
          invoice__kind=Invoice.Kind.USAGE, kind__in=BILLED_KINDS)
        | Q(invoice__tenant=tenant, invoice__status__in=Invoice.LIVE, kind=LineKind.ADJUSTMENT,
            for_month=month)
    )  # fmt: skip
    netted = CreditNoteLine.objects.filter(
        Q(kind__in=BILLED_KINDS, for_month=month) | Q(kind=LineKind.ADJUSTMENT, for_month=month),
        credit_note__tenant=tenant,
        credit_note__invoice=None,
    )
    return [_line_in(line) for line in (*lines, *netted)]


def _adjustments(*, tenant: Tenant, month_start: datetime) -> list[tuple[LineIn, datetime]]:
    """Late usage of earlier months: each re-rated against everything billed for it."""
    lines = []
    for month in _billed_months(tenant=tenant, month_start=month_start):
        rerated = month_billed(tenant=tenant, month_start=month)
        line = adjustment_line(
            month_start=month,
            invoiced_lines=_billed_lines(tenant=tenant, month=month),
            rerated_lines=rerated.lines,
            currency=rerated.currency or settings.FACTORY_CURRENCY,
        )
        if line is not None:
            lines.append((line, month))
    return lines


def _line_in(line: InvoiceLine | CreditNoteLine) -> LineIn:
    return LineIn(
        kind=LineKind(line.kind),
        list_amount=line.list_amount,
        discount=line.discount,
        amount=line.amount,
        description=line.description,
    )


def _sla_lines(
    *, tenant: Tenant, month_start: datetime, draft: Invoice | None
) -> list[tuple[LineIn, SlaCredit]]:
    """The SLA credits of earlier months not yet on a document (the month's own draft aside:
    what it holds is still the month's to bill)."""
    credits = SlaCredit.objects.filter(
        Q(invoice__isnull=True) | Q(invoice=draft),
        tenant=tenant,
        credit_note__isnull=True,
        month_start__lt=month_start,
        amount__gt=0,
    ).order_by("month_start")
    zero = round_money(amount=Decimal(0), currency=settings.FACTORY_CURRENCY)
    return [
        (
            LineIn(
                kind=LineKind.SLA_CREDIT,
                list_amount=zero,
                discount=credit.amount,
                amount=-credit.amount,
                description=(
                    f"SLA credit for {credit.month_start:%Y-%m}: {decimal_plain(credit.credit_pct)}%"
                    f" of {money_text(amount=credit.base_amount, currency=settings.FACTORY_CURRENCY)}"
                    f" (uptime {_pct(credit.uptime)})"
                ),
            ),
            credit,
        )
        for credit in credits
    ]


def _pct(ratio: Decimal | None) -> str:
    return "n/a" if ratio is None else f"{ratio * 100:.3f}%"


@dataclass
class MonthLines:
    """What a tenant's month bills, before its balances are drawn: the rated lines, late
    usage adjustments and SLA credits waiting, each with the month it refers to."""

    currency: str
    lines: list[tuple[LineIn, datetime]]
    sla: list[SlaCredit]
    promotions: tuple  # the rating's PromotionApplication per credit used

    @property
    def total(self) -> Decimal:
        return invoice_total(lines=[line for line, _ in self.lines])

    @property
    def is_empty(self) -> bool:
        """Nothing due and nothing to record. Usage that a promotion covered, or late usage
        and credits that net to zero, still make a document: the ledger must see the revenue
        and what covered it, and a promotion must not be spent twice."""
        return self.total == 0 and not any(
            line.list_amount or line.amount for line, _ in self.lines
        )


def month_lines(
    *, tenant: Tenant, month_start: datetime, draft: Invoice | None = None
) -> MonthLines:
    """The tenant's month as its document bills it now, counting what the month's `draft`
    holds as still to bill (RatingError names what is missing)."""
    start, _ = month_bounds(month_start=month_start)
    rated = month_billed(tenant=tenant, month_start=start)
    lines = [(line, start) for line in rated.lines]
    lines += _adjustments(tenant=tenant, month_start=start)
    sla = _sla_lines(tenant=tenant, month_start=start, draft=draft)
    lines += [(line, credit.month_start) for line, credit in sla]
    return MonthLines(
        currency=rated.currency,
        lines=lines,
        sla=[credit for _, credit in sla],
        promotions=tuple(rated.promotions),
    )


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
        list_amount=line.list_amount,
        discount_pct=line.discount_pct,
        discount=line.discount,
        amount=line.amount,
        description=line.description,
        for_month=for_month,
    )


def line_legs(*, tenant: Tenant, kind: str, model: str, list_amount, discount, amount) -> list[Leg]:
    """The ledger legs of one billed line (billing.domain.accounts.line_leg_codes), each on
    its account, created on first use."""
    accounts = {
        revenue_code(model): lambda: account_revenue(model_slug=model),
        liability_code(SLA_PAYABLE, tenant.slug): lambda: account_sla_payable(tenant=tenant),
        liability_code(CREDIT_BALANCE, tenant.slug): lambda: account_credit_balance(tenant=tenant),
        liability_code(DEFERRED_REVENUE, tenant.slug): lambda: account_deferred_revenue(
            tenant=tenant
        ),
    }
    codes = line_leg_codes(
        tenant_slug=tenant.slug, kind=kind, model=model, list_amount=list_amount,
        discount=discount, amount=amount,
    )  # fmt: skip
    return [
        Leg(accounts[code]() if code in accounts else account_named(code), leg_amount)
        for code, leg_amount in codes
    ]


def _invoice_legs(invoice: Invoice) -> list[Leg]:
    """Receivable = total, and each line's legs (line_legs)."""
    legs = [Leg(account_receivable(tenant=invoice.tenant), invoice.total)]
    for line in invoice.lines.all():
        legs += line_legs(
            tenant=invoice.tenant,
            kind=line.kind,
            model=line.model,
            list_amount=line.list_amount,
            discount=line.discount,
            amount=line.amount,
        )
    return legs


@transaction.atomic
def invoice_finalize(
    *, invoice: Invoice, by=None, now: datetime | None = None, by_close: bool = False
) -> Invoice:
    """Issue a draft: number it (INV-YYYY-NNNNNN by the UTC year of issue, gapless) and post
    it to the ledger, in one transaction, accounted on its month's last day while the month
    is open or its own close issues it (`by_close`), else on the day of issue; one totalling
    0.00 is paid at once (no payment moves money). An invoice past draft (issued, paid or
    void) is refused naming its state."""
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
    if invoice.status != Invoice.Status.DRAFT:
        raise InvoiceConflict(f"invoice {invoice} is {invoice.status}; only a draft is finalized")
    now = now or clock.now()
    invoice.number = document_number(series="INV", issued_at=now)
    invoice.issue_transaction = ledger_post(
        kind=LedgerTransaction.Kind.INVOICE,
        memo=f"Invoice {invoice.number}, {invoice.tenant.name}, {invoice.period_start:%Y-%m}",
        legs=_invoice_legs(invoice),
        currency=invoice.currency,
        tenant=invoice.tenant,
        period_start=invoice.period_start,
        occurred_at=now,
        accounting_date=(
            accrual_date(month=invoice.period_start, occurred_at=now, by_close=by_close)
            if invoice.kind == Invoice.Kind.USAGE
            else None  # a purchase counts on its issue day
        ),
        idempotency_key=f"invoice:{invoice.pk}",
        by=by,
        by_close=by_close,
    )
    invoice.status = Invoice.Status.ISSUED
    invoice.issued_at = now
    terms = contract_in_force(tenant=invoice.tenant, when=invoice.period_end - timedelta(hours=1))
    invoice.due_at = now + timedelta(days=terms.payment_terms_days if terms else 30)
    if invoice.total == 0:  # nothing due (a promotion covered it): settled when issued
        invoice.status, invoice.paid_at, invoice.paid_amount = Invoice.Status.PAID, now, 0
    invoice.save(
        update_fields=[
            "number", "issue_transaction", "status", "issued_at", "due_at", "paid_at",
            "paid_amount",
        ]
    )  # fmt: skip
    audit_record(actor=by, action="invoice.issue", object_type="invoice", object_id=invoice.number)
    _promotions_spent(invoice.tenant)
    invoice_issued_raise(invoice)
    return invoice


@transaction.atomic
def invoice_pay(*, invoice: Invoice, by=None, paid_at: datetime | None = None) -> Invoice:
    """Record the payment of an issued invoice: what is outstanding on it (its total less
    what credit notes reduced) comes in as cash and settles its receivable. A payment dated
    in a closed month is accounted on the first day of the next open one."""
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
    if invoice.status != Invoice.Status.ISSUED:
        raise InvoiceConflict(
            f"invoice {invoice} is {invoice.status}; only issued invoices are paid"
        )
    paid_at = paid_at or clock.now()
    amount = invoice_outstanding(invoice=invoice)
    if amount > 0:
        ledger_post(
            kind=LedgerTransaction.Kind.PAYMENT,
            memo=f"Payment of {invoice.number}",
            legs=[
                Leg(account_named("cash"), amount),
                Leg(account_receivable(tenant=invoice.tenant), -amount),
            ],
            currency=invoice.currency,
            tenant=invoice.tenant,
            period_start=invoice.period_start,
            occurred_at=paid_at,
            idempotency_key=f"payment:{invoice.pk}",
            by=by,
        )
    invoice.status = Invoice.Status.PAID
    invoice.paid_at = paid_at
    invoice.paid_amount = amount
    invoice.save(update_fields=["status", "paid_at", "paid_amount"])
    audit_record(actor=by, action="invoice.pay", object_type="invoice", object_id=invoice.number)
    payment_received_raise(invoice)
    return invoice


def invoices_overdue_raise(*, now: datetime) -> int:
    """invoice.overdue, once per invoice: on the first run after its due day (UTC) has
    ended while something is outstanding on it. Returns how many were raised."""
    raised = 0
    candidates = Invoice.objects.filter(
        status=Invoice.Status.ISSUED,
        due_at__lt=day_floor(now),  # its due day is over
        overdue_raised_at__isnull=True,
    ).select_related("tenant")
    for invoice in candidates:
        outstanding = invoice_outstanding(invoice=invoice)
        if outstanding <= 0:
            continue
        with transaction.atomic():
            if not Invoice.objects.filter(pk=invoice.pk, overdue_raised_at__isnull=True).update(
                overdue_raised_at=now
            ):
                continue  # another run took it
            invoice_overdue_raise(invoice, outstanding=outstanding, at=now)
        raised += 1
    return raised


def invoice_outstanding(*, invoice: Invoice) -> Decimal:
    """What is still due on an issued invoice: its total less its payment and what its
    credit notes reduced (never below 0); nothing on a draft or a void one."""
    if invoice.status not in Invoice.LIVE:
        return Decimal(0)
    return outstanding_amount(
        total=invoice.total,
        paid=invoice.paid_amount or Decimal(0),
        reduced=sum((note.reduced for note in invoice.credit_notes.all()), Decimal(0)),
    )


@transaction.atomic
def invoice_void(
    *, invoice: Invoice, by=None, reason: str = "", now: datetime | None = None
) -> Invoice:
    """Void an issued invoice by reversing its ledger transaction; its SLA credits go back
    to wait for the next invoice. The month can then be invoiced again."""
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
    if invoice.status != Invoice.Status.ISSUED:
        raise InvoiceConflict(
            f"invoice {invoice} is {invoice.status}; only issued invoices are voided"
        )
    if month_is_closed(invoice.period_start):
        raise InvoiceError(
            f"{invoice.period_start:%Y-%m} is closed: {invoice} is not voided; "
            "correct it with a credit note"
        )
    if invoice.credit_notes.exists():
        raise InvoiceError(f"{invoice} has credit notes; correct it with another credit note")
    if (
        PrepaidDraw.objects.filter(balance__invoice=invoice)
        .exclude(invoice__status=Invoice.Status.VOID)
        .exists()
    ):
        raise InvoiceError(f"{invoice} bought a prepaid balance that invoices have drawn")
    ledger_reverse(
        entry=invoice.issue_transaction,
        memo=f"Void of {invoice.number}" + (f": {reason}" if reason else ""),
        by=by,
    )
    invoice.status = Invoice.Status.VOID
    invoice.voided_at = now or clock.now()
    invoice.save(update_fields=["status", "voided_at"])
    SlaCredit.objects.filter(invoice=invoice).update(invoice=None)
    audit_record(
        actor=by,
        action="invoice.void",
        object_type="invoice",
        object_id=invoice.number,
        after={"reason": reason},
    )
    _promotions_spent(invoice.tenant)
    return invoice


def _promotions_spent(tenant: Tenant) -> None:
    """An invoice issued or voided changes what its tenant's promotions have left for the
    other months: billing's rate stage rates them again (from the first grant)."""
    first = PromotionalCredit.objects.filter(tenant=tenant).aggregate(first=Min("effective_from"))
    if first["first"] is not None:
        rating_queue(tenant=tenant, start=first["first"], hours=False)
