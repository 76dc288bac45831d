from billing.models.close import CloseStep, MonthClose
from billing.models.credit_notes import CreditNote, CreditNoteLine
from billing.models.invoices import (
    DocumentCounter,
    Invoice,
    InvoiceLine,
    PromotionUse,
    SlaCredit,
)
from billing.models.ledger import Account, AppendOnlyModel, LedgerTransaction, Posting
from billing.models.prepaid import PrepaidBalance, PrepaidBreakage, PrepaidDraw
from billing.models.pricing import DEFAULT_CREDIT_TIERS, Contract, Price, PromotionalCredit
from billing.models.rating import (
    RatedChange,
    RatedHour,
    RatedHourPrefix,
    RatedMark,
    RatedTenantMonth,
    RatedUsage,
    RatedUsageMonth,
    RatingPending,
)
from billing.models.reservations import (
    SERVICE_TIER_CHOICES,
    Reservation,
    ReservationGpus,
    ServiceTierMultiplier,
)

__all__ = [
    "DEFAULT_CREDIT_TIERS",
    "SERVICE_TIER_CHOICES",
    "Account",
    "AppendOnlyModel",
    "CloseStep",
    "Contract",
    "CreditNote",
    "CreditNoteLine",
    "DocumentCounter",
    "Invoice",
    "InvoiceLine",
    "LedgerTransaction",
    "MonthClose",
    "Posting",
    "PrepaidBalance",
    "PrepaidBreakage",
    "PrepaidDraw",
    "Price",
    "PromotionUse",
    "PromotionalCredit",
    "RatedChange",
    "RatedHour",
    "RatedHourPrefix",
    "RatedMark",
    "RatedTenantMonth",
    "RatedUsage",
    "RatedUsageMonth",
    "RatingPending",
    "Reservation",
    "ReservationGpus",
    "ServiceTierMultiplier",
    "SlaCredit",
]
