"""A tenant's balances as the ledger holds them: its credit balance (credit notes settled to
it, less what invoices drew) and its receivable."""

from __future__ import annotations

from decimal import Decimal

from billing.models import Posting
from billing.services.ledger import account_balances
from portal.models import Tenant


def _balance(code: str) -> Decimal:
    return sum(account_balances(postings=Posting.objects.filter(account__code=code)).values(),
               Decimal(0))  # fmt: skip


def credit_balance(*, tenant: Tenant) -> Decimal:
    """What the factory owes the tenant on its credit balance (≥ 0): its liability account's
    credit."""
    return -_balance(f"liability:credit-balance:{tenant.slug}")


def open_balance(*, tenant: Tenant) -> Decimal:
    """What the tenant owes on issued invoices: its receivable account's debit."""
    return _balance(f"receivable:{tenant.slug}")
