"""Month-end close pages (finance and operators): the months and their close, a month's
close report (page and PDF), aged receivables; credit notes (page, PDF, CSV; tenants their
own) and issuing one from an invoice's page; a tenant's credit and prepaid balances."""

from datetime import datetime

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST

from billing.domain.receivables import BUCKET_LABELS, BUCKETS
from billing.selectors.balances import (
    balance_movements,
    credit_balance,
    prepaid_list,
    prepaid_remaining,
    tenant_balances,
)
from billing.selectors.close import close_months, close_report, month_close_state
from billing.selectors.credit_notes import credit_note_list
from billing.selectors.invoices import invoice_get
from billing.selectors.receivables import aged_receivables
from billing.services.close import CloseError, close_check
from billing.services.credit_notes import credit_note_issue
from billing.services.prepaid import prepaid_purchase
from billing.tasks import close_task
from billing.views.invoices import invoice_detail
from portal import clock
from portal.access import Capability, tenant_get, user_may, user_role, user_tenant
from portal.decorators import role_required
from portal.errors import FieldError
from portal.exports import csv_response, export_query, list_csv
from portal.models import Role, Tenant
from portal.money import money_str
from portal.pager import pager_page
from portal.pdf import pdf_render
from portal.periods import day_parse, instant_parse, month_parse, months_before
from portal.periods import month_start as month_of

BOOKS = (Role.OPERATOR, Role.FINANCE)
CREDIT_NOTE_CSV_HEADER = [
    "credit_note", "invoice", "tenant", "month", "reason", "settle", "line", "kind",
    "description", "amount", "currency", "issued_at",
]  # fmt: skip


def _money(amount) -> str:
    return money_str(amount=amount, currency=settings.FACTORY_CURRENCY)


def _month(value: str) -> datetime:
    try:
        return month_parse(value)
    except FieldError:
        raise Http404("No such month.") from None


@role_required(*BOOKS)
def close_index(request, *, posted: str | None = None, error: str = "", status: int = 200):
    """Every month with a close or invoices, with its status; close a month from here (POST:
    a refused month is answered here, the message beside the field, the month kept)."""
    if request.method == "POST" and posted is None:
        return _close_start(request)
    last = months_before(month_of(clock.now()), 1)
    last_status, _ = month_close_state(last)
    if posted is None:  # last month, unless it is closed already: nothing to close then
        posted = "" if last_status == "closed" else f"{last:%Y-%m}"
    return render(
        request,
        "billing/close/index.html",
        {
            "title": "Month-end close",
            "months": close_months(),
            "last_month": last,
            "last_closed": last_status == "closed",
            "month_value": posted,
            "month_error": error,
            "may_close": user_may(request.user, Capability.WRITE_COMMERCIAL),
        },
        status=status,
    )


def _close_start(request):
    """Queue the close of a month that is over (or resume it); the close job does the work.
    The month is refused as the API refuses it (a 400 naming `month`)."""
    if not user_may(request.user, Capability.WRITE_COMMERCIAL):
        raise PermissionDenied("Your role may not close a month.")
    posted = request.POST.get("month", "")
    try:
        month = close_check(month_parse(posted))
    except (FieldError, CloseError) as refused:
        message = refused.api_errors()[0]["message"]
        return close_index(request, posted=posted, error=message, status=400)
    report = reverse("close-month-page", kwargs={"month": f"{month:%Y-%m}"})
    status, close = month_close_state(month)
    if status == "closed":  # nothing to queue: say when, and show its report
        when = (
            f" on {close.finished_at:%-d %b %Y at %H:%M} UTC" if close and close.finished_at else ""
        )
        messages.info(request, f"{month:%B %Y} is closed{when}: here is its report.")
        return redirect(report)
    close_task.apply_async(kwargs={"month": f"{month:%Y-%m}"})
    messages.success(request, f"The close of {month:%Y-%m} is queued; this page shows its steps.")
    return redirect(f"{report}?queued=1")


def _report_context(month: datetime) -> dict:
    report = close_report(month=month)
    return {
        "report": report,
        "currency": settings.FACTORY_CURRENCY,
        "issuer": {"name": settings.FACTORY_NAME, "address": settings.FACTORY_ADDRESS},
        "debits": sum((d for _, d, _ in report.trial_balance), 0),
        "credits": sum((c for _, _, c in report.trial_balance), 0),
        "revenue_rows": [
            (
                code,
                report.ledger_revenue.get(code, 0),
                report.document_revenue.get(code, 0),
                report.revenue_difference.get(code),
            )
            for code in sorted(set(report.ledger_revenue) | set(report.document_revenue))
        ],
        "ledger_total": sum(report.ledger_revenue.values(), 0),
        "document_total": sum(report.document_revenue.values(), 0),
    }


@role_required(*BOOKS)
def close_month(request, month: str):
    """A month's close report. While its close runs, or after it was queued from here
    (`queued`), the page follows it (ui.md, Long work): it reloads its report every two
    seconds until the close ends, or stops with its error."""
    start = _month(month)
    context = _report_context(start)
    report = context["report"]
    close = report.close
    following = report.status != "closed" and (
        (close is not None and close.finished_at is None and not close.error)
        or "queued" in request.GET
    )
    return render(
        request,
        "billing/close/month.html",
        {"title": f"Close of {start:%B %Y}", "following": following, **context},
    )


@role_required(*BOOKS)
def close_pdf(request, month: str):
    start = _month(month)
    html = render_to_string("billing/close/report_document.html", _report_context(start))
    pdf = pdf_render(html=html, base_url=request.build_absolute_uri("/"))
    response = HttpResponse(pdf, content_type="application/pdf")
    response["Content-Disposition"] = f'inline; filename="close-{start:%Y-%m}.pdf"'
    return response


@role_required(*BOOKS)
def receivables(request):
    """Aged receivables as of a day (default today); a day that is not one is a 400 naming
    `as_of` (the page and its CSV, as the API), never today's figures in its place."""
    value = request.GET.get("as_of", "")
    as_of = day_parse(value, field="as_of") if value else clock.now().date()
    rows = aged_receivables(user=request.user, as_of=as_of)
    totals = {b: sum((row.buckets[b] for row in rows), 0) for b in BUCKETS}
    if request.GET.get("format") == "csv":
        return csv_response(
            filename=f"receivables-{as_of}.csv",
            header=["tenant", *BUCKETS, "total", "currency"],
            rows=(
                (
                    row.tenant.slug,
                    *(_money(row.buckets[b]) for b in BUCKETS),
                    _money(row.total),
                    settings.FACTORY_CURRENCY,
                )
                for row in rows
            ),
        )
    return render(
        request,
        "billing/close/receivables.html",
        {
            "title": "Aged receivables",
            "as_of": as_of,
            "rows": rows,
            "buckets": [(b, BUCKET_LABELS[b]) for b in BUCKETS],
            "bucket_labels": BUCKET_LABELS,
            "totals": totals,
            "grand_total": sum(totals.values(), 0),
            "currency": settings.FACTORY_CURRENCY,
        },
    )


CREDIT_NOTES_CSV_HEADER = [
    "number", "invoice", "tenant", "month", "reason", "settle", "issued_at", "total", "currency",
]  # fmt: skip


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def credit_notes(request):
    """Credit notes, newest first (tenants their own), and a CSV of every row shown."""
    notes = credit_note_list(user=request.user, filters=request.GET)
    if request.GET.get("format") == "csv":
        return list_csv(
            name="credit-notes", header=CREDIT_NOTES_CSV_HEADER, rows=map(_note_csv, notes)
        )
    return render(
        request,
        "billing/close/credit_notes.html",
        {
            "title": "Credit notes",
            "page": pager_page(request, notes),
            "csv_query": export_query(request),
        },
    )


def _note_csv(note) -> tuple:
    """A credit note as the list's CSV writes it (CREDIT_NOTES_CSV_HEADER)."""
    invoice = note.invoice.number if note.invoice else ""
    return (note.number, invoice, note.tenant.slug, f"{note.period_start:%Y-%m}", note.reason,
            note.settle, note.issued_at.isoformat(), note.total, note.currency)  # fmt: skip


def _note(request, pk: int):
    note = credit_note_list(user=request.user).filter(pk=pk).first()
    if note is None:
        raise Http404("No such credit note.")
    return note


def _note_context(note) -> dict:
    return {
        "note": note,
        "lines": list(note.lines.all()),
        "issuer": {"name": settings.FACTORY_NAME, "address": settings.FACTORY_ADDRESS},
    }


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def credit_note_detail(request, pk: int):
    note = _note(request, pk)
    return render(
        request,
        "billing/close/credit_note.html",
        {"title": f"Credit note {note.number}", **_note_context(note)},
    )


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def credit_note_pdf(request, pk: int):
    note = _note(request, pk)
    html = render_to_string("billing/close/credit_note_document.html", _note_context(note))
    pdf = pdf_render(html=html, base_url=request.build_absolute_uri("/"))
    response = HttpResponse(pdf, content_type="application/pdf")
    response["Content-Disposition"] = f'inline; filename="{note.number}.pdf"'
    return response


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def credit_note_csv(request, pk: int):
    note = _note(request, pk)
    lines = list(note.lines.all()) or [None]
    return csv_response(
        filename=f"{note.number}.csv",
        header=CREDIT_NOTE_CSV_HEADER,
        rows=(
            (
                note.number,
                note.invoice.number if note.invoice else "",
                note.tenant.slug,
                f"{note.period_start:%Y-%m}",
                note.reason,
                note.settle,
                line.invoice_line_id if line and line.invoice_line_id else "",
                line.kind if line else "",
                line.description if line else "Credit",
                line.amount if line else note.total,
                note.currency,
                note.issued_at.isoformat(),
            )
            for line in lines
        ),
    )


@require_POST
@role_required(Role.OPERATOR, Role.FINANCE)
def invoice_credit(request, pk: int):
    """Credit an invoice for an amount from its page (parts of lines: the API)."""
    invoice = invoice_get(user=request.user, pk=pk)
    try:
        note = credit_note_issue(
            invoice=invoice,
            reason=request.POST.get("reason", ""),
            settle=request.POST.get("settle", ""),
            amount=request.POST.get("amount", ""),
            memo=request.POST.get("memo", ""),
            by=request.user,
        )
    except FieldError as error:
        return invoice_detail(request, pk, credit_posted=request.POST, credit_error=error)
    messages.success(request, f"{note.number} issued on {invoice.number}.")
    return redirect("credit-note-page", pk=note.pk)


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def balances(request):
    """A tenant's credit and prepaid balances with their movements; finance records a
    prepaid purchase here."""
    is_member = user_role(request.user) is Role.TENANT
    slug = request.GET.get("tenant", "")
    tenant = user_tenant(request.user) if is_member else None
    if not is_member and slug:
        tenant = tenant_get(user=request.user, slug=slug)
    error = None
    if request.method == "POST" and tenant and user_may(request.user, Capability.WRITE_COMMERCIAL):
        try:
            balance = prepaid_purchase(
                tenant=tenant,
                amount=request.POST.get("amount", ""),
                expires_at=instant_parse(request.POST.get("expires_at", ""), "expires_at"),
                by=request.user,
            )
        except FieldError as refused:
            error = refused  # answered below (a 400), beside the form, what was typed kept
        else:
            messages.success(request, f"Prepaid purchase invoiced as {balance.invoice.number}.")
            return redirect(f"{request.path}?tenant={tenant.slug}")
    prepaid = [(b, prepaid_remaining(b)) for b in prepaid_list(tenant=tenant)] if tenant else []
    tenants = [] if is_member else list(Tenant.objects.order_by("name"))
    return render(
        request,
        "billing/close/balances.html",
        {
            "title": "Balances",
            "tenant": tenant,
            "is_member": is_member,
            "tenants": tenants,
            # Before one is chosen: every tenant's balances, each opening its own.
            "every_tenant": [] if tenant or is_member else tenant_balances(tenants=tenants),
            "credit": credit_balance(tenant=tenant) if tenant else None,
            "prepaid": prepaid,
            "prepaid_left": sum((left for _, left in prepaid), 0),
            "movements": balance_movements(tenant=tenant) if tenant else [],
            "may_buy": user_may(request.user, Capability.WRITE_COMMERCIAL),
            "currency": settings.FACTORY_CURRENCY,
            "posted": request.POST if error else {},
            "error": error,
        },
        status=400 if error else 200,
    )
