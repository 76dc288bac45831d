"""The audit log's read: its entries as the page and the API list them (newest first),
filtered by AuditEntryFilterSet (action, object type, object id)."""

from django.db.models import QuerySet

from portal.filters import AuditEntryFilterSet
from portal.models import AuditEntry


def audit_list(*, user, filters=None) -> QuerySet[AuditEntry]:
    entries = AuditEntry.objects.select_related("actor")
    if filters:
        entries = AuditEntryFilterSet.apply(filters, queryset=entries, user=user)
    return entries
