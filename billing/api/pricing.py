"""Prices, contracts and promotions: serializers and effective-dated view sets."""

from decimal import Decimal

from django.conf import settings
from rest_framework import serializers

from billing.filters import ContractFilterSet, PriceFilterSet, PromotionFilterSet
from billing.models import Contract, Invoice, Price, PromotionalCredit
from billing.models.pricing import TOKEN_CLASS_CHOICES
from billing.selectors.pricing import contract_list, price_list, promotion_list
from billing.services.pricing import contract_create, price_create, promotion_grant
from metering.domain.usage.fields import SERVICE_TIERS, STANDARD
from metering.selectors.factory import served_model_list
from portal.access import Capability
from portal.api.fields import ModelSerializer, MoneyField
from portal.api.views import EffectiveDatedViewSet
from portal.models import Tenant
from portal.money import CURRENCY_EXPONENTS
from portal.permissions import capability_permission

CURRENCIES = sorted(CURRENCY_EXPONENTS)
TOKENS_MAXIMUM = 2**63 - 1  # token counts are stored as 64-bit integers


class PriceSerializer(ModelSerializer):
    model = serializers.SlugRelatedField(slug_field="slug", queryset=served_model_list())
    token_class = serializers.ChoiceField(choices=TOKEN_CLASS_CHOICES)
    per_million = MoneyField(unit_price=True, decimal_places=10, help_text="money per 10^6 tokens")
    currency = serializers.ChoiceField(choices=CURRENCIES)
    tier = serializers.ChoiceField(
        source="service_tier",
        choices=list(SERVICE_TIERS),
        default=STANDARD,
        help_text="the service tier the price is of (a tier without one takes the standard "
        "price × its multiplier, /api/v1/service-tiers)",
    )

    class Meta:
        model = Price
        fields = ["id", "model", "tier", "token_class", "per_million", "currency", "effective_from"]
        validators = []  # the service reports a duplicate version on effective_from


class VolumeTierSerializer(serializers.Serializer):
    from_tokens = serializers.IntegerField(
        min_value=0, max_value=TOKENS_MAXIMUM, help_text="monthly tokens the tier starts at"
    )
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
    free_tokens_per_month = serializers.IntegerField(
        min_value=0, max_value=TOKENS_MAXIMUM, default=0
    )
    volume_tiers = VolumeTierSerializer(many=True, default=list)
    committed_minimum = MoneyField(decimal_places=4, default=Decimal(0))
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
    payment_terms_days = serializers.IntegerField(
        min_value=0,
        max_value=365,
        default=30,
        help_text="invoices are due this many days after issue",
    )
    slo_target = serializers.DecimalField(
        max_digits=6,
        decimal_places=5,
        min_value=Decimal("0.00001"),
        max_value=Decimal("0.99999"),
        required=False,
        allow_null=True,
        help_text="share of requests that must be compliant, for the tenant's SLO burn alerts "
        "(0.995); null: each deployment version's",
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
            "payment_terms_days",
            "slo_target",
            "effective_from",
        ]
        validators = []  # the service reports a duplicate version on effective_from


class PromotionSerializer(ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", queryset=Tenant.objects.all())
    amount = MoneyField(positive=True, decimal_places=4)
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


CommercialRead = capability_permission(
    read=Capability.READ_TENANT_DATA, write=Capability.WRITE_COMMERCIAL
)
# Contracts and promotions are configuration: operators and finance, never tenant members.
CommercialConfiguration = capability_permission(
    read=Capability.READ_CONFIGURATION, write=Capability.WRITE_COMMERCIAL
)


class PriceViewSet(EffectiveDatedViewSet):
    """List prices per million tokens, per model and token class, effective-dated."""

    serializer_class = PriceSerializer
    permission_classes = [
        capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_COMMERCIAL)
    ]
    filterset_class = PriceFilterSet
    create_service = staticmethod(price_create)

    def get_queryset(self):
        return price_list()


class ContractViewSet(EffectiveDatedViewSet):
    """Contract versions per tenant."""

    serializer_class = ContractSerializer
    permission_classes = [CommercialConfiguration]
    filterset_class = ContractFilterSet

    create_service = staticmethod(contract_create)

    def get_queryset(self):
        return contract_list(user=self.request.user)

    def version_fields(self, data):
        tiers = [dict(tier) for tier in data.pop("volume_tiers", [])]
        credit_tiers = data.pop("credit_tiers", None)
        return {
            "currency": settings.FACTORY_CURRENCY,
            **data,
            "volume_tiers": tiers,
            "credit_tiers": credit_tiers,
        }


class PromotionViewSet(EffectiveDatedViewSet):
    """Promotional credits (money, optional expiry), consumed before cash."""

    serializer_class = PromotionSerializer
    permission_classes = [CommercialConfiguration]
    filterset_class = PromotionFilterSet

    create_service = staticmethod(promotion_grant)

    def get_queryset(self):
        return promotion_list(user=self.request.user).prefetch_related("uses__invoice")

    def version_fields(self, data):
        return {"currency": settings.FACTORY_CURRENCY, **data}
