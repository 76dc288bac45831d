"""SLA credits posted to the ledger, per month."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal

from billing.models import SlaCredit


def sla_credit_totals(*, start: datetime, end: datetime) -> dict[datetime, Decimal]:
    """Posted SLA credits per month (first instant, UTC) for months starting in [start, end)."""
    totals: dict[datetime, Decimal] = defaultdict(Decimal)
    for month, amount in SlaCredit.objects.filter(
        month_start__gte=start, month_start__lt=end
    ).values_list("month_start", "amount"):
        totals[month.astimezone(UTC)] += amount
    return dict(totals)
