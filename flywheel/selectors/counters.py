"""Reads of the counters /metrics publishes (flywheel.services.counters keeps them)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db.models import Max

from flywheel.models import CounterMonth, CounterValue


def counter_values() -> dict[str, list[tuple[str, Decimal]]]:
    """Every published series by counter name: its labels (as the exposition writes them)
    and value, in order (one query)."""
    values: dict[str, list[tuple[str, Decimal]]] = {}
    rows = CounterValue.objects.order_by("name", "labels").values_list("name", "labels", "value")
    for name, labels, value in rows:
        values.setdefault(name, []).append((labels, value))
    return values


def counted_until() -> datetime | None:
    """The end of the last whole hour the counters count (None before any)."""
    return CounterMonth.objects.aggregate(until=Max("until"))["until"]
