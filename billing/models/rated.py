from django.db import models

from portal.models import Tenant


class RatedTenantMonth(models.Model):
    """Billing's read model of one tenant's month as rated: the totals other figures need
    (the base of an SLA credit, the minimum shortfall), with the fingerprint of what it was
    rated from (the tenant's usage of the month, prices, contract and promotions), so a read
    rates again only the tenant-months whose inputs changed since (billing.services.rated)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    month_start = models.DateTimeField()
    fingerprint = models.CharField(max_length=64)
    currency = models.CharField(max_length=3, blank=True)
    # Usage lines after discounts and tiers, before promotions (rounded per line).
    usage_amount = models.DecimalField(max_digits=20, decimal_places=4, default=0)
    minimum_shortfall = models.DecimalField(max_digits=20, decimal_places=4, default=0)
    error = models.TextField(blank=True)  # the RatingError when it cannot be rated
    rated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "month_start"], name="rated_tenant_month")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.month_start:%Y-%m}"
