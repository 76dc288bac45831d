"""Aged receivables (kpis.md "Credit notes, balances and receivables"): an invoice's
outstanding amount as of a day, aged in whole UTC days past its due day (the due day itself
is current) into current, 1–30, 31–60, 61–90 and 90+."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

BUCKETS = ("current", "days_1_30", "days_31_60", "days_61_90", "days_over_90")
BUCKET_LABELS = {
    "current": "Current",
    "days_1_30": "1–30 days",
    "days_31_60": "31–60 days",
    "days_61_90": "61–90 days",
    "days_over_90": "Over 90 days",
}


def age_bucket(*, as_of: date, due: date) -> str:
    """The bucket of an amount due on `due`, as of `as_of`."""
    days = (as_of - due).days
    if days <= 0:
        return "current"
    if days <= 30:
        return "days_1_30"
    if days <= 60:
        return "days_31_60"
    if days <= 90:
        return "days_61_90"
    return "days_over_90"


def outstanding_amount(*, total: Decimal, paid: Decimal, reduced: Decimal) -> Decimal:
    """Total less payments and the part of credit notes that reduced it, never below 0."""
    return max(total - paid - reduced, Decimal(0))
