"""billing's FilterSets, one per resource, shared by its pages and its API."""

import django_filters

from billing.models import (
    SERVICE_TIER_CHOICES,
    Contract,
    CreditNote,
    Invoice,
    LedgerTransaction,
    Posting,
    Price,
    PromotionalCredit,
    Reservation,
)
from metering.selectors.factory import served_model_list
from portal.filters import Ordering, PortalFilterSet, TenantFilter


class PriceFilterSet(PortalFilterSet):
    model = django_filters.ModelChoiceFilter(
        queryset=served_model_list(), to_field_name="slug", help_text="served model slug"
    )
    tier = django_filters.ChoiceFilter(
        field_name="service_tier", choices=SERVICE_TIER_CHOICES, help_text="service tier"
    )

    class Meta:
        model = Price
        fields = ["model", "tier", "token_class"]


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


class ReservationFilterSet(PortalFilterSet):
    tenant = TenantFilter()

    class Meta:
        model = Reservation
        fields = ["tenant"]


class InvoiceFilterSet(PortalFilterSet):
    tenant = TenantFilter()
    ordering = Ordering(
        fields={"number": "number", "tenant__name": "tenant", "period_start": "month",
                "status": "status", "total": "total", "issued_at": "issued_at",
                "due_at": "due_at", "paid_at": "paid_at"},
    )  # fmt: skip

    class Meta:
        model = Invoice
        fields = ["tenant", "status", "number"]


class CreditNoteFilterSet(PortalFilterSet):
    tenant = TenantFilter()
    ordering = Ordering(
        fields={"number": "number", "invoice__number": "invoice", "tenant__slug": "tenant",
                "period_start": "month", "reason": "reason", "settle": "settle",
                "issued_at": "issued_at", "total": "total"},
    )  # fmt: skip

    class Meta:
        model = CreditNote
        fields = ["tenant", "reason", "number"]


class PostingFilterSet(PortalFilterSet):
    tenant = TenantFilter(field_name="transaction__tenant")
    account = django_filters.CharFilter(field_name="account__code", help_text="account code")
    kind = django_filters.ChoiceFilter(
        field_name="transaction__kind", choices=LedgerTransaction.Kind.choices
    )
    ordering = Ordering(
        fields={"transaction_id": "transaction", "transaction__accounting_date": "accounting_date",
                "transaction__occurred_at": "occurred_at", "transaction__kind": "kind",
                "transaction__memo": "memo", "transaction__tenant__slug": "tenant",
                "account__code": "account", "amount": "amount"},
    )  # fmt: skip

    class Meta:
        model = Posting
        fields = ["tenant", "account", "kind"]
