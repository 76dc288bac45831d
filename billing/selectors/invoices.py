"""Invoice reads, scoped to what the user may see."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from billing.filters import InvoiceFilterSet
from billing.models import Invoice
from portal.access import tenant_scoped


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
