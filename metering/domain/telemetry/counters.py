"""Counter increments with reset handling, and the engine-vs-metering reconciliation rule.

Pure: no Django. Semantics follow data-formats.md §0 and §8.8.
"""

from __future__ import annotations

import math


def counter_delta(*, previous: float | None, current: float) -> float:
    """Increase of one counter series between two scrapes, like PromQL `increase()`.

    The first observation (`previous is None`) is the baseline and returns 0.0: its
    value accumulated before we started watching. A drop (`current < previous`) is a
    counter reset after a restart, so the increase is `current` (counted from zero).
    The result is never negative.
    """
    if math.isnan(current) or current < 0:
        raise ValueError(f"a counter value must be a number >= 0, got {current}")
    if previous is None:
        return 0.0
    if current < previous:
        return current
    return current - previous


def reconciliation_flag(
    *,
    engine_output_tokens: float,
    metered_output_tokens: float,
    tolerance_ratio: float = 0.01,
    tolerance_tokens: float = 10_000,
) -> bool:
    """True when engine and metering disagree beyond tolerance (data-formats §8.8).

    "max(1%, 10,000 tokens)" is read as: allowed = max(tolerance_ratio x the larger of
    the two totals, tolerance_tokens). Flag when |engine - metered| > allowed, so a gap
    exactly at the tolerance is not flagged.
    """
    difference = abs(engine_output_tokens - metered_output_tokens)
    allowed = max(
        tolerance_ratio * max(abs(engine_output_tokens), abs(metered_output_tokens)),
        tolerance_tokens,
    )
    return difference > allowed
