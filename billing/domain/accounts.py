"""The ledger's account codes (stable identifiers: the ledger service creates each account
with its name and kind on first use) and the accounts a billed line posts to, beside the
receivable or credit balance its document settles."""

from __future__ import annotations

from decimal import Decimal

from billing.domain.rating.types import LineKind

SLA_PAYABLE, CREDIT_BALANCE, DEFERRED_REVENUE = "sla-credits", "credit-balance", "deferred-revenue"


def receivable_code(tenant_slug: str) -> str:
    return f"receivable:{tenant_slug}"


def revenue_code(model_slug: str) -> str:
    return f"revenue:{model_slug}"


def liability_code(what: str, tenant_slug: str) -> str:
    """A liability the factory holds for one tenant: SLA_PAYABLE, CREDIT_BALANCE or
    DEFERRED_REVENUE."""
    return f"liability:{what}:{tenant_slug}"


def line_leg_codes(
    *, tenant_slug: str, kind: str, model: str, list_amount: Decimal, discount: Decimal,
    amount: Decimal,
) -> list[tuple[str, Decimal]]:  # fmt: skip
    """The (account code, amount) legs of one billed line, debit positive: revenue at list
    per model and the discounts; the adjustments' revenue and discounts; reservations' fees
    (kpis.md 3d), promotions, the minimum, SLA credits, the credit balance drawn on their accounts; a prepaid
    purchase to deferred revenue and its draws from it (the usage lines are the revenue)."""
    if kind == LineKind.USAGE:
        return [(revenue_code(model), -list_amount), ("contra:discounts", discount)]
    if kind == LineKind.ADJUSTMENT:
        return [("revenue:adjustments", -list_amount), ("contra:discounts", discount)]
    code = {
        LineKind.PROMOTION: "expense:promotions",
        LineKind.RESERVATION: "revenue:reservations",
        LineKind.MINIMUM: "revenue:minimum",
        LineKind.SLA_CREDIT: liability_code(SLA_PAYABLE, tenant_slug),
        LineKind.CREDIT: liability_code(CREDIT_BALANCE, tenant_slug),
        LineKind.PREPAID: liability_code(DEFERRED_REVENUE, tenant_slug),
        LineKind.PURCHASE: liability_code(DEFERRED_REVENUE, tenant_slug),
    }[LineKind(kind)]
    return [(code, -amount)]
