from django.conf import settings
from django.db import models

from portal.models import Tenant


class AppendOnlyQuerySet(models.QuerySet):
    """Rows are only ever inserted: bulk UPDATE and DELETE refuse (the database refuses too)."""

    def update(self, **kwargs):
        raise PermissionError(f"{self.model.__name__} rows are append-only")

    def delete(self):
        raise PermissionError(f"{self.model.__name__} rows are append-only")


class AppendOnlyModel(models.Model):
    """Insert-only rows: save() of an existing row and delete() raise PermissionError.

    On PostgreSQL a trigger (migration 0002) refuses UPDATE and DELETE as well, so raw SQL
    cannot change the record either."""

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise PermissionError(f"{type(self).__name__} rows are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError(f"{type(self).__name__} rows are append-only")


class Account(models.Model):
    """A ledger account; its balance is derived from postings (debits positive)."""

    class Kind(models.TextChoices):
        ASSET = "asset"  # cash, receivables
        LIABILITY = "liability"  # SLA credits owed to a tenant, its credit balance
        REVENUE = "revenue"  # list value per model, minimums, adjustments
        CONTRA_REVENUE = "contra_revenue"  # discounts, SLA credits, credit notes
        EXPENSE = "expense"  # promotional credits

    code = models.CharField(max_length=200, unique=True)  # e.g. "receivable:acme"
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT)
    model = models.ForeignKey(
        "metering.ServedModel", null=True, blank=True, on_delete=models.PROTECT
    )

    class Meta:
        ordering = ["code"]

    def __str__(self) -> str:
        return self.code


class LedgerTransaction(AppendOnlyModel):
    """A balanced set of postings (Σ amount = 0 per currency, checked by a deferred
    constraint trigger on PostgreSQL). Corrected only by a linked reversal."""

    class Kind(models.TextChoices):
        INVOICE = "invoice"
        PAYMENT = "payment"
        SLA_CREDIT = "sla_credit"
        CREDIT_NOTE = "credit_note"
        BREAKAGE = "breakage"
        REVERSAL = "reversal"
        MANUAL = "manual"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    memo = models.CharField(max_length=300)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT)
    period_start = models.DateTimeField(null=True, blank=True)  # the month it belongs to
    occurred_at = models.DateTimeField()
    # The day the transaction counts in (kpis.md, Accounting dates): an invoice's postings
    # the last day of the month it bills, an SLA credit the last day of the month that
    # earned it, a payment or a reversal its own (UTC) day. Ledger views filter by it.
    accounting_date = models.DateField()
    reverses = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="reversed_by"
    )
    # Natural key of the business event, so a job that runs twice posts once.
    idempotency_key = models.CharField(max_length=200, unique=True, null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-occurred_at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "occurred_at"], name="ledger_tx_tenant_idx"),
            models.Index(fields=["accounting_date"], name="ledger_tx_accounting_idx"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} {self.memo}"


class Posting(AppendOnlyModel):
    """One leg of a transaction: a debit (amount > 0) or credit (amount < 0) to an account."""

    transaction = models.ForeignKey(
        LedgerTransaction, on_delete=models.PROTECT, related_name="postings"
    )
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="postings")
    amount = models.DecimalField(max_digits=20, decimal_places=4)  # debit > 0, credit < 0
    currency = models.CharField(max_length=3)

    class Meta:
        ordering = ["transaction_id", "id"]
        indexes = [models.Index(fields=["account", "transaction"], name="posting_account_idx")]
        constraints = [
            models.CheckConstraint(condition=~models.Q(amount=0), name="posting_not_zero")
        ]

    def __str__(self) -> str:
        return f"{self.account} {self.amount} {self.currency}"
