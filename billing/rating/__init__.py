"""Rating: price one tenant's UTC month of usage into invoice lines (pure, no Django).

Contract: kpis.md section 3. `rate_month` is the entry point; `adjustment_line`
compares a re-rated month with what was invoiced for it.
"""

from billing.rating.engine import rate_month, tier_discount_pct, token_classes
from billing.rating.invoice import adjustment_line, invoice_total
from billing.rating.money import CURRENCY_EXPONENTS, minor_unit, round_money
from billing.rating.types import (
    ClassCharge,
    ContractKind,
    ContractVersion,
    InvoiceLine,
    LineKind,
    PriceVersion,
    PromotionalCredit,
    PromotionApplication,
    RatedItem,
    RatedMonth,
    RatingError,
    TokenClass,
    UnsoldReason,
    UsageItem,
    VolumeTier,
    month_bounds,
    total_discount_pct,
)

__all__ = [
    "CURRENCY_EXPONENTS",
    "ClassCharge",
    "ContractKind",
    "ContractVersion",
    "InvoiceLine",
    "LineKind",
    "PriceVersion",
    "PromotionApplication",
    "PromotionalCredit",
    "RatedItem",
    "RatedMonth",
    "RatingError",
    "TokenClass",
    "UnsoldReason",
    "UsageItem",
    "VolumeTier",
    "adjustment_line",
    "invoice_total",
    "minor_unit",
    "month_bounds",
    "rate_month",
    "round_money",
    "tier_discount_pct",
    "token_classes",
    "total_discount_pct",
]
