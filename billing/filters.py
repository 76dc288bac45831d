"""billing's FilterSets, one per resource, shared by its pages and its API."""

import django_filters

from billing.models import (
    Contract,
    CreditNote,
    Invoice,
    LedgerTransaction,
    Posting,
    Price,
    PromotionalCredit,
)
from portal.filters import PortalFilterSet, TenantFilter


class PriceFilterSet(PortalFilterSet):
    model = django_filters.CharFilter(field_name="model__slug", help_text="served model slug")

    class Meta:
        model = Price
        fields = ["model", "token_class"]


class ContractFilterSet(PortalFilterSet):
    tenant = TenantFilter()

    class Meta:
        model = Contract
        fields = ["tenant", "kind"]


class PromotionFilterSet(PortalFilterSet):
    tenant = TenantFilter()

    class Meta:
        model = PromotionalCredit
        fields = ["tenant"]


class InvoiceFilterSet(PortalFilterSet):
    tenant = TenantFilter()

    class Meta:
        model = Invoice
        fields = ["tenant", "status", "number"]


class CreditNoteFilterSet(PortalFilterSet):
    tenant = TenantFilter()

    class Meta:
        model = CreditNote
        fields = ["tenant", "reason", "number"]


class PostingFilterSet(PortalFilterSet):
    tenant = TenantFilter(field_name="transaction__tenant")
    account = django_filters.CharFilter(field_name="account__code", help_text="account code")
    kind = django_filters.ChoiceFilter(
        field_name="transaction__kind", choices=LedgerTransaction.Kind.choices
    )

    class Meta:
        model = Posting
        fields = ["tenant", "account", "kind"]
