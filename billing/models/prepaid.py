from django.conf import settings
from django.db import models

from billing.models.invoices import Invoice
from billing.models.ledger import AppendOnlyModel, LedgerTransaction
from portal.models import Tenant


class PrepaidBalance(AppendOnlyModel):
    """A prepaid purchase (money at face value; kpis.md "Credit notes, balances and
    receivables"): invoiced at once on its own purchase invoice, booked as deferred revenue;
    usable from `starts_at` through the whole UTC day `expires_at`; the closes draw it
    (PrepaidDraw), the close of its expiry month books what is left as breakage."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="prepaid")
    amount = models.DecimalField(max_digits=20, decimal_places=4)  # face value
    currency = models.CharField(max_length=3)
    starts_at = models.DateTimeField()  # a UTC day's first instant
    expires_at = models.DateTimeField()  # the first instant of the last day it is usable
    invoice = models.OneToOneField(Invoice, on_delete=models.PROTECT, related_name="prepaid")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT
    )

    class Meta:
        ordering = ["expires_at", "id"]

    def __str__(self) -> str:
        return f"{self.tenant} prepaid {self.amount} until {self.expires_at:%Y-%m-%d}"


class PrepaidDraw(AppendOnlyModel):
    """What one usage invoice drew from one prepaid balance (its `prepaid` line's part)."""

    balance = models.ForeignKey(PrepaidBalance, on_delete=models.PROTECT, related_name="draws")
    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="prepaid_draws")
    amount = models.DecimalField(max_digits=20, decimal_places=4)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["balance", "invoice"], name="prepaid_draw_once")
        ]

    def __str__(self) -> str:
        return f"{self.invoice_id} drew {self.amount} of {self.balance_id}"


class PrepaidBreakage(AppendOnlyModel):
    """The unused rest of a balance, revenue on its expiry day, booked by that month's close."""

    balance = models.OneToOneField(
        PrepaidBalance, on_delete=models.PROTECT, related_name="breakage"
    )
    amount = models.DecimalField(max_digits=20, decimal_places=4)
    transaction = models.OneToOneField(
        LedgerTransaction, on_delete=models.PROTECT, related_name="+"
    )

    def __str__(self) -> str:
        return f"breakage {self.amount} of {self.balance_id}"
