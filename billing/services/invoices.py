"""Invoices: draft from the rating, issue with a gapless number and a ledger transaction,
pay, void by reversal; the monthly run that does it for every tenant."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Min, Q

from billing.domain.invoices import adjustment_line, invoice_total
from billing.domain.rating.types import InvoiceLine as LineIn
from billing.domain.rating.types import LineKind, RatingError, month_bounds
from billing.models import (
    Invoice,
    InvoiceCounter,
    InvoiceLine,
    LedgerTransaction,
    PromotionalCredit,
    PromotionUse,
    SlaCredit,
)
from billing.selectors.rating import month_billed
from billing.services.credits import sla_month_close
from billing.services.ledger import (
    Leg,
    account_named,
    account_receivable,
    account_revenue,
    account_sla_payable,
    accrual_date,
    ledger_post,
    ledger_reverse,
)
from billing.services.pricing import contract_in_force
from billing.services.rated import rating_queue
from metering.selectors.usage import hourly_usage_list
from portal import clock
from portal.closing import month_close
from portal.formatting import decimal_plain, money_text
from portal.models import Tenant
from portal.money import round_money
from portal.periods import month_start as month_of
from portal.periods import months_before, next_month
from portal.services import audit_record

ADJUSTMENT_MONTHS = 12  # how far back late usage re-rates invoiced months

LIVE = (Invoice.Status.ISSUED, Invoice.Status.PAID)


class InvoiceError(Exception):
    """An invoice operation that the invoice's state does not allow; the API answers it
    naming `status`."""

    http_status = 400

    def api_errors(self) -> list[dict]:
        return [{"field": "status", "message": str(self)}]


class InvoiceConflict(InvoiceError):
    """Finalizing an invoice that is no longer a draft: a 409, so a retried request learns
    the invoice's state instead of being told it succeeded."""

    http_status = 409


@dataclass
class InvoiceRun:
    """What one run of the monthly job did, per tenant."""

    month_start: datetime
    issued: list[Invoice] = field(default_factory=list)
    existing: list[Invoice] = field(default_factory=list)
    nothing_due: list[str] = field(default_factory=list)  # tenant slugs
    errors: dict[str, str] = field(default_factory=dict)  # tenant slug -> message
    sla_credits: list[SlaCredit] = field(default_factory=list)  # posted by the month's close


def _adjustments(*, tenant: Tenant, month_start: datetime) -> list[tuple[LineIn, datetime]]:
    """Late usage of invoiced months: each re-rated against everything billed for it."""
    lines = []
    earlier = Invoice.objects.filter(
        tenant=tenant,
        status__in=LIVE,
        period_start__gte=months_before(month_start, ADJUSTMENT_MONTHS),
        period_start__lt=month_start,
    ).order_by("period_start")
    for invoice in earlier:
        billed = InvoiceLine.objects.filter(
            Q(invoice=invoice, kind__in=[LineKind.USAGE, LineKind.PROMOTION, LineKind.MINIMUM])
            | Q(
                invoice__tenant=tenant,
                invoice__status__in=LIVE,
                kind=LineKind.ADJUSTMENT,
                for_month=invoice.period_start,
            )
        )
        rerated = month_billed(tenant=tenant, month_start=invoice.period_start)
        line = adjustment_line(
            month_start=invoice.period_start,
            invoiced_lines=[_line_in(line) for line in billed],
            rerated_lines=rerated.lines,
            currency=invoice.currency,
        )
        if line is not None:
            lines.append((line, invoice.period_start))
    return lines


def _line_in(line: InvoiceLine) -> LineIn:
    return LineIn(
        kind=LineKind(line.kind),
        list_amount=line.list_amount,
        discount=line.discount,
        amount=line.amount,
        description=line.description,
    )


def _sla_lines(*, tenant: Tenant, month_start: datetime) -> list[tuple[LineIn, SlaCredit]]:
    credits = SlaCredit.objects.filter(
        tenant=tenant, invoice__isnull=True, month_start__lt=month_start, amount__gt=0
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


@transaction.atomic
def invoice_draft(*, tenant: Tenant, month_start: datetime) -> tuple[Invoice | None, bool]:
    """The tenant's invoice for the month as a draft: (invoice, created). Returns the live
    invoice when one exists, and (None, False) when nothing is due (RatingError propagates)."""
    start, end = month_bounds(month_start=month_start)
    existing = Invoice.objects.filter(tenant=tenant, period_start=start).exclude(
        status=Invoice.Status.VOID
    )
    if invoice := existing.first():
        return invoice, False
    rated = month_billed(tenant=tenant, month_start=start)
    lines = [(line, start) for line in rated.lines]
    lines += _adjustments(tenant=tenant, month_start=start)
    sla = _sla_lines(tenant=tenant, month_start=start)
    lines += [(line, credit.month_start) for line, credit in sla]
    total = invoice_total(lines=[line for line, _ in lines])
    # Nothing due and nothing to record. Usage that a promotion covered, or late usage and
    # credits that net to zero, still make an invoice: the ledger must see the revenue and
    # what covered it, and a promotion must not be spent twice.
    if total == 0 and not any(line.list_amount or line.amount for line, _ in lines):
        return None, False
    invoice = Invoice.objects.create(
        tenant=tenant,
        period_start=start,
        period_end=end,
        currency=rated.currency,
        total=total,
    )
    InvoiceLine.objects.bulk_create(
        _line_row(invoice, position, line, for_month)
        for position, (line, for_month) in enumerate(lines, start=1)
    )
    PromotionUse.objects.bulk_create(
        PromotionUse(credit_id=int(use.credit_id), invoice=invoice, amount=use.billed_amount)
        for use in rated.promotions
        if use.billed_amount > 0
    )
    SlaCredit.objects.filter(pk__in=[credit.pk for _, credit in sla]).update(invoice=invoice)
    return invoice, True


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


def _invoice_legs(invoice: Invoice) -> list[Leg]:
    """Receivable = total; revenue at list per model; discounts, promotions, minimum,
    adjustments and SLA credits each on their account."""
    legs = [Leg(account_receivable(tenant=invoice.tenant), invoice.total)]
    for line in invoice.lines.all():
        if line.kind == LineKind.USAGE:
            legs.append(Leg(account_revenue(model_slug=line.model), -line.list_amount))
            legs.append(Leg(account_named("contra:discounts"), line.discount))
        elif line.kind == LineKind.ADJUSTMENT:
            legs.append(Leg(account_named("revenue:adjustments"), -line.list_amount))
            legs.append(Leg(account_named("contra:discounts"), line.discount))
        elif line.kind == LineKind.PROMOTION:
            legs.append(Leg(account_named("expense:promotions"), -line.amount))
        elif line.kind == LineKind.MINIMUM:
            legs.append(Leg(account_named("revenue:minimum"), -line.amount))
        elif line.kind == LineKind.SLA_CREDIT:
            legs.append(Leg(account_sla_payable(tenant=invoice.tenant), -line.amount))
    return legs


def _next_number(year: int) -> str:
    """Lock the year's counter row and take the next number: gapless, because a rollback
    of the finalizing transaction rolls the counter back too."""
    InvoiceCounter.objects.bulk_create([InvoiceCounter(year=year)], ignore_conflicts=True)
    counter = InvoiceCounter.objects.select_for_update().get(year=year)
    counter.last += 1
    counter.save(update_fields=["last"])
    return f"INV-{year}-{counter.last:06d}"


@transaction.atomic
def invoice_finalize(*, invoice: Invoice, by=None, now: datetime | None = None) -> Invoice:
    """Issue a draft: number it (INV-YYYY-NNNNNN by the UTC year of issue, gapless) and post
    it to the ledger, in one transaction; one totalling 0.00 is paid at once (no payment
    moves money). An invoice past draft (issued, paid or void) is refused naming its state."""
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
    if invoice.status != Invoice.Status.DRAFT:
        raise InvoiceConflict(f"invoice {invoice} is {invoice.status}; only a draft is finalized")
    now = now or clock.now()
    invoice.number = _next_number(now.year)
    invoice.issue_transaction = ledger_post(
        kind=LedgerTransaction.Kind.INVOICE,
        memo=f"Invoice {invoice.number}, {invoice.tenant.name}, {invoice.period_start:%Y-%m}",
        legs=_invoice_legs(invoice),
        currency=invoice.currency,
        tenant=invoice.tenant,
        period_start=invoice.period_start,
        occurred_at=now,
        accounting_date=accrual_date(month=invoice.period_start, occurred_at=now),
        idempotency_key=f"invoice:{invoice.pk}",
        by=by,
    )
    invoice.status = Invoice.Status.ISSUED
    invoice.issued_at = now
    terms = contract_in_force(tenant=invoice.tenant, when=invoice.period_end - timedelta(hours=1))
    invoice.due_at = now + timedelta(days=terms.payment_terms_days if terms else 30)
    if invoice.total == 0:  # nothing due (a promotion covered it): settled when issued
        invoice.status, invoice.paid_at = Invoice.Status.PAID, now
    invoice.save(
        update_fields=["number", "issue_transaction", "status", "issued_at", "due_at", "paid_at"]
    )
    audit_record(actor=by, action="invoice.issue", object_type="invoice", object_id=invoice.number)
    _promotions_spent(invoice.tenant)
    return invoice


@transaction.atomic
def invoice_pay(*, invoice: Invoice, by=None, paid_at: datetime | None = None) -> Invoice:
    """Record the payment of an issued invoice: cash in, receivable settled."""
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
    if invoice.status != Invoice.Status.ISSUED:
        raise InvoiceError(f"invoice {invoice} is {invoice.status}; only issued invoices are paid")
    paid_at = paid_at or clock.now()
    ledger_post(
        kind=LedgerTransaction.Kind.PAYMENT,
        memo=f"Payment of {invoice.number}",
        legs=[
            Leg(account_named("cash"), invoice.total),
            Leg(account_receivable(tenant=invoice.tenant), -invoice.total),
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
    invoice.save(update_fields=["status", "paid_at"])
    audit_record(actor=by, action="invoice.pay", object_type="invoice", object_id=invoice.number)
    return invoice


@transaction.atomic
def invoice_void(
    *, invoice: Invoice, by=None, reason: str = "", now: datetime | None = None
) -> Invoice:
    """Void an issued invoice by reversing its ledger transaction; its SLA credits go back
    to wait for the next invoice. The month can then be invoiced again."""
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
    if invoice.status != Invoice.Status.ISSUED:
        raise InvoiceError(
            f"invoice {invoice} is {invoice.status}; only issued invoices are voided"
        )
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


def _tenants_to_invoice(month_start: datetime) -> list[Tenant]:
    start, end = month_bounds(month_start=month_start)
    ids = set(
        hourly_usage_list(start=start, end=end).values_list("tenant_id", flat=True).distinct()
    )
    ids |= set(
        Invoice.objects.filter(
            status__in=LIVE, period_start__gte=months_before(start, ADJUSTMENT_MONTHS)
        ).values_list("tenant_id", flat=True)
    )
    ids |= set(SlaCredit.objects.filter(invoice__isnull=True).values_list("tenant_id", flat=True))
    return list(Tenant.objects.filter(pk__in=ids).order_by("slug"))


def invoice_run(*, month_start: datetime, by=None, now: datetime | None = None) -> InvoiceRun:
    """Rate the month, issue one invoice per tenant with a non-zero amount due, then close
    the month's SLA and, when every tenant was rated, the month itself (portal.closing). Safe to run twice or concurrently: a tenant-month already invoiced is
    left as it is, and a credit is posted once. A month not over yet is refused: its
    usage and its SLA are not final."""
    start = month_of(month_start)
    now = now or clock.now()
    if next_month(start) > now:
        raise InvoiceError(f"{start:%Y-%m} is not over yet; a month is invoiced once it ends")
    run = InvoiceRun(month_start=start)
    for tenant in _tenants_to_invoice(start):
        try:
            invoice, _ = invoice_draft(tenant=tenant, month_start=start)
        except RatingError as error:
            run.errors[tenant.slug] = str(error)
            continue
        except IntegrityError:  # a concurrent run drafted it first
            invoice = Invoice.objects.exclude(status=Invoice.Status.VOID).get(
                tenant=tenant, period_start=start
            )
        if invoice is None:
            run.nothing_due.append(tenant.slug)
            continue
        if invoice.status != Invoice.Status.DRAFT:
            run.existing.append(invoice)
            continue
        try:
            run.issued.append(invoice_finalize(invoice=invoice, by=by, now=now))
        except InvoiceConflict:  # a concurrent run issued it first
            run.existing.append(Invoice.objects.get(pk=invoice.pk))
    # Close the month's SLA: its credits go onto the next month's invoices.
    run.sla_credits = sla_month_close(month_start=start, by=by, now=now)
    if not run.errors:  # every invoice issued: the month is closed (a failed one stays open
        month_close(month=start, by=by, now=now)  # so that a missing price can be added)
    return run
