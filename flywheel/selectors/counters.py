"""Reads of the counters /metrics publishes (flywheel.services.counters keeps them)."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

from django.db.models import Max

from flywheel.models import CounterMonth, CounterValue


def counter_values() -> dict[str, list[tuple[list[str], Decimal]]]:
    """Every published series by counter name: its label values and value (one query)."""
    values: dict[str, list[tuple[list[str], Decimal]]] = {}
    for name, labels, value in CounterValue.objects.values_list("name", "labels", "value"):
        values.setdefault(name, []).append((json.loads(labels), value))
    return values


def counted_until() -> datetime | None:
    """The end of the last whole hour the counters count (None before any)."""
    return CounterMonth.objects.aggregate(until=Max("until"))["until"]
