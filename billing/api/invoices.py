"""Invoices: list, read, finalize, pay and void."""

from decimal import Decimal

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from billing.api.pricing import CommercialRead
from billing.filters import InvoiceFilterSet
from billing.models import Invoice, InvoiceLine
from billing.selectors.invoices import invoice_list, invoice_outstanding
from billing.selectors.receivables import days_overdue
from billing.services.invoices.collect import invoice_pay
from billing.services.invoices.issue import invoice_finalize, invoice_void
from portal import clock
from portal.money import money_str


class InvoiceLineSerializer(serializers.ModelSerializer):
    class Meta:
        model = InvoiceLine
        fields = [
            "id",
            "kind",
            "model",
            "token_class",
            "price_class",
            "quantity",
            "list_unit_price",
            "list_amount",
            "discount_pct",
            "discount",
            "amount",
            "description",
            "for_month",
        ]


class InvoiceSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    lines = InvoiceLineSerializer(many=True, read_only=True)
    credited = serializers.SerializerMethodField(help_text="the sum of its credit notes")
    outstanding = serializers.SerializerMethodField(
        help_text="total − payment − what credit notes reduced"
    )
    days_overdue = serializers.SerializerMethodField(
        help_text="whole UTC days past the due day while something is outstanding"
    )

    def get_credited(self, invoice) -> str:
        credited = sum((note.total for note in invoice.credit_notes.all()), Decimal(0))
        return money_str(amount=credited, currency=invoice.currency)

    def get_outstanding(self, invoice) -> str:
        return money_str(amount=invoice_outstanding(invoice=invoice), currency=invoice.currency)

    def get_days_overdue(self, invoice) -> int:
        return days_overdue(
            invoice=invoice,
            outstanding=invoice_outstanding(invoice=invoice),
            today=clock.now().date(),
        )

    class Meta:
        model = Invoice
        fields = [
            "id",
            "number",
            "kind",
            "tenant",
            "period_start",
            "period_end",
            "status",
            "currency",
            "total",
            "issued_at",
            "due_at",
            "paid_at",
            "voided_at",
            "days_overdue",
            "credited",
            "outstanding",
            "lines",
        ]


class InvoiceActionSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class InvoiceViewSet(viewsets.ReadOnlyModelViewSet):
    """Invoices with their lines; finance finalizes, records payment, voids."""

    serializer_class = InvoiceSerializer
    permission_classes = [CommercialRead]
    filterset_class = InvoiceFilterSet

    def get_queryset(self):
        return invoice_list(user=self.request.user).prefetch_related("lines", "credit_notes")

    def _act(self, operation, **kwargs):
        # A state that does not allow the operation is the service's InvoiceError, answered
        # by the API's exception handler naming `status` (409 when finalizing past draft).
        invoice = operation(invoice=self.get_object(), by=self.request.user, **kwargs)
        return Response(self.get_serializer(self.get_queryset().get(pk=invoice.pk)).data)

    @extend_schema(request=None, responses=InvoiceSerializer)
    @action(detail=True, methods=["post"])
    def finalize(self, request, pk=None):
        """Issue a draft: number it and post it to the ledger. An invoice past draft is a
        409 naming its state (`invoice INV-… is issued`)."""
        return self._act(invoice_finalize)

    @extend_schema(request=None, responses=InvoiceSerializer)
    @action(detail=True, methods=["post"])
    def pay(self, request, pk=None):
        """Record the payment of an issued invoice."""
        return self._act(invoice_pay)

    @extend_schema(request=InvoiceActionSerializer, responses=InvoiceSerializer)
    @action(detail=True, methods=["post"])
    def void(self, request, pk=None):
        """Void an issued invoice by a linked ledger reversal."""
        body = InvoiceActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._act(invoice_void, reason=body.validated_data["reason"])
