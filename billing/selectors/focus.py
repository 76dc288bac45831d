"""The FOCUS 1.2 rows of a month (billing.domain.focus; architecture.md "Finance"): the lines
of the invoices that bill the month, the purchases and the credit notes issued in it (a credit
note in the month of its issue day), so BilledCost sums to the month's invoices less its credit
notes, to the cent, per tenant. Tenants see their own rows."""

from __future__ import annotations

from collections.abc import Iterator
from copy import copy
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings

from billing.domain.chargeback import chargeback_line, line_project_quantities, line_splits
from billing.domain.focus import (
    COMMITMENT_TYPE,
    COMMITMENT_UNIT,
    CONSUMED_UNIT,
    PRICING_UNIT,
    SERVICE_CATEGORY,
    SERVICE_SUBCATEGORY,
    focus_time,
)
from billing.domain.rating.types import LineKind
from billing.domain.reservations import SECONDS_PER_HOUR, by_day
from billing.models import CreditNote, Invoice, RatedTenantMonth, Reservation
from billing.selectors.rating.inputs import quantities_of
from billing.selectors.reservations import reservation_utilization, terms_of
from portal.access import tenant_scoped
from portal.money import fraction_to_decimal, round_money, split_money
from portal.periods import next_month
from portal.projects import project_names

MILLION = Decimal(1_000_000)
SERVICE_NAME = "LLM inference"
# Lines that draw a balance: their EffectiveCost is counted where the balance came from.
DRAWS = {LineKind.CREDIT, LineKind.PREPAID}


def _base(tenant, month: datetime) -> dict:
    issuer = settings.FACTORY_NAME
    return {
        "BillingAccountId": tenant.slug,
        "BillingAccountName": tenant.name,
        "BillingCurrency": settings.FACTORY_CURRENCY,
        "BillingPeriodStart": focus_time(month),
        "BillingPeriodEnd": focus_time(next_month(month)),
        "InvoiceIssuerName": issuer,
        "ProviderName": issuer,
        "PublisherName": issuer,
        "ServiceCategory": SERVICE_CATEGORY,
        "ServiceSubcategory": SERVICE_SUBCATEGORY,
        "ServiceName": SERVICE_NAME,
        "ChargeClass": None,
        "ConsumedQuantity": None,
        "ConsumedUnit": None,
        "ContractedUnitPrice": None,
        "ListUnitPrice": None,
        "PricingCategory": None,
        "SkuId": None,
        "SkuPriceId": None,
        "CommitmentDiscountCategory": None,
        "CommitmentDiscountId": None,
        "CommitmentDiscountName": None,
        "CommitmentDiscountQuantity": None,
        "CommitmentDiscountStatus": None,
        "CommitmentDiscountType": None,
        "CommitmentDiscountUnit": None,
    }


def _flat(amount: Decimal) -> dict:
    """A charge without a unit price: every cost is what was billed."""
    return {"ListCost": amount, "ContractedCost": amount, "EffectiveCost": amount,
            "BilledCost": amount}  # fmt: skip


def _line_row(base: dict, line, *, document: str, correction: bool) -> dict:
    """One billed line (an invoice's, or a netted month's credit note's)."""
    start = line.for_month
    row = {
        **base,
        "InvoiceId": document,
        "ChargeDescription": line.description,
        "ChargePeriodStart": focus_time(start),
        "ChargePeriodEnd": focus_time(next_month(start)),
        "PricingQuantity": None,
        "PricingUnit": None,
        **_flat(line.amount),
    }
    kind = LineKind(line.kind)
    if kind == LineKind.USAGE:
        quantity = Decimal(line.quantity)
        row.update(
            ChargeCategory="Usage",
            ChargeFrequency="Usage-Based",
            PricingQuantity=quantity / MILLION,
            PricingUnit=PRICING_UNIT,
            ConsumedQuantity=quantity,
            ConsumedUnit=CONSUMED_UNIT,
            ListUnitPrice=line.list_unit_price,
            ContractedUnitPrice=line.list_unit_price * (100 - line.discount_pct) / 100,
            PricingCategory="Standard",
            SkuId=f"{line.model}/{line.token_class}",
            SkuPriceId=f"{line.model}/{line.price_class}/{line.list_unit_price.normalize()}",
            ListCost=line.list_amount,
        )
    elif kind == LineKind.MINIMUM:
        row.update(ChargeCategory="Usage", ChargeFrequency="Recurring", PricingQuantity=Decimal(1),
                   PricingUnit="Months", ListUnitPrice=line.amount, ContractedUnitPrice=line.amount)  # fmt: skip
    elif kind == LineKind.ADJUSTMENT:
        row.update(ChargeCategory="Adjustment", ChargeClass="Correction",
                   ChargeFrequency="Usage-Based", ListCost=line.list_amount)  # fmt: skip
    else:  # promotion, sla_credit, credit, prepaid
        row.update(ChargeCategory="Credit", ChargeFrequency="One-Time")
        if kind in DRAWS:
            row["EffectiveCost"] = Decimal(0)
    if correction:
        row["ChargeClass"] = "Correction"
    return row


def focus_rows(*, user, month: datetime, tenant=None) -> Iterator[dict]:
    """The month's FOCUS rows the user may see (of `tenant` when given), by tenant."""
    end = next_month(month)
    invoices = tenant_scoped(Invoice.objects.select_related("tenant"), user=user).filter(
        status__in=Invoice.LIVE
    )
    notes = tenant_scoped(CreditNote.objects.select_related("tenant", "invoice"), user=user)
    if tenant is not None:
        invoices, notes = invoices.filter(tenant=tenant), notes.filter(tenant=tenant)
    usage = invoices.filter(kind=Invoice.Kind.USAGE, period_start=month)
    purchases = invoices.filter(kind=Invoice.Kind.PURCHASE, issued_at__gte=month, issued_at__lt=end)
    invoices = list(usage.order_by("tenant__slug", "number").prefetch_related("lines"))
    tenant_ids = {invoice.tenant_id for invoice in invoices}
    rated = dict(
        RatedTenantMonth.objects.filter(tenant_id__in=tenant_ids, month_start=month).values_list(
            "tenant_id", "quantities"
        )
    )
    names = project_names(tenant_ids)
    for invoice in invoices:
        base = _base(invoice.tenant, month)
        lines = list(invoice.lines.all())
        quantities = quantities_of(rated.get(invoice.tenant_id) or [])
        for project, part in _project_lines(lines, quantities, invoice.currency):
            account = {
                "SubAccountId": f"{invoice.tenant.slug}/{names[project][0]}",
                "SubAccountName": names[project][1],
            }
            if part.kind == LineKind.RESERVATION and part.reservation_id is not None:
                for row in _reservation_rows(base, part, document=invoice.number, month=month):
                    yield {**row, **account}
            else:
                yield {
                    **_line_row(base, part, document=invoice.number, correction=False),
                    **account,
                }
    yield from _purchase_rows(purchases, month)
    yield from _credit_note_rows(notes.filter(issued_at__gte=month, issued_at__lt=end), month)


def _project_lines(lines: list, quantities: dict, currency: str):
    """(project id, the project's part of the line) for each line and each project it
    is charged to (billing.domain.chargeback): a usage line's part carries the project's
    quantity and its list amount split by quantity, to the cent."""
    split = [chargeback_line(line) for line in lines]
    splits = line_splits(lines=split, quantities=quantities, currency=currency)
    for line, read, parts in zip(lines, split, splits, strict=True):
        tokens = line_project_quantities(read, quantities) if line.kind == LineKind.USAGE else {}
        if set(tokens) != set(parts):
            tokens = {}
        list_parts = (
            split_money(amount=line.list_amount, weights=tokens, currency=currency)
            if tokens
            else {}
        )
        for project, amount in parts.items():
            part = copy(line)
            part.amount = amount
            if len(parts) > 1:
                part.list_amount = list_parts.get(project, amount)
                part.quantity = tokens.get(project, line.quantity)
            yield project, part


def _purchase_rows(purchases, month: datetime) -> Iterator[dict]:
    """A prepaid purchase's lines: one-time purchases, no effective cost of their own."""
    for invoice in purchases.order_by("tenant__slug", "number").prefetch_related("lines"):
        base = _base(invoice.tenant, month)
        for line in invoice.lines.all():
            yield {
                **base,
                "InvoiceId": invoice.number,
                "ChargeCategory": "Purchase",
                "ChargeFrequency": "One-Time",
                "ChargeDescription": line.description,
                "ChargePeriodStart": focus_time(invoice.period_start),
                "ChargePeriodEnd": focus_time(invoice.period_end),
                "PricingQuantity": Decimal(1),
                "PricingUnit": "Purchases",
                "ListUnitPrice": line.amount,
                "ContractedUnitPrice": line.amount,
                **_flat(line.amount),
                "EffectiveCost": Decimal(0),  # it covers future charges (effectivecost.md)
            }


def _credit_note_rows(notes, month: datetime) -> Iterator[dict]:
    """A credit note's lines: a netted month's as billed, else corrections of the invoiced
    period they credit."""
    for note in notes.order_by("tenant__slug", "number").prefetch_related("lines"):
        base = _base(note.tenant, month)
        if note.invoice is None:  # a netted month: its lines as billed
            for line in note.lines.all():
                yield _line_row(base, line, document=note.number, correction=False)
            continue
        period = note.invoice.period_start
        parts = [(line.description, line.amount) for line in note.lines.all()] or [
            (f"Credit on {note.invoice.number}: {note.get_reason_display().lower()}", note.total)
        ]
        for description, amount in parts:
            yield {
                **base,
                "InvoiceId": note.number,
                "ChargeCategory": "Credit",
                "ChargeClass": "Correction",  # it corrects an invoiced billing period
                "ChargeFrequency": "One-Time",
                "ChargeDescription": description,
                "ChargePeriodStart": focus_time(period),
                "ChargePeriodEnd": focus_time(note.invoice.period_end),
                "PricingQuantity": None,
                "PricingUnit": None,
                **_flat(-amount),
            }


def _cumulative(values: list, currency: str) -> list[Decimal]:
    """Exact amounts rounded so that they sum to their total rounded once: each the rounded
    running total less the one before."""
    rounded, total, before = [], Decimal(0), Decimal(0)
    for value in values:
        total += fraction_to_decimal(value)
        running = round_money(amount=total, currency=currency)
        rounded.append(running - before)
        before = running
    return rounded


def _reservation_rows(base: dict, line, *, document: str, month: datetime) -> Iterator[dict]:
    """A reservation's month per day (kpis.md 3d): its fees as a Purchase, the covered usage
    Used and the fees left Unused."""
    reservation = Reservation.objects.select_related("deployment").get(pk=line.reservation_id)
    currency = base["BillingCurrency"]
    days = by_day(reservation_utilization(reservation, start=month, end=next_month(month)))
    terms = terms_of(reservation)
    commitment = {
        "CommitmentDiscountId": f"reservation-{reservation.pk}",
        "CommitmentDiscountName": f"Reservation {reservation.pk} on {reservation.deployment.slug}",
        "CommitmentDiscountType": COMMITMENT_TYPE,
        "CommitmentDiscountCategory": "Usage",
        "CommitmentDiscountUnit": COMMITMENT_UNIT,
    }
    fees = _cumulative([day.fee for day in days], currency)
    used = _cumulative([day.covered_realized for day in days], currency)
    unused = _cumulative([day.unused for day in days], currency)
    zero = Decimal(0)
    for day, fee, realized, left in zip(days, fees, used, unused, strict=True):
        end = day.start + timedelta(days=1)
        gpu_hours = Decimal(sum(h.gpu_seconds for h in terms.hours(day.start, end)))
        period = {
            **base,
            **commitment,
            "InvoiceId": document,
            "ChargePeriodStart": focus_time(day.start),
            "ChargePeriodEnd": focus_time(end),
            "PricingQuantity": None,
            "PricingUnit": None,
        }
        yield {
            **period,
            "ChargeCategory": "Purchase",
            "ChargeFrequency": "Recurring",
            "ChargeDescription": line.description,
            "CommitmentDiscountQuantity": gpu_hours / SECONDS_PER_HOUR,
            "PricingQuantity": gpu_hours / SECONDS_PER_HOUR,
            "PricingUnit": COMMITMENT_UNIT,
            "ListUnitPrice": reservation.hourly_rate,
            "ContractedUnitPrice": reservation.hourly_rate,
            **_flat(fee),
            "EffectiveCost": zero,  # its fees are the Used and Unused rows' effective costs
        }
        yield {
            **period,
            "ChargeCategory": "Usage",
            "ChargeFrequency": "Usage-Based",
            "ChargeDescription": f"Usage covered by reservation {reservation.pk}",
            "CommitmentDiscountStatus": "Used",
            "ConsumedQuantity": Decimal(round(day.covered)),
            "ConsumedUnit": CONSUMED_UNIT,
            "PricingCategory": "Committed",
            "ListCost": zero, "ContractedCost": zero, "BilledCost": zero,
            "EffectiveCost": realized,
        }  # fmt: skip
        yield {
            **period,
            "ChargeCategory": "Usage",
            "ChargeFrequency": "Usage-Based",
            "ChargeDescription": f"Unused capacity of reservation {reservation.pk}",
            "CommitmentDiscountStatus": "Unused",
            "PricingCategory": "Committed",
            "ListCost": zero, "ContractedCost": zero, "BilledCost": zero,
            "EffectiveCost": left,
        }  # fmt: skip
