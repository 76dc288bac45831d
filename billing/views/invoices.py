"""Invoice pages: the list, an invoice, its PDF and CSV, and finance's pay and void."""

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from billing.domain.invoices import InvoiceError
from billing.domain.rating.types import LineKind
from billing.models import CreditNote, Invoice
from billing.selectors.invoices import (
    invoice_get,
    invoice_list,
    invoice_outstanding,
    invoice_void_refusal,
)
from billing.selectors.month_to_date import allowance_used
from billing.selectors.pricing import contract_in_force
from billing.selectors.receivables import days_overdue
from billing.services.invoices.collect import invoice_pay
from billing.services.invoices.issue import invoice_void
from portal import clock
from portal.access import Capability, user_may, user_role
from portal.decorators import role_required
from portal.errors import FieldError
from portal.exports import csv_response, export_query, list_csv
from portal.models import Role, Tenant
from portal.pager import pager_page
from portal.pdf import pdf_render
from portal.periods import month_start, months_before

INVOICE_CSV_HEADER = [
    "invoice", "kind", "description", "model", "token_class", "price_class", "quantity",
    "list_unit_price", "list_amount", "discount", "amount", "currency",
]  # fmt: skip


INVOICES_CSV_HEADER = [
    "number", "tenant", "month", "status", "total", "currency", "issued_at", "due_at",
    "paid_at", "is_overdue",
]  # fmt: skip


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def invoices(request):
    """Invoices, newest month first; tenants see their own."""
    status = request.GET.get("status", "")
    tenant = request.GET.get("tenant", "")
    rows = invoice_list(user=request.user, filters=request.GET)
    now = clock.now()
    if request.GET.get("format") == "csv":
        return list_csv(
            name="invoices",
            header=INVOICES_CSV_HEADER,
            rows=(
                (
                    i.number or "",
                    i.tenant.slug,
                    f"{i.period_start:%Y-%m}",
                    i.status,
                    i.total,
                    i.currency,
                    i.issued_at.isoformat() if i.issued_at else "",
                    i.due_at.isoformat() if i.due_at else "",
                    i.paid_at.isoformat() if i.paid_at else "",
                    "true" if i.is_overdue(now=now) else "false",
                )
                for i in rows
            ),
        )
    is_member = user_role(request.user) is Role.TENANT
    page = pager_page(request, rows)
    return render(
        request,
        "billing/invoices/invoices.html",
        {
            "title": "Invoices",
            "page": page,
            "overdue": {i.pk for i in page if i.is_overdue(now=now)},
            "statuses": Invoice.Status.choices,
            "status": status,
            "tenant": tenant,
            "is_member": is_member,
            "tenants": [] if is_member else Tenant.objects.order_by("name"),
            "csv_query": export_query(request),
            "focus_month": months_before(month_start(now), 1),
        },
    )


# What a balance paid of an invoice (a credit note settled to the tenant's balance, a
# prepaid purchase): settlement of what the usage charged, shown after its subtotal, never
# among its discounts.
SETTLEMENT_KINDS = (LineKind.CREDIT, LineKind.PREPAID)


def _document_context(invoice: Invoice) -> dict:
    lines = [line for line in invoice.lines.all() if line.kind not in SETTLEMENT_KINDS]
    settled = [line for line in invoice.lines.all() if line.kind in SETTLEMENT_KINDS]
    if invoice.due_at and invoice.issued_at:
        terms_days = (invoice.due_at - invoice.issued_at).days
    else:
        terms = contract_in_force(tenant=invoice.tenant, when=invoice.period_last_day)
        terms_days = terms.payment_terms_days if terms else 30
    return {
        "invoice": invoice,
        "lines": lines,
        "settled": settled,
        "list_total": sum(line.list_amount for line in lines),
        "discount_total": sum(line.discount for line in lines),
        "charged_total": sum(line.amount for line in lines),
        "issuer": {"name": settings.FACTORY_NAME, "address": settings.FACTORY_ADDRESS},
        "terms_days": terms_days,
        "is_overdue": invoice.is_overdue(now=clock.now()),
        "allowance": _allowance(invoice),
    }


def _allowance(invoice: Invoice) -> dict | None:
    """The free allowance of a usage invoice's month and how much of it the month used."""
    if invoice.kind != Invoice.Kind.USAGE:
        return None
    terms = contract_in_force(tenant=invoice.tenant, when=invoice.period_start)
    if terms is None or not terms.free_tokens_per_month:
        return None
    used = allowance_used(tenant=invoice.tenant, month=invoice.period_start)
    return {"tokens": terms.free_tokens_per_month, "used": used}


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def invoice_detail(request, pk: int, *, credit_posted=None, credit_error: FieldError | None = None):
    """The invoice, its credit notes and the forms that act on it; a credit note refused is
    answered here (a 400), the message beside the form, what was typed kept."""
    invoice = invoice_get(user=request.user, pk=pk)
    notes = list(invoice.credit_notes.order_by("issued_at"))
    outstanding = invoice_outstanding(invoice=invoice)
    return render(
        request,
        "billing/invoices/invoice.html",
        {
            "credit_posted": credit_posted or {},
            "credit_error": credit_error,
            "title": f"Invoice {invoice.number or '(draft)'}",
            "may_act": user_may(request.user, Capability.WRITE_COMMERCIAL),
            "credit_notes": notes,
            "credited": sum((note.total for note in notes), 0),
            "outstanding": outstanding,
            "days_overdue": days_overdue(
                invoice=invoice, outstanding=outstanding, today=clock.now().date()
            ),
            "void_refusal": invoice.status == Invoice.Status.ISSUED
            and invoice_void_refusal(invoice=invoice),
            "reasons": CreditNote.Reason.choices,
            "settlements": CreditNote.Settle.choices,
            **_document_context(invoice),
        },
        status=400 if credit_error else 200,
    )


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def invoice_pdf(request, pk: int):
    """The invoice as PDF, rendered by WeasyPrint from the same HTML document."""
    invoice = invoice_get(user=request.user, pk=pk)
    html = render_to_string(
        "billing/invoices/invoice_document.html", {**_document_context(invoice), "compact": True}
    )
    pdf = pdf_render(html=html, base_url=request.build_absolute_uri("/"))
    response = HttpResponse(pdf, content_type="application/pdf")
    name = invoice.number or f"draft-{invoice.pk}"
    response["Content-Disposition"] = f'inline; filename="{name}.pdf"'
    return response


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def invoice_csv(request, pk: int):
    invoice = invoice_get(user=request.user, pk=pk)
    return csv_response(
        filename=f"{invoice.number or f'draft-{invoice.pk}'}.csv",
        header=INVOICE_CSV_HEADER,
        rows=(
            (
                invoice.number or "",
                line.kind,
                line.description,
                line.model,
                line.token_class,
                line.price_class,
                line.quantity,
                line.list_unit_price if line.list_unit_price is not None else "",
                line.list_amount,
                line.discount,
                line.amount,
                invoice.currency,
            )
            for line in invoice.lines.all()
        ),
    )


@require_POST
@role_required(Role.OPERATOR, Role.FINANCE)
def invoice_action(request, pk: int, action: str):
    """Record a payment or void an issued invoice from its page."""
    invoice = invoice_get(user=request.user, pk=pk)
    try:
        if action == "pay":
            invoice_pay(invoice=invoice, by=request.user)
            messages.success(request, f"Payment of {invoice.number} recorded.")
        else:
            invoice_void(invoice=invoice, by=request.user, reason=request.POST.get("reason", ""))
            messages.success(request, f"{invoice.number} voided; its ledger entry is reversed.")
    except InvoiceError as error:
        messages.error(request, str(error))
    return redirect("invoice-page", pk=invoice.pk)
