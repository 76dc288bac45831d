from datetime import timedelta

from django.db import models

from billing.domain.rating.types import LineKind, TokenClass
from billing.models.ledger import AppendOnlyModel, LedgerTransaction
from billing.models.pricing import TOKEN_CLASS_CHOICES, PromotionalCredit
from portal.models import Tenant


class Invoice(models.Model):
    """One tenant's bill for one UTC month. Drafts get their number and ledger transaction
    when issued; an issued invoice never changes (a trigger guards it on PostgreSQL), it is
    paid, or voided by a reversal."""

    class Kind(models.TextChoices):
        USAGE = "usage"  # a tenant's month
        PURCHASE = "purchase"  # a prepaid purchase, invoiced at once, its period its issue day

    class Status(models.TextChoices):
        DRAFT = "draft"
        ISSUED = "issued"
        PAID = "paid"
        VOID = "void"

    # The statuses of an invoice that bills its lines (a draft not yet, a void no longer).
    LIVE = (Status.ISSUED, Status.PAID)

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="invoices")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.USAGE)
    period_start = models.DateTimeField()  # first instant of the UTC month (purchase: day)
    period_end = models.DateTimeField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    number = models.CharField(max_length=20, unique=True, null=True, blank=True)
    currency = models.CharField(max_length=3)
    total = models.DecimalField(max_digits=20, decimal_places=4)  # Σ of the rounded lines
    created_at = models.DateTimeField(auto_now_add=True)
    issued_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)  # issued + the contract's terms
    paid_at = models.DateTimeField(null=True, blank=True)
    # The cash its payment brought: the total less what credit notes had reduced by then.
    paid_amount = models.DecimalField(max_digits=20, decimal_places=4, null=True, blank=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    # When invoice.overdue was raised for it (once: portal.events).
    overdue_raised_at = models.DateTimeField(null=True, blank=True)
    issue_transaction = models.OneToOneField(
        LedgerTransaction, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["-period_start", "tenant__slug"]
        constraints = [
            # One live invoice per tenant-month: the job running twice finds it.
            models.UniqueConstraint(
                fields=["tenant", "period_start"],
                condition=~models.Q(status="void") & models.Q(kind="usage"),
                name="invoice_one_per_tenant_month",
            ),
        ]

    def __str__(self) -> str:
        return self.number or f"draft {self.tenant} {self.period_start:%Y-%m}"

    def is_overdue(self, *, now) -> bool:
        """Issued, unpaid and past its due date."""
        return self.status == self.Status.ISSUED and self.due_at is not None and self.due_at < now

    @property
    def period_last_day(self):
        """The last day the invoice covers (period_end is exclusive)."""
        return self.period_end - timedelta(days=1)


class InvoiceLine(AppendOnlyModel):
    """One line of an invoice, amounts already rounded: discount = list_amount - amount."""

    Kind = models.TextChoices("Kind", [(k.name, k.value) for k in LineKind])

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="lines")
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    model = models.CharField(max_length=100, blank=True)  # served model slug
    token_class = models.CharField(max_length=16, blank=True, choices=TOKEN_CLASS_CHOICES)
    # The class whose list price the line used: its token class, or that class's parent
    # when it had no price of its own in force (kpis.md section 3).
    price_class = models.CharField(max_length=16, blank=True, choices=TOKEN_CLASS_CHOICES)
    quantity = models.BigIntegerField(default=0)  # tokens
    list_unit_price = models.DecimalField(
        max_digits=20, decimal_places=10, null=True, blank=True
    )  # per million tokens (a reservation line's: per GPU-hour)
    service_tier = models.CharField(max_length=8, blank=True)  # a usage line's
    # A reservation line's reservation and quantity (kpis.md 3d).
    reservation = models.ForeignKey(
        "billing.Reservation", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    gpu_hours = models.DecimalField(max_digits=20, decimal_places=6, null=True, blank=True)
    list_amount = models.DecimalField(max_digits=20, decimal_places=4)
    discount_pct = models.DecimalField(max_digits=9, decimal_places=6, default=0)
    discount = models.DecimalField(max_digits=20, decimal_places=4)
    amount = models.DecimalField(max_digits=20, decimal_places=4)
    description = models.CharField(max_length=300)
    # The month an adjustment or SLA credit refers to (the invoice's own month otherwise).
    for_month = models.DateTimeField()

    @property
    def short_description(self) -> str:
        """What the line is in a few words, for a printed document: a usage line's model
        and token class in words (its price and combined discount are in their own
        columns); any other line's description."""
        if self.kind != "usage" or not self.model or not self.token_class:
            return self.description
        tier = "" if self.service_tier in ("", "standard") else f" · {self.service_tier}"
        label = f"{self.model}{tier} · {TokenClass(self.token_class).words} tokens"
        if self.price_class and self.price_class != self.token_class:
            label += f" (priced as {TokenClass(self.price_class).words})"
        return label

    class Meta:
        ordering = ["invoice_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["invoice", "position"], name="invoice_line_position")
        ]

    def __str__(self) -> str:
        return self.description


class DocumentCounter(models.Model):
    """The last number issued in one series (`INV` invoices, `CN` credit notes) and UTC year;
    locked by the issuing transaction so numbers are gapless (a database sequence would
    leave gaps on rollback)."""

    series = models.CharField(max_length=4)
    year = models.PositiveIntegerField()
    last = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["series", "year"], name="document_counter_series_year")
        ]

    def __str__(self) -> str:
        return f"{self.series}-{self.year}: {self.last}"


class PromotionUse(AppendOnlyModel):
    """What one month's document consumed of one promotional credit (the rounded, billed
    amount): its invoice, or the credit note of a month that netted below zero."""

    credit = models.ForeignKey(PromotionalCredit, on_delete=models.PROTECT, related_name="uses")
    invoice = models.ForeignKey(
        Invoice, null=True, on_delete=models.PROTECT, related_name="promotion_uses"
    )
    credit_note = models.ForeignKey(
        "billing.CreditNote", null=True, on_delete=models.PROTECT, related_name="promotion_uses"
    )
    amount = models.DecimalField(max_digits=20, decimal_places=4)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["credit", "invoice"], name="promotion_use_unique")
        ]

    def __str__(self) -> str:
        return f"{self.credit_id} on {self.invoice_id}: {self.amount}"


class SlaCredit(models.Model):
    """The SLA credit of one tenant-month, posted once at month close; it appears as an
    `sla_credit` line on the tenant's next invoice."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="sla_credits")
    month_start = models.DateTimeField()
    uptime = models.DecimalField(max_digits=12, decimal_places=10, null=True)  # ratio
    credit_pct = models.DecimalField(max_digits=7, decimal_places=4)  # 10 means 10%
    base_amount = models.DecimalField(max_digits=20, decimal_places=4)  # usage lines, the month
    amount = models.DecimalField(max_digits=20, decimal_places=4)
    currency = models.CharField(max_length=3)
    transaction = models.OneToOneField(
        LedgerTransaction, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    invoice = models.ForeignKey(
        Invoice, null=True, blank=True, on_delete=models.PROTECT, related_name="sla_credits"
    )
    # Billed instead by the credit note of a month that netted below zero.
    credit_note = models.ForeignKey(
        "billing.CreditNote", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-month_start", "tenant__slug"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "month_start"], name="sla_credit_once")
        ]

    def __str__(self) -> str:
        return f"{self.tenant} {self.month_start:%Y-%m} {self.credit_pct}%"
