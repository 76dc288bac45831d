"""A tenant's balances: its credit balance (credit notes settled to it, less what invoices
drew) and receivable as the ledger holds them; its prepaid balances and what is left of
each; every movement of both."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import QuerySet

from billing.domain.accounts import CREDIT_BALANCE, liability_code, receivable_code
from billing.models import CreditNote, Invoice, InvoiceLine, Posting, PrepaidBalance
from billing.selectors.ledger import account_balances
from portal.models import Tenant
from portal.periods import next_month


def _balance(code: str) -> Decimal:
    return sum(account_balances(postings=Posting.objects.filter(account__code=code)).values(),
               Decimal(0))  # fmt: skip


def credit_balance(*, tenant: Tenant) -> Decimal:
    """What the factory owes the tenant on its credit balance (≥ 0): its liability account's
    credit."""
    return -_balance(liability_code(CREDIT_BALANCE, tenant.slug))


def open_balance(*, tenant: Tenant) -> Decimal:
    """What the tenant owes on issued invoices: its receivable account's debit."""
    return _balance(receivable_code(tenant.slug))


def prepaid_list(*, tenant: Tenant) -> QuerySet[PrepaidBalance]:
    """The tenant's prepaid balances, with the invoice that sold each: a purchase whose
    invoice was voided is no balance."""
    return (
        PrepaidBalance.objects.filter(tenant=tenant)
        .exclude(invoice__status=Invoice.Status.VOID)
        .select_related("invoice")
    )


def prepaid_remaining(balance: PrepaidBalance) -> Decimal:
    """Face value less what live invoices drew and the breakage booked."""
    drawn = sum(
        balance.draws.exclude(invoice__status=Invoice.Status.VOID).values_list("amount", flat=True),
        Decimal(0),
    )
    broken = balance.breakage.amount if hasattr(balance, "breakage") else Decimal(0)
    return balance.amount - drawn - broken


def prepaid_usable(
    *, tenant: Tenant, month_start: datetime
) -> list[tuple[PrepaidBalance, Decimal]]:
    """The tenant's prepaid balances usable on some day of the month, with what is left of
    each, earliest expiry first (the order they are drawn)."""
    balances = PrepaidBalance.objects.filter(
        tenant=tenant,
        starts_at__lt=next_month(month_start),
        expires_at__gte=month_start,
        invoice__status__in=(Invoice.Status.ISSUED, Invoice.Status.PAID),
    ).order_by("expires_at", "id")
    usable = [(balance, prepaid_remaining(balance)) for balance in balances]
    return [(balance, left) for balance, left in usable if left > 0]


@dataclass(frozen=True)
class TenantBalances:
    tenant: Tenant
    credit: Decimal  # what the factory owes it on its credit balance
    prepaid_left: Decimal  # what is left of its prepaid purchases
    purchases: int  # its prepaid purchases


def tenant_balances(*, tenants: Iterable[Tenant]) -> list[TenantBalances]:
    """Each of `tenants`' credit balance and prepaid left, by the rules above (the Balances
    page before a tenant is chosen): the credit balances in one query, the prepaid ones
    by `prepaid_remaining`."""
    tenants = list(tenants)
    codes = {liability_code(CREDIT_BALANCE, tenant.slug): tenant.pk for tenant in tenants}
    owed: dict[int, Decimal] = defaultdict(Decimal)
    for (code, _), total in account_balances(
        postings=Posting.objects.filter(account__code__in=list(codes))
    ).items():
        owed[codes[code]] -= total
    prepaid: dict[int, list[Decimal]] = defaultdict(list)
    live = PrepaidBalance.objects.filter(tenant__in=tenants).exclude(
        invoice__status=Invoice.Status.VOID
    )  # a purchase whose invoice was voided is no balance (as prepaid_list)
    for balance in live:
        prepaid[balance.tenant_id].append(prepaid_remaining(balance))
    return [
        TenantBalances(
            tenant=tenant,
            credit=owed[tenant.pk],
            prepaid_left=sum(prepaid[tenant.pk], Decimal(0)),
            purchases=len(prepaid[tenant.pk]),
        )
        for tenant in tenants
    ]


@dataclass(frozen=True)
class Movement:
    time: datetime
    kind: str  # purchase | draw | breakage | credit_note
    balance: str  # credit | prepaid
    amount: Decimal  # + into the balance, − out of it
    document: str


def balance_movements(*, tenant: Tenant) -> list[Movement]:
    """Every movement of the tenant's credit and prepaid balances, oldest first."""
    moves = []
    for balance in prepaid_list(tenant=tenant):
        moves.append(Movement(balance.invoice.issued_at, "purchase", "prepaid", balance.amount,
                              balance.invoice.number or ""))  # fmt: skip
        for draw in balance.draws.exclude(invoice__status=Invoice.Status.VOID).select_related(
            "invoice"
        ):
            moves.append(Movement(draw.invoice.issued_at or draw.invoice.created_at, "draw",
                                  "prepaid", -draw.amount, draw.invoice.number or "draft"))  # fmt: skip
        if hasattr(balance, "breakage"):
            moves.append(Movement(balance.breakage.transaction.occurred_at, "breakage", "prepaid",
                                  -balance.breakage.amount, ""))  # fmt: skip
    for note in CreditNote.objects.filter(
        tenant=tenant, settled__gt=0, settle=CreditNote.Settle.BALANCE
    ):
        moves.append(Movement(note.issued_at, "credit_note", "credit", note.settled, note.number))
    for line in InvoiceLine.objects.filter(
        invoice__tenant=tenant, kind="credit", invoice__status__in=("issued", "paid")
    ).select_related("invoice"):
        moves.append(Movement(line.invoice.issued_at, "draw", "credit", line.amount,
                              line.invoice.number))  # fmt: skip
    return sorted(moves, key=lambda m: (m.time, m.kind))
