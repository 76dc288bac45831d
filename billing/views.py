"""Billing pages: price book, ledger, invoices (with PDF and CSV), price realization, SLA."""

from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from billing.charts import realization_chart, sla_history_chart, unsold_chart
from billing.models import Account, Invoice
from billing.selectors import (
    invoice_get,
    invoice_list,
    ledger_balances,
    ledger_postings,
    price_book_get,
    realization_get,
)
from billing.services.invoicing import InvoiceError, invoice_pay, invoice_void
from billing.services.sla import sla_figures_list
from metering.charts import usage_by_model_chart
from metering.selectors import usage_daily_by_model
from portal import clock
from portal.access import Capability, tenant_get, user_may, user_role, user_tenant
from portal.charts import figure_json
from portal.decorators import role_required
from portal.exports import csv_response
from portal.models import Role, Tenant
from portal.periods import PRESETS, month_start, months_before, period_from_preset

PAGE_SIZE = 50
INVOICE_CSV_HEADER = [
    "invoice", "kind", "description", "model", "token_class", "quantity", "list_unit_price",
    "list_amount", "discount", "amount", "currency",
]  # fmt: skip


def _csv_query(request) -> str:
    query = request.GET.copy()
    query.pop("page", None)  # the CSV holds every row of the filter, not one page
    query["format"] = "csv"
    return query.urlencode()


@role_required(Role.OPERATOR, Role.FINANCE)
def price_book(request):
    """List prices, contracts and promotions: what is in force now, scheduled, superseded."""
    return render(
        request,
        "billing/prices.html",
        {
            "title": "Price book and contracts",
            "book": price_book_get(at=clock.now(), user=request.user),
        },
    )


@role_required(Role.FINANCE)
def ledger(request):
    """Postings filtered by account, tenant and period, with the balances they add up to."""
    period, preset = period_from_preset(request.GET, default="90d")
    account = request.GET.get("account", "")
    tenant = request.GET.get("tenant", "")
    postings = ledger_postings(user=request.user, account=account, tenant=tenant, period=period)
    if request.GET.get("format") == "csv":
        return csv_response(
            filename=f"ledger-{period.start:%Y%m%d}-{period.end:%Y%m%d}.csv",
            header=[
                "transaction",
                "time",
                "kind",
                "memo",
                "tenant",
                "account",
                "amount",
                "currency",
            ],
            rows=(
                (
                    p.transaction_id,
                    p.transaction.occurred_at.isoformat(),
                    p.transaction.kind,
                    p.transaction.memo,
                    p.transaction.tenant.slug if p.transaction.tenant else "",
                    p.account.code,
                    p.amount,
                    p.currency,
                )
                for p in postings.iterator()
            ),
        )
    page = Paginator(postings, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "billing/ledger.html",
        {
            "title": "Ledger",
            "page": page,
            "balances": ledger_balances(postings=postings),
            "accounts": Account.objects.order_by("code"),
            "tenants": Tenant.objects.order_by("name"),
            "account": account,
            "tenant": tenant,
            "period": period,
            "preset": preset,
            "presets": PRESETS,
            "csv_query": _csv_query(request),
        },
    )


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def invoices(request):
    """Invoices, newest month first; tenants see their own."""
    status = request.GET.get("status", "")
    tenant = request.GET.get("tenant", "")
    rows = invoice_list(user=request.user, status=status, tenant=tenant)
    if request.GET.get("format") == "csv":
        return csv_response(
            filename="invoices.csv",
            header=["number", "tenant", "month", "status", "total", "currency", "issued_at"],
            rows=(
                (
                    i.number or "",
                    i.tenant.slug,
                    f"{i.period_start:%Y-%m}",
                    i.status,
                    i.total,
                    i.currency,
                    i.issued_at.isoformat() if i.issued_at else "",
                )
                for i in rows
            ),
        )
    is_member = user_role(request.user) is Role.TENANT
    return render(
        request,
        "billing/invoices.html",
        {
            "title": "Invoices",
            "page": Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page")),
            "statuses": Invoice.Status.choices,
            "status": status,
            "tenant": tenant,
            "is_member": is_member,
            "tenants": [] if is_member else Tenant.objects.order_by("name"),
            "csv_query": _csv_query(request),
        },
    )


def _document_context(invoice: Invoice) -> dict:
    lines = list(invoice.lines.all())
    return {
        "invoice": invoice,
        "lines": lines,
        "list_total": sum(line.list_amount for line in lines),
        "discount_total": sum(line.discount for line in lines),
        "issuer": settings.FACTORY_NAME,
    }


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def invoice_detail(request, pk: int):
    invoice = invoice_get(user=request.user, pk=pk)
    return render(
        request,
        "billing/invoice.html",
        {
            "title": f"Invoice {invoice.number or '(draft)'}",
            "may_act": user_may(request.user, Capability.WRITE_COMMERCIAL),
            **_document_context(invoice),
        },
    )


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def invoice_pdf(request, pk: int):
    """The invoice as PDF, rendered by WeasyPrint from the same HTML document."""
    from weasyprint import HTML

    invoice = invoice_get(user=request.user, pk=pk)
    html = render_to_string("billing/invoice_document.html", _document_context(invoice))
    pdf = HTML(string=html, base_url=request.build_absolute_uri("/")).write_pdf()
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


@role_required(Role.FINANCE)
def realization(request):
    """Price realization by tenant and model, and unsold tokens by reason."""
    period, preset = period_from_preset(request.GET)
    result = realization_get(period=period, user=request.user)
    currency = settings.FACTORY_CURRENCY
    return render(
        request,
        "billing/realization.html",
        {
            "title": "Price realization",
            "result": result,
            "unsold_totals": result.unsold_by_reason(),
            "unsold_total": sum(result.unsold_by_reason().values()),
            "period": period,
            "preset": preset,
            "presets": PRESETS,
            "chart": figure_json(realization_chart(result.rows, currency=currency))
            if result.rows
            else None,
            "unsold_chart": figure_json(unsold_chart(result.unsold)) if result.unsold else None,
        },
    )


SLA_MONTHS = 6  # months of history on the SLA page


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def sla(request):
    """SLA attainment against target per month, the incidents behind it, and credits. A
    member sees their tenant; staff pick a month (all tenants) or a tenant (its history)."""
    is_member = user_role(request.user) is Role.TENANT
    slug = request.GET.get("tenant", "")
    tenant = (
        user_tenant(request.user)
        if is_member
        else (tenant_get(user=request.user, slug=slug) if slug else None)
    )
    this_month = month_start(clock.now())
    context = {"title": "SLA", "is_member": is_member, "tenant": tenant}
    if tenant is not None:
        months = [months_before(this_month, n) for n in range(SLA_MONTHS - 1, -1, -1)]
        history = [sla_figures_list(month_start=m, tenants=[tenant])[0] for m in months]
        incidents = {i.pk: i for f in history for i in f.sla.incidents}
        context |= {
            "history": history[::-1],
            "incidents": sorted(incidents.values(), key=lambda i: i.started_at, reverse=True),
            "chart": figure_json(sla_history_chart(history)),
        }
    else:
        month = _month_param(request.GET.get("month"), default=this_month)
        context |= {
            "month": month,
            "months": [months_before(this_month, n) for n in range(SLA_MONTHS)],
            "rows": sla_figures_list(month_start=month, user=request.user),
        }
    context["tenants"] = [] if is_member else Tenant.objects.order_by("name")
    return render(request, "billing/sla.html", context)


def _month_param(value: str | None, *, default):
    try:
        return datetime.strptime(value or "", "%Y-%m").replace(tzinfo=UTC)
    except ValueError:
        return default


@role_required(Role.TENANT)
def tenant_home(request):
    """A member's front page: usage by model and day, SLA attainment against target, the
    incidents that touched them, their invoices and API tokens."""
    tenant = user_tenant(request.user)
    period, _ = period_from_preset({})
    rows = usage_daily_by_model(user=request.user, period=period)
    this_month = month_start(clock.now())
    sla_rows = [
        sla_figures_list(month_start=months_before(this_month, n), tenants=[tenant])[0]
        for n in range(3)
    ]
    incidents = {i.pk: i for f in sla_rows for i in f.sla.incidents}
    return render(
        request,
        "billing/tenant_home.html",
        {
            "title": tenant.name,
            "tenant": tenant,
            "totals": {
                key: sum(r[key] for r in rows)
                for key in ("requests", "errors", "input_tokens", "output_tokens")
            },
            "chart": figure_json(usage_by_model_chart(rows)) if rows else None,
            "sla_rows": sla_rows,
            "current": sla_rows[0],
            "incidents": sorted(incidents.values(), key=lambda i: i.started_at, reverse=True),
            "invoices": invoice_list(user=request.user)[:6],
            "open_total": sum(
                (i.total for i in invoice_list(user=request.user, status=Invoice.Status.ISSUED)),
                Decimal(0),
            ),
        },
    )
