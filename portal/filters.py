"""The kernel of the FilterSets that pages and the API share (one per resource, in each
app's filters.py): the tenant filter, and one way to refuse a bad filter value.

`?tenant=<slug>` names a tenant the asker may see, or the answer is 404, whoever asks and
on every list (never an empty page, which would say the tenant exists). An unknown value of
any other filter is a 400 naming the filter. `?ordering=<column>` (or `-<column>`) sorts a
list by one of its table's columns, the same on its page, its CSV and its API.
"""

from collections.abc import Sequence

import django_filters
from django.core.exceptions import ValidationError
from django.db.models import F, QuerySet

from portal.access import tenant_get
from portal.models import AuditEntry, Tenant


class TenantFilter(django_filters.CharFilter):
    """Rows of the tenant named by slug; 404 for a tenant the user may not see."""

    def __init__(self, *, field_name: str = "tenant", **kwargs) -> None:
        kwargs.setdefault("help_text", "tenant slug (404 for a tenant you may not see)")
        super().__init__(field_name=field_name, **kwargs)

    def filter(self, qs: QuerySet, value: str) -> QuerySet:
        if not value:
            return qs
        return qs.filter(**{self.field_name: tenant_get(user=self.parent.user, slug=value)})


class Ordering(django_filters.OrderingFilter):
    """`?ordering=<column>`, or `-<column>` for descending: the list sorted by that column of
    its table (`fields`: {model path: column}), empty values last either way (so on both
    backends); ties keep the list's own order, then its ids, so a page never reshuffles its
    rows between requests. The page's column headers link to it (`{% sort_header %}`)."""

    def __init__(self, *, fields: dict[str, str], **kwargs) -> None:
        columns = ", ".join(fields.values())
        kwargs.setdefault("help_text", f"a column to sort by, `-column` descending: {columns}")
        super().__init__(fields=fields, **kwargs)

    def filter(self, qs: QuerySet, value) -> QuerySet:
        if not value:
            return qs
        keys = []
        for param in filter(None, value):  # `?ordering=,,` names no column: empty terms skipped
            column = F(self.param_map[param.removeprefix("-")])
            descending = param.startswith("-")
            keys.append(column.desc(nulls_last=True) if descending else column.asc(nulls_last=True))
        then = qs.query.order_by or qs.model._meta.ordering
        return qs.order_by(*keys, *then, "pk")


def rows_ordered(rows: list[dict], ordering: str | None, *, columns: Sequence[str]) -> list[dict]:
    """`?ordering=` for a list made in Python (rows that are no queryset, as the usage page's
    sums by day and model), by the rule of `Ordering`: one of `columns`, or `-column`
    descending; empty values last; ties in the list's own order. Another value is refused,
    naming `ordering`, as the FilterSets refuse it."""
    if not ordering:
        return rows
    column = ordering.removeprefix("-")
    if column not in columns:
        choices = ", ".join(columns)
        raise ValidationError({"ordering": [f"unknown column {ordering!r}: one of {choices}"]})
    present = [row for row in rows if row[column] is not None]
    present.sort(key=lambda row: row[column], reverse=ordering.startswith("-"))  # stable
    return present + [row for row in rows if row[column] is None]


class PortalFilterSet(django_filters.FilterSet):
    """A FilterSet that knows who asks (the API passes the request, pages the user)."""

    def __init__(self, data=None, queryset=None, *, request=None, user=None, **kwargs) -> None:
        super().__init__(data, queryset, request=request, **kwargs)
        self.user = user if user is not None else getattr(request, "user", None)

    @classmethod
    def apply(cls, data, *, queryset: QuerySet, user) -> QuerySet:
        """The filtered rows, for a page or a selector; ValidationError (a 400 naming the
        field) for a value the filter does not know."""
        filterset = cls(data, queryset=queryset, user=user)
        if not filterset.is_valid():
            raise ValidationError(
                {field: list(messages) for field, messages in filterset.errors.items()}
            )
        return filterset.qs


class TenantFilterSet(PortalFilterSet):
    class Meta:
        model = Tenant
        fields = ["status"]


class AuditEntryFilterSet(PortalFilterSet):
    ordering = Ordering(fields={"at": "at", "actor__username": "actor", "action": "action"})

    class Meta:
        model = AuditEntry
        fields = ["action", "object_type", "object_id"]
