"""Invoice reads: the invoices a user may see, what a tenant's month bills now (the rating,
its late-usage adjustments and SLA credits waiting) and what is outstanding on an
invoice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Q, QuerySet
from django.http import Http404

from billing.domain.invoices import BILLED_KINDS, adjustment_line, invoice_total
from billing.domain.rating.types import InvoiceLine as LineIn
from billing.domain.rating.types import LineKind, month_bounds
from billing.domain.receivables import outstanding_amount
from billing.filters import InvoiceFilterSet
from billing.models import (
    CreditNote,
    CreditNoteLine,
    Invoice,
    InvoiceLine,
    PrepaidDraw,
    RatedTenantMonth,
    SlaCredit,
)
from billing.selectors.rating.inputs import month_billed
from metering.selectors.usage import hourly_usage_list
from portal.access import tenant_scoped
from portal.closing import closed_months, month_is_closed
from portal.formatting import decimal_plain, money_text
from portal.models import Tenant
from portal.money import round_money
from portal.periods import months_before

ADJUSTMENT_MONTHS = 12  # how far back late usage re-rates invoiced months


def invoice_list(*, user, filters=None) -> QuerySet[Invoice]:
    """The invoices the user may see, newest month first; `filters`: InvoiceFilterSet's query
    (tenant, status, number, ordering), 404 for another tenant, 400 for an unknown value."""
    invoices = tenant_scoped(Invoice.objects.select_related("tenant"), user=user).order_by(
        "-period_start", "number", "tenant__slug"
    )
    if filters:  # its `ordering` sorts by a column first, this order after
        invoices = InvoiceFilterSet.apply(filters, queryset=invoices, user=user)
    return invoices


def invoice_get(*, user, pk: int) -> Invoice:
    invoice = invoice_list(user=user).prefetch_related("lines").filter(pk=pk).first()
    if invoice is None:
        raise Http404("No such invoice.")
    return invoice


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


def tenants_to_bill(month_start: datetime) -> list[Tenant]:
    """The tenants whose month may bill something: usage in it, usage rated or invoiced in
    the earlier months late usage still adjusts, SLA credits waiting for an invoice."""
    start, end = month_bounds(month_start=month_start)
    ids = set(
        hourly_usage_list(start=start, end=end).values_list("tenant_id", flat=True).distinct()
    )
    since = months_before(start, ADJUSTMENT_MONTHS)
    ids |= set(
        Invoice.objects.filter(
            kind=Invoice.Kind.USAGE, status__in=Invoice.LIVE, period_start__gte=since
        ).values_list("tenant_id", flat=True)
    )
    ids |= set(  # rated in an earlier month: late usage there is adjusted now
        RatedTenantMonth.objects.filter(month_start__gte=since, month_start__lt=start)
        .values_list("tenant_id", flat=True)
        .distinct()
    )
    ids |= set(
        SlaCredit.objects.filter(invoice__isnull=True, credit_note__isnull=True).values_list(
            "tenant_id", flat=True
        )
    )
    return list(Tenant.objects.filter(pk__in=ids).order_by("slug"))


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


def invoice_void_refusal(*, invoice: Invoice) -> str | None:
    """Why an issued invoice may not be voided (None: it may): its month is closed (a
    credit note corrects it), it has credit notes, or it bought a prepaid balance that
    invoices drew from. The void service refuses with this; the invoice's page shows it in
    place of the Void button."""
    if month_is_closed(invoice.period_start):
        return (
            f"{invoice.period_start:%Y-%m} is closed: {invoice} is not voided; "
            "correct it with a credit note"
        )
    if invoice.credit_notes.exists():
        return f"{invoice} has credit notes; correct it with another credit note"
    drawn = PrepaidDraw.objects.filter(balance__invoice=invoice).exclude(
        invoice__status=Invoice.Status.VOID
    )
    if drawn.exists():
        return f"{invoice} bought a prepaid balance that invoices have drawn"
    return None
