"""The audit log's read: its entries as the page and the API list them (newest first),
filtered by AuditEntryFilterSet (action, object type, object id)."""

from collections.abc import Iterable

from django.db.models import QuerySet

from portal.filters import AuditEntryFilterSet
from portal.models import AuditEntry, Tenant


def audit_list(*, user, filters=None) -> QuerySet[AuditEntry]:
    entries = AuditEntry.objects.select_related("actor")
    if filters:
        entries = AuditEntryFilterSet.apply(filters, queryset=entries, user=user)
    return entries


def audit_tenants_named(entries: Iterable[AuditEntry]) -> list[AuditEntry]:
    """`entries`, each holding `tenant_names`: the names of the tenants their records refer
    to by id (a rule's "tenant": 1 reads "Acme Robotics"), in one query for a page."""
    entries = list(entries)
    ids = {
        value
        for entry in entries
        for record in (entry.before, entry.after)
        if isinstance(record, dict) and isinstance(value := record.get("tenant"), int)
    }
    names = dict(Tenant.objects.filter(pk__in=ids).values_list("pk", "name")) if ids else {}
    for entry in entries:
        entry.tenant_names = names
    return entries
