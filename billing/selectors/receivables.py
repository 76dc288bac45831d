"""Aged receivables as of a day, per tenant (kpis.md "Credit notes, balances and
receivables"), and the invoice figures the API and pages show beside an invoice: what was
credited, what is outstanding, how many days overdue."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import Q

from billing.domain.receivables import BUCKETS, age_bucket, outstanding_amount
from billing.models import CreditNote, Invoice
from portal.access import tenant_scoped
from portal.models import Tenant

ZERO = Decimal(0)


@dataclass
class AgedRow:
    tenant: Tenant
    buckets: dict[str, Decimal] = field(default_factory=lambda: dict.fromkeys(BUCKETS, ZERO))
    invoices: list[tuple[Invoice, Decimal, str]] = field(default_factory=list)

    @property
    def total(self) -> Decimal:
        return sum(self.buckets.values(), ZERO)


def _end_of(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)


def aged_receivables(*, user, as_of: date) -> list[AgedRow]:
    """Per tenant with something outstanding as of the end of `as_of` (UTC): invoices issued
    by then, less payments and the part of credit notes that reduced them dated by then,
    each aged past its due day into its bucket; tenants by name."""
    end = _end_of(as_of)
    invoices = (
        tenant_scoped(Invoice.objects.select_related("tenant"), user=user)
        .filter(issued_at__lt=end)
        .filter(Q(voided_at__isnull=True) | Q(voided_at__gte=end))
    )
    reduced: dict[int, Decimal] = defaultdict(lambda: ZERO)
    for invoice_id, amount in CreditNote.objects.filter(
        invoice__in=invoices, issued_at__lt=end
    ).values_list("invoice_id", "reduced"):
        reduced[invoice_id] += amount
    rows: dict[int, AgedRow] = {}
    for invoice in invoices.order_by("due_at", "number"):
        paid = (invoice.paid_amount or ZERO) if invoice.paid_at and invoice.paid_at < end else ZERO
        amount = outstanding_amount(total=invoice.total, paid=paid, reduced=reduced[invoice.pk])
        if amount == 0:
            continue
        bucket = age_bucket(as_of=as_of, due=invoice.due_at.astimezone(UTC).date())
        row = rows.setdefault(invoice.tenant_id, AgedRow(tenant=invoice.tenant))
        row.buckets[bucket] += amount
        row.invoices.append((invoice, amount, bucket))
    return sorted(rows.values(), key=lambda row: row.tenant.name)


def days_overdue(*, invoice: Invoice, outstanding: Decimal, today: date) -> int:
    """Whole UTC days past the due day while something is outstanding (0 otherwise)."""
    if outstanding <= 0 or invoice.due_at is None:
        return 0
    return max((today - invoice.due_at.astimezone(UTC).date()).days, 0)


@dataclass(frozen=True)
class ReceivablesSummary:
    """What finance's home shows of the receivables as of a day: every bucket summed over
    the tenants, and the invoices past due, the longest overdue first."""

    as_of: date
    buckets: dict[str, Decimal]
    overdue: list[tuple[Invoice, Decimal, int]]  # invoice, outstanding, days overdue

    @property
    def total(self) -> Decimal:
        return sum(self.buckets.values(), ZERO)

    @property
    def overdue_total(self) -> Decimal:
        return sum((amount for _, amount, _ in self.overdue), ZERO)


def receivables_summary(*, user, as_of: date) -> ReceivablesSummary:
    """The aged receivables of `as_of` (aged_receivables) summed, and its overdue invoices."""
    rows = aged_receivables(user=user, as_of=as_of)
    buckets = {bucket: sum((row.buckets[bucket] for row in rows), ZERO) for bucket in BUCKETS}
    overdue = [
        (invoice, amount, (as_of - invoice.due_at.astimezone(UTC).date()).days)
        for row in rows
        for invoice, amount, bucket in row.invoices
        if bucket != "current"
    ]
    overdue.sort(key=lambda item: (-item[2], item[0].number or ""))
    return ReceivablesSummary(as_of=as_of, buckets=buckets, overdue=overdue)
