from .invoices import Invoice, InvoiceCounter, InvoiceLine, PromotionUse, SlaCredit
from .ledger import Account, AppendOnlyModel, LedgerTransaction, Posting
from .pricing import DEFAULT_CREDIT_TIERS, Contract, Price, PromotionalCredit

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
    "SlaCredit",
]
