"""Credit notes: list and read (tenants their own), issue (finance and operators)."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from billing.api.pricing import CommercialRead
from billing.filters import CreditNoteFilterSet
from billing.models import CreditNote, CreditNoteLine
from billing.selectors.credit_notes import credit_note_list
from billing.selectors.invoices import invoice_list
from billing.services.credit_notes import credit_note_issue
from portal.api.fields import MoneyField
from portal.errors import FieldError
from portal.money import money_str


class CreditNoteLineSerializer(serializers.ModelSerializer):
    line = serializers.IntegerField(source="invoice_line_id", allow_null=True)
    amount = serializers.SerializerMethodField()

    class Meta:
        model = CreditNoteLine
        fields = ["line", "kind", "description", "amount"]

    def get_amount(self, line) -> str:
        return money_str(amount=line.amount, currency=settings.FACTORY_CURRENCY)


class CreditNoteSerializer(serializers.ModelSerializer):
    invoice = serializers.CharField(source="invoice.number", allow_null=True, default=None)
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    month = serializers.SerializerMethodField(help_text="the month it credits, YYYY-MM")
    total = serializers.SerializerMethodField()
    reduced = serializers.SerializerMethodField(help_text="off what was outstanding on the invoice")
    settled = serializers.SerializerMethodField(help_text="refunded or credited to the balance")
    lines = CreditNoteLineSerializer(many=True, read_only=True)

    class Meta:
        model = CreditNote
        fields = [
            "id", "number", "invoice", "tenant", "month", "reason", "settle", "currency",
            "total", "reduced", "settled", "memo", "issued_at", "lines",
        ]  # fmt: skip

    def get_month(self, note) -> str:
        return f"{note.period_start:%Y-%m}"

    def get_total(self, note) -> str:
        return money_str(amount=note.total, currency=note.currency)

    def get_reduced(self, note) -> str:
        return money_str(amount=note.reduced, currency=note.currency)

    def get_settled(self, note) -> str:
        return money_str(amount=note.settled, currency=note.currency)


class CreditNoteLineIn(serializers.Serializer):
    line = serializers.IntegerField()
    amount = MoneyField(positive=True)


class CreditNoteIn(serializers.Serializer):
    invoice = serializers.CharField(help_text="the invoice's number, INV-YYYY-NNNNNN")
    reason = serializers.CharField()
    settle = serializers.CharField(required=False, default=CreditNote.Settle.BALANCE)
    amount = MoneyField(positive=True, required=False)
    lines = CreditNoteLineIn(many=True, required=False)
    memo = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)


class CreditNoteViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):  # fmt: skip
    """Credit notes, newest first (tenants see their own). Issuing one credits an issued
    invoice for an `amount` or for parts of its `lines`, with a `reason`, settled as a
    `refund` or to the tenant's `balance`; it first reduces what is outstanding."""

    serializer_class = CreditNoteSerializer
    permission_classes = [CommercialRead]
    filterset_class = CreditNoteFilterSet

    def get_queryset(self):
        return credit_note_list(user=self.request.user)

    @extend_schema(request=CreditNoteIn, responses={201: CreditNoteSerializer})
    def create(self, request, *args, **kwargs):
        body = CreditNoteIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        invoice = invoice_list(user=request.user).filter(number=data["invoice"]).first()
        if invoice is None:
            raise FieldError("invoice", f"no issued invoice numbered {data['invoice']!r}")
        note = credit_note_issue(
            invoice=invoice,
            reason=data["reason"],
            settle=data["settle"],
            amount=data.get("amount"),
            lines=[dict(part) for part in data["lines"]] if "lines" in data else None,
            memo=data["memo"],
            by=request.user,
        )
        return Response(
            CreditNoteSerializer(self.get_queryset().get(pk=note.pk)).data,
            status=status.HTTP_201_CREATED,
        )
