from django.conf import settings
from django.db import models

from billing.models.invoices import Invoice, InvoiceLine
from billing.models.ledger import AppendOnlyModel, LedgerTransaction
from portal.models import Tenant


class CreditNote(AppendOnlyModel):
    """A correction of what was billed (kpis.md "Credit notes, balances and receivables"),
    numbered CN-YYYY-NNNNNN in its own gapless series: against an issued invoice, for an
    amount or parts of its lines; or, issued by the close, for a month whose lines netted
    below zero (no invoice; its lines are the month's, as an invoice would have billed them).
    It first reduces what is still outstanding on its invoice (`reduced`); the rest
    (`settled`) is refunded or credited to the tenant's balance. Never changes."""

    class Reason(models.TextChoices):
        DISPUTE = "dispute"
        SLA = "sla"
        BILLING_ERROR = "billing_error"
        GOODWILL = "goodwill"

    class Settle(models.TextChoices):
        REFUND = "refund"
        BALANCE = "balance"

    number = models.CharField(max_length=20, unique=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="credit_notes")
    invoice = models.ForeignKey(
        Invoice, null=True, blank=True, on_delete=models.PROTECT, related_name="credit_notes"
    )
    period_start = models.DateTimeField()  # the month it credits
    reason = models.CharField(max_length=16, choices=Reason.choices)
    settle = models.CharField(max_length=8, choices=Settle.choices)
    currency = models.CharField(max_length=3)
    total = models.DecimalField(max_digits=20, decimal_places=4)  # > 0
    reduced = models.DecimalField(max_digits=20, decimal_places=4)  # off the invoice's outstanding
    settled = models.DecimalField(max_digits=20, decimal_places=4)  # refunded or to the balance
    memo = models.CharField(max_length=300, blank=True)
    issued_at = models.DateTimeField()
    transaction = models.OneToOneField(
        LedgerTransaction, on_delete=models.PROTECT, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT
    )

    class Meta:
        ordering = ["-issued_at", "-number"]

    def __str__(self) -> str:
        return self.number


class CreditNoteLine(AppendOnlyModel):
    """One line of a credit note: the part of an invoice line it credits (`amount` > 0), or,
    on a netted month's note, one of the month's lines as billed (signed as on an invoice)."""

    credit_note = models.ForeignKey(CreditNote, on_delete=models.PROTECT, related_name="lines")
    position = models.PositiveSmallIntegerField()
    invoice_line = models.ForeignKey(
        InvoiceLine, null=True, blank=True, on_delete=models.PROTECT, related_name="credited"
    )
    kind = models.CharField(max_length=16, choices=InvoiceLine.Kind.choices)
    model = models.CharField(max_length=100, blank=True)
    list_amount = models.DecimalField(max_digits=20, decimal_places=4, default=0)
    discount = models.DecimalField(max_digits=20, decimal_places=4, default=0)
    amount = models.DecimalField(max_digits=20, decimal_places=4)
    description = models.CharField(max_length=300)
    for_month = models.DateTimeField()

    class Meta:
        ordering = ["credit_note_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["credit_note", "position"], name="credit_note_line_position"
            )
        ]

    def __str__(self) -> str:
        return self.description
