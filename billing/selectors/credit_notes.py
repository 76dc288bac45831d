"""Credit note reads, scoped to what the user may see."""

from __future__ import annotations

from django.db.models import QuerySet

from billing.models import CreditNote
from portal.access import tenant_scoped


def credit_note_list(*, user) -> QuerySet[CreditNote]:
    """The credit notes the user may see (tenants their own), newest first."""
    return tenant_scoped(
        CreditNote.objects.select_related("tenant", "invoice").prefetch_related("lines"),
        user=user,
    ).order_by("-issued_at", "-number")
