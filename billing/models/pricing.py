from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import models

from billing.domain.credits import DEFAULT_CREDIT_TIERS as CREDIT_TIERS
from billing.domain.rating.types import ContractKind, TokenClass
from portal.models import EffectiveDated, Tenant

# Credit tiers as public LLM clouds publish them: [uptime below, percent credited].
# As contracts store them (JSON): billing.domain.credits.DEFAULT_CREDIT_TIERS, as text.
DEFAULT_CREDIT_TIERS = [[str(threshold), str(pct)] for threshold, pct in CREDIT_TIERS]


# The token classes as every field that names one stores them (one choice set: one enum in
# the API schema, TokenClassEnum).
TOKEN_CLASS_CHOICES = [(c.value, c.value) for c in TokenClass]


def default_credit_tiers() -> list[list[str]]:
    return [list(tier) for tier in DEFAULT_CREDIT_TIERS]


class Price(EffectiveDated):
    """A list price per million tokens of one model and token class at one service tier, in
    force from `effective_from` (a whole UTC hour) until the next version; never edited once
    in force. A tier without a price of its own for a class takes the standard tier's times
    its multiplier (ServiceTierMultiplier)."""

    audit_type = "price"

    model = models.ForeignKey(
        "metering.ServedModel", on_delete=models.PROTECT, related_name="prices"
    )
    token_class = models.CharField(max_length=16, choices=TOKEN_CLASS_CHOICES)
    per_million = models.DecimalField(max_digits=20, decimal_places=10)  # money per 10^6 tokens
    currency = models.CharField(max_length=3)
    service_tier = models.CharField(max_length=8, default="standard")

    class Meta:
        ordering = ["model__slug", "service_tier", "token_class", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "token_class", "service_tier", "effective_from"],
                name="price_version_unique",
            ),
            models.CheckConstraint(
                condition=models.Q(per_million__gte=0), name="price_not_negative"
            ),
        ]

    def __str__(self) -> str:
        tier = "" if self.service_tier == "standard" else f" {self.service_tier}"
        return f"{self.model}{tier} {self.token_class} {self.per_million} {self.currency}"


class Contract(EffectiveDated):
    """A tenant's commercial terms from `effective_from` (whole UTC hour) until the next
    version: kind, discount, graduated volume tiers, free allowance, committed minimum and
    SLA credit tiers, payment terms."""

    audit_type = "contract"

    Kind = models.TextChoices("Kind", [(k.name, k.value) for k in ContractKind])

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="contracts")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    discount_pct = models.DecimalField(max_digits=7, decimal_places=4, default=Decimal(0))
    free_tokens_per_month = models.BigIntegerField(default=0)  # tokens (input + output)
    # Graduated tiers: [{"from_tokens": int, "discount_pct": "5"}], on the month's paid tokens.
    volume_tiers = models.JSONField(default=list, blank=True)
    committed_minimum = models.DecimalField(max_digits=20, decimal_places=4, default=Decimal(0))
    currency = models.CharField(max_length=3)
    # [[uptime below, percent], ...]; the target is the highest threshold.
    credit_tiers = models.JSONField(default=default_credit_tiers, blank=True)
    # An invoice is due this many days after it is issued.
    payment_terms_days = models.PositiveSmallIntegerField(default=30)
    # The share of requests that must be compliant, for the tenant's SLO burn alerts
    # (kpis.md 3c); None: each deployment version's.
    slo_target = models.DecimalField(max_digits=6, decimal_places=5, null=True, blank=True)

    class Meta:
        ordering = ["tenant__slug", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "effective_from"], name="contract_version_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(discount_pct__gte=0, discount_pct__lte=100),
                name="contract_discount_pct_range",
            ),
            models.CheckConstraint(
                condition=models.Q(free_tokens_per_month__gte=0, committed_minimum__gte=0),
                name="contract_amounts_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant} {self.kind} from {self.effective_from:%Y-%m-%d %H:%M}"

    @property
    def tiers(self) -> list[tuple[Decimal, Decimal]]:
        """The credit tiers as decimals: [(uptime below, credit percent)]."""
        return [(Decimal(below), Decimal(pct)) for below, pct in self.credit_tiers]

    @property
    def sla_target(self) -> Decimal:
        """The availability target: the highest credit threshold (0.999 by default)."""
        return max((Decimal(below) for below, _ in self.credit_tiers), default=Decimal("0.999"))


class PromotionalCredit(models.Model):
    """Money granted to a tenant that pays for paid usage before cash: the usage of every month
    from the one holding `effective_from` on, until `expires_at`; what each invoice consumed
    is recorded in PromotionUse."""

    audit_type = "promotion"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="promotions")
    amount = models.DecimalField(max_digits=20, decimal_places=4)
    currency = models.CharField(max_length=3)
    expires_at = models.DateTimeField(null=True, blank=True)  # usage from then on can't use it
    description = models.CharField(max_length=200, blank=True)
    effective_from = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "effective_from"]
        constraints = [
            models.CheckConstraint(condition=models.Q(amount__gt=0), name="promotion_positive")
        ]

    def __str__(self) -> str:
        return f"{self.tenant} {self.amount} {self.currency}"

    def clean(self) -> None:
        if self.amount is not None and self.amount <= 0:
            raise ValidationError({"amount": "must be positive"})
