"""Issuing an invoice: a gapless number and its ledger transaction (each line's legs), in one
transaction; voiding it by reversal while its month is open. Either spends or gives back
its tenant's promotions, which billing's rate stage rates again."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Min

from billing.domain.accounts import (
    CREDIT_BALANCE,
    DEFERRED_REVENUE,
    SLA_PAYABLE,
    liability_code,
    line_leg_codes,
    revenue_code,
)
from billing.domain.invoices import InvoiceConflict, InvoiceError
from billing.models import (
    Account,
    Invoice,
    LedgerTransaction,
    PromotionalCredit,
    SlaCredit,
)
from billing.selectors.invoices import invoice_void_refusal
from billing.selectors.pricing import contract_in_force
from billing.services.events import (
    invoice_issued_raise,
)
from billing.services.ledger import (
    Leg,
    account_credit_balance,
    account_deferred_revenue,
    account_named,
    account_receivable,
    account_revenue,
    account_sla_payable,
    accrual_date,
    ledger_post,
    ledger_reverse,
)
from billing.services.numbering import document_number
from billing.services.rating import rating_queue
from portal import clock
from portal.models import Tenant
from portal.services import audit_record


def line_legs(
    *,
    tenant: Tenant,
    kind: str,
    model: str,
    list_amount,
    discount,
    amount,
    known: dict[str, Account] | None = None,
) -> list[Leg]:
    """The ledger legs of one billed line (billing.domain.accounts.line_leg_codes), each on
    its account, created on first use; `known` (account code -> Account), shared by the lines
    of one document, keeps the accounts it looked up so each is read once per document."""
    known = {} if known is None else known
    accounts = {
        revenue_code(model): lambda: account_revenue(model_slug=model),
        liability_code(SLA_PAYABLE, tenant.slug): lambda: account_sla_payable(tenant=tenant),
        liability_code(CREDIT_BALANCE, tenant.slug): lambda: account_credit_balance(tenant=tenant),
        liability_code(DEFERRED_REVENUE, tenant.slug): lambda: account_deferred_revenue(
            tenant=tenant
        ),
    }
    codes = line_leg_codes(
        tenant_slug=tenant.slug, kind=kind, model=model, list_amount=list_amount,
        discount=discount, amount=amount,
    )  # fmt: skip
    for code, _ in codes:
        if code not in known:
            known[code] = accounts[code]() if code in accounts else account_named(code)
    return [Leg(known[code], leg_amount) for code, leg_amount in codes]


def _invoice_legs(invoice: Invoice) -> list[Leg]:
    """Receivable = total, and each line's legs (line_legs)."""
    legs = [Leg(account_receivable(tenant=invoice.tenant), invoice.total)]
    known: dict[str, Account] = {}
    for line in invoice.lines.all():
        legs += line_legs(
            tenant=invoice.tenant,
            kind=line.kind,
            model=line.model,
            list_amount=line.list_amount,
            discount=line.discount,
            amount=line.amount,
            known=known,
        )
    return legs


@transaction.atomic
def invoice_finalize(
    *, invoice: Invoice, by=None, now: datetime | None = None, by_close: bool = False
) -> Invoice:
    """Issue a draft: number it (INV-YYYY-NNNNNN by the UTC year of issue, gapless) and post
    it to the ledger, in one transaction, accounted on its month's last day while the month
    is open or its own close issues it (`by_close`), else on the day of issue; one totalling
    0.00 is paid at once (no payment moves money). An invoice past draft (issued, paid or
    void) is refused naming its state."""
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
    if invoice.status != Invoice.Status.DRAFT:
        raise InvoiceConflict(f"invoice {invoice} is {invoice.status}; only a draft is finalized")
    now = now or clock.now()
    invoice.number = document_number(series="INV", issued_at=now)
    invoice.issue_transaction = ledger_post(
        kind=LedgerTransaction.Kind.INVOICE,
        memo=f"Invoice {invoice.number}, {invoice.tenant.name}, {invoice.period_start:%Y-%m}",
        legs=_invoice_legs(invoice),
        currency=invoice.currency,
        tenant=invoice.tenant,
        period_start=invoice.period_start,
        occurred_at=now,
        accounting_date=(
            accrual_date(month=invoice.period_start, occurred_at=now, by_close=by_close)
            if invoice.kind == Invoice.Kind.USAGE
            else None  # a purchase counts on its issue day
        ),
        idempotency_key=f"invoice:{invoice.pk}",
        by=by,
        by_close=by_close,
    )
    invoice.status = Invoice.Status.ISSUED
    invoice.issued_at = now
    terms = contract_in_force(tenant=invoice.tenant, when=invoice.period_end - timedelta(hours=1))
    invoice.due_at = now + timedelta(days=terms.payment_terms_days if terms else 30)
    if invoice.total == 0:  # nothing due (a promotion covered it): settled when issued
        invoice.status, invoice.paid_at, invoice.paid_amount = Invoice.Status.PAID, now, 0
    invoice.save(
        update_fields=[
            "number", "issue_transaction", "status", "issued_at", "due_at", "paid_at",
            "paid_amount",
        ]
    )  # fmt: skip
    audit_record(actor=by, action="invoice.issue", object_type="invoice", object_id=invoice.number)
    _promotions_spent(invoice.tenant)
    invoice_issued_raise(invoice)
    return invoice


@transaction.atomic
def invoice_void(
    *, invoice: Invoice, by=None, reason: str = "", now: datetime | None = None
) -> Invoice:
    """Void an issued invoice by reversing its ledger transaction; its SLA credits go back
    to wait for the next invoice. The month can then be invoiced again."""
    invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
    if invoice.status != Invoice.Status.ISSUED:
        raise InvoiceConflict(
            f"invoice {invoice} is {invoice.status}; only issued invoices are voided"
        )
    if refusal := invoice_void_refusal(invoice=invoice):
        raise InvoiceError(refusal)
    ledger_reverse(
        entry=invoice.issue_transaction,
        memo=f"Void of {invoice.number}" + (f": {reason}" if reason else ""),
        by=by,
    )
    invoice.status = Invoice.Status.VOID
    invoice.voided_at = now or clock.now()
    invoice.save(update_fields=["status", "voided_at"])
    SlaCredit.objects.filter(invoice=invoice).update(invoice=None)
    audit_record(
        actor=by,
        action="invoice.void",
        object_type="invoice",
        object_id=invoice.number,
        after={"reason": reason},
    )
    _promotions_spent(invoice.tenant)
    return invoice


def _promotions_spent(tenant: Tenant) -> None:
    """An invoice issued or voided changes what its tenant's promotions have left for the
    other months: billing's rate stage rates them again (from the first grant)."""
    first = PromotionalCredit.objects.filter(tenant=tenant).aggregate(first=Min("effective_from"))
    if first["first"] is not None:
        rating_queue(tenant=tenant, start=first["first"], hours=False)
