from decimal import Decimal

from rest_framework import serializers

from billing.models import Contract, Invoice, InvoiceLine, Posting, Price, PromotionalCredit
from billing.rating import CURRENCY_EXPONENTS, TokenClass
from metering.models import ServedModel
from portal.api.fields import ModelSerializer
from portal.models import Tenant

CURRENCIES = sorted(CURRENCY_EXPONENTS)


class PriceSerializer(ModelSerializer):
    model = serializers.SlugRelatedField(slug_field="slug", queryset=ServedModel.objects.all())
    token_class = serializers.ChoiceField(choices=[c.value for c in TokenClass])
    per_million = serializers.DecimalField(
        max_digits=20, decimal_places=10, min_value=Decimal(0), help_text="money per 10^6 tokens"
    )
    currency = serializers.ChoiceField(choices=CURRENCIES)

    class Meta:
        model = Price
        fields = ["id", "model", "token_class", "per_million", "currency", "effective_from"]
        validators = []  # the service reports a duplicate version on effective_from


class VolumeTierSerializer(serializers.Serializer):
    from_tokens = serializers.IntegerField(min_value=0)
    discount_pct = serializers.DecimalField(
        max_digits=7, decimal_places=4, min_value=Decimal(0), max_value=Decimal(100)
    )


class ContractSerializer(ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", queryset=Tenant.objects.all())
    kind = serializers.ChoiceField(choices=Contract.Kind.choices)
    discount_pct = serializers.DecimalField(
        max_digits=7,
        decimal_places=4,
        min_value=Decimal(0),
        max_value=Decimal(100),
        default=Decimal(0),
        help_text="percent off list: 10 means 10%",
    )
    free_tokens_per_month = serializers.IntegerField(min_value=0, max_value=2**63 - 1, default=0)
    volume_tiers = VolumeTierSerializer(many=True, default=list)
    committed_minimum = serializers.DecimalField(
        max_digits=20, decimal_places=4, min_value=Decimal(0), default=Decimal(0)
    )
    currency = serializers.ChoiceField(choices=CURRENCIES, required=False)
    credit_tiers = serializers.ListField(
        child=serializers.ListField(
            child=serializers.DecimalField(max_digits=12, decimal_places=6),
            min_length=2,
            max_length=2,
        ),
        required=False,
        help_text="[[uptime below, percent], ...]; default [[0.999, 10], [0.99, 25], [0.95, 100]]",
    )

    class Meta:
        model = Contract
        fields = [
            "id",
            "tenant",
            "kind",
            "discount_pct",
            "free_tokens_per_month",
            "volume_tiers",
            "committed_minimum",
            "currency",
            "credit_tiers",
            "effective_from",
        ]
        validators = []  # the service reports a duplicate version on effective_from


class PromotionSerializer(ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", queryset=Tenant.objects.all())
    amount = serializers.DecimalField(max_digits=20, decimal_places=4, min_value=Decimal("0.0001"))
    currency = serializers.ChoiceField(choices=CURRENCIES, required=False)
    used = serializers.SerializerMethodField()

    class Meta:
        model = PromotionalCredit
        fields = [
            "id",
            "tenant",
            "amount",
            "currency",
            "effective_from",
            "expires_at",
            "description",
            "used",
        ]

    def get_used(self, credit) -> Decimal:
        """Consumed by issued or paid invoices so far."""
        return sum(
            (use.amount for use in credit.uses.all() if use.invoice.status != Invoice.Status.VOID),
            Decimal(0),
        )


class InvoiceLineSerializer(serializers.ModelSerializer):
    class Meta:
        model = InvoiceLine
        fields = [
            "kind",
            "model",
            "token_class",
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

    class Meta:
        model = Invoice
        fields = [
            "id",
            "number",
            "tenant",
            "period_start",
            "period_end",
            "status",
            "currency",
            "total",
            "issued_at",
            "paid_at",
            "voided_at",
            "lines",
        ]


class InvoiceActionSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class PostingSerializer(serializers.ModelSerializer):
    transaction = serializers.IntegerField(source="transaction_id")
    kind = serializers.CharField(source="transaction.kind")
    memo = serializers.CharField(source="transaction.memo")
    occurred_at = serializers.DateTimeField(source="transaction.occurred_at")
    tenant = serializers.SlugRelatedField(
        source="transaction.tenant", slug_field="slug", read_only=True
    )
    reverses = serializers.IntegerField(source="transaction.reverses_id", allow_null=True)
    account = serializers.CharField(source="account.code")
    account_kind = serializers.CharField(source="account.kind")

    class Meta:
        model = Posting
        fields = [
            "id",
            "transaction",
            "kind",
            "memo",
            "occurred_at",
            "tenant",
            "reverses",
            "account",
            "account_kind",
            "amount",
            "currency",
        ]


class SlaRowSerializer(serializers.Serializer):
    tenant = serializers.CharField()
    month = serializers.CharField(help_text="YYYY-MM")
    is_month_to_date = serializers.BooleanField()
    uptime = serializers.FloatField(allow_null=True, help_text="ratio in [0, 1]")
    slo_attainment = serializers.FloatField(allow_null=True, help_text="ratio in [0, 1]")
    sla_delivery = serializers.FloatField(allow_null=True, help_text="σ, ratio in [0, 1]")
    target = serializers.FloatField(allow_null=True, help_text="ratio in [0, 1]")
    credit_pct = serializers.DecimalField(
        max_digits=7, decimal_places=4, help_text="a percentage: 10 means 10%"
    )
    credit_amount = serializers.DecimalField(max_digits=20, decimal_places=2, allow_null=True)
    currency = serializers.CharField()
    is_posted = serializers.BooleanField(help_text="the month is closed and its credit posted")
    incidents = serializers.ListField(child=serializers.IntegerField())
