from django.db import models

from billing.domain.reservations import TERMS
from metering.domain.usage.fields import SERVICE_TIERS, STANDARD
from portal.models import EffectiveDated, Tenant

# The tiers as every field that names one stores them (kpis.md section 3, "Service tiers").
SERVICE_TIER_CHOICES = [(tier, tier) for tier in SERVICE_TIERS]
# The tiers with a multiplier of the standard tier's prices.
MULTIPLIED_TIER_CHOICES = [(tier, tier) for tier in SERVICE_TIERS if tier != STANDARD]


class Reservation(models.Model):
    """Dedicated capacity a tenant holds on one deployment (kpis.md 3d): its GPUs (versions,
    ReservationGpus) of the deployment's pool from `starts_at` (a whole UTC hour) until
    `ends_at` (None: until cancelled) at `hourly_rate` per GPU-hour. A term reservation ends
    `term` months after its start; a `none` one when cancelled."""

    audit_type = "reservation"

    Term = models.TextChoices("Term", [(term, term) for term in TERMS])

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="reservations")
    deployment = models.ForeignKey(
        "metering.Deployment", on_delete=models.PROTECT, related_name="reservations"
    )
    hourly_rate = models.DecimalField(max_digits=20, decimal_places=10)  # money per GPU-hour
    currency = models.CharField(max_length=3)
    term = models.CharField(max_length=4, choices=Term.choices)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)  # when it was cancelled
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "starts_at", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(hourly_rate__gte=0), name="reservation_rate_not_negative"
            ),
            models.CheckConstraint(
                condition=models.Q(ends_at__isnull=True)
                | models.Q(ends_at__gte=models.F("starts_at")),
                name="reservation_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return f"R-{self.pk} {self.tenant} {self.deployment}"


class ReservationGpus(EffectiveDated):
    """A reservation's GPUs from `effective_from` (a whole UTC hour) on: its first version at
    its start, each later one more GPUs than the one before (they never fall)."""

    audit_type = "reservation_gpus"

    reservation = models.ForeignKey(Reservation, on_delete=models.CASCADE, related_name="gpus")
    gpus = models.PositiveIntegerField()

    class Meta:
        ordering = ["reservation", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["reservation", "effective_from"], name="reservation_gpus_version_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(gpus__gt=0), name="reservation_gpus_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reservation} {self.gpus} GPUs from {self.effective_from:%Y-%m-%d %H:%M}"


class ServiceTierMultiplier(EffectiveDated):
    """The factor a service tier's list prices are of the standard tier's, for a token class
    without a price of its own in the tier (kpis.md section 3): one record per tier and
    instant, in force until the tier's next."""

    audit_type = "service_tier"

    service_tier = models.CharField(max_length=8, choices=SERVICE_TIER_CHOICES[1:])
    multiplier = models.DecimalField(max_digits=10, decimal_places=6)

    class Meta:
        ordering = ["service_tier", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["service_tier", "effective_from"], name="service_tier_version_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(multiplier__gte=0), name="service_tier_multiplier_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.service_tier} × {self.multiplier} from {self.effective_from:%Y-%m-%d %H:%M}"
