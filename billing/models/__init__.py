from billing.models.invoices import Invoice, InvoiceCounter, InvoiceLine, PromotionUse, SlaCredit
from billing.models.ledger import Account, AppendOnlyModel, LedgerTransaction, Posting
from billing.models.pricing import DEFAULT_CREDIT_TIERS, Contract, Price, PromotionalCredit
from billing.models.rated import (
    RatedChange,
    RatedHour,
    RatedTenantMonth,
    RatedUsage,
    RatingPending,
)

__all__ = [
    "DEFAULT_CREDIT_TIERS",
    "Account",
    "AppendOnlyModel",
    "Contract",
    "Invoice",
    "InvoiceCounter",
    "InvoiceLine",
    "LedgerTransaction",
    "Posting",
    "Price",
    "PromotionUse",
    "PromotionalCredit",
    "RatedChange",
    "RatedHour",
    "RatedTenantMonth",
    "RatedUsage",
    "RatingPending",
    "SlaCredit",
]
