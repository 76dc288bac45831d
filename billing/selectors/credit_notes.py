"""Credit note reads, scoped to what the user may see."""

from __future__ import annotations

from django.db.models import QuerySet

from billing.filters import CreditNoteFilterSet
from billing.models import CreditNote
from portal.access import tenant_scoped


def credit_note_list(*, user, filters=None) -> QuerySet[CreditNote]:
    """The credit notes the user may see (tenants their own), newest first; `filters`:
    CreditNoteFilterSet's query (tenant, reason, number, ordering), as the page and the API take it."""
    notes = tenant_scoped(
        CreditNote.objects.select_related("tenant", "invoice").prefetch_related("lines"),
        user=user,
    ).order_by("-issued_at", "-number")
    if filters:  # its `ordering` sorts by a column first, this order after
        notes = CreditNoteFilterSet.apply(filters, queryset=notes, user=user)
    return notes
