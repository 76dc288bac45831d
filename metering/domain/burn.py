"""The SLO burn rate (kpis.md section 3c): how fast a deployment spends its error budget.

`burn(W) = (1 − compliant(W) / requests(W)) / (1 − target)` over a window W; an alert fires
when both windows of a pair exceed the pair's factor, and never on a long window of fewer
than `min_requests` requests. Pure: the windows' sums come from the 5-minute buckets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import cast

from portal.errors import FieldError

DEFAULT_TARGET = Decimal("0.99")
DEFAULT_MIN_REQUESTS = 100
BUCKET = timedelta(minutes=5)


@dataclass(frozen=True)
class WindowPair:
    long: timedelta
    short: timedelta
    factor: Decimal
    level: str

    @property
    def name(self) -> str:
        """ "1h/5m": the alert's threshold, which keys it."""
        return f"{_span(self.long)}/{_span(self.short)}"


def _span(window: timedelta) -> str:
    hours = int(window.total_seconds()) // 3600
    if hours >= 24:
        return f"{hours // 24}d"
    return f"{hours}h" if hours else f"{int(window.total_seconds()) // 60}m"


def span_words(window: timedelta) -> str:
    """A window as people say it: 1 h, 5 min, 3 days."""
    hours = int(window.total_seconds()) // 3600
    if hours >= 24:
        days = hours // 24
        return f"{days} day{'s' if days > 1 else ''}"
    return f"{hours} h" if hours else f"{int(window.total_seconds()) // 60} min"


PAIRS = (
    WindowPair(timedelta(hours=1), timedelta(minutes=5), Decimal("14.4"), "critical"),
    WindowPair(timedelta(hours=6), timedelta(minutes=30), Decimal(6), "critical"),
    WindowPair(timedelta(days=3), timedelta(hours=6), Decimal(1), "warning"),
)
# Every window any pair reads, shortest first.
WINDOWS = tuple(sorted({w for pair in PAIRS for w in (pair.long, pair.short)}))
LONGEST = WINDOWS[-1]


def burn_threshold_shown(threshold: str, figures: dict) -> str:
    """An slo_burn alert's threshold (its pair's name) in words: "1h/5m" → "14.4× over 1 h
    and 5 min" (the rate both windows exceeded)."""
    pair = next((pair for pair in PAIRS if pair.name == threshold), None)
    if pair is None:
        return threshold
    return f"{pair.factor}× over {span_words(pair.long)} and {span_words(pair.short)}"


def burn_value_shown(value: str, figures: dict) -> str:
    """An slo_burn alert's value (the long window's burn) in words: "15.2× the budget
    rate"."""
    return f"{value}× the budget rate"


@dataclass(frozen=True)
class Counts:
    requests: int = 0
    compliant: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.requests + other.requests, self.compliant + other.compliant)


def burn(counts: Counts, *, target: Decimal) -> Decimal | None:
    """The burn rate of a window's counts; None without requests."""
    if not counts.requests:
        return None
    return (1 - Decimal(counts.compliant) / Decimal(counts.requests)) / (1 - target)


@dataclass(frozen=True)
class Burning:
    """A pair whose two windows both burn faster than its factor."""

    pair: WindowPair
    long: Counts
    short: Counts
    long_burn: Decimal
    short_burn: Decimal


def burning_pairs(
    windows: dict[timedelta, Counts], *, target: Decimal, min_requests: int
) -> list[Burning]:
    """The pairs that fire on the windows' counts (every window of WINDOWS given)."""
    burning = []
    for pair in PAIRS:
        long, short = windows[pair.long], windows[pair.short]
        if long.requests < min_requests:
            continue
        # Not None: the long window holds min_requests (1 or more, slo_burn_params_check).
        long_burn = cast(Decimal, burn(long, target=target))
        short_burn = burn(short, target=target)
        if short_burn is not None and long_burn > pair.factor and short_burn > pair.factor:
            burning.append(Burning(pair, long, short, long_burn, short_burn))
    return burning


def target_check(value, *, field: str) -> Decimal:
    """A target share: a number strictly between 0 and 1 (0.995)."""
    try:
        target = Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise FieldError(field, "a number between 0 and 1, such as 0.995") from None
    if not target.is_finite() or not 0 < target < 1:
        raise FieldError(field, "a number between 0 and 1, such as 0.995")
    return target


def slo_burn_params_check(params: dict) -> dict:
    """`target` (optional: the tenant's contract's, else the deployment version's) and
    `min_requests` (default 100), normalized: {"target": "0.995", "min_requests": 100}."""
    if unknown := sorted(set(params) - {"target", "min_requests"}):
        raise FieldError(f"params.{unknown[0]}", "an slo_burn rule takes target, min_requests")
    checked = {}
    if params.get("target") is not None:
        checked["target"] = str(target_check(params["target"], field="params.target"))
    minimum = params.get("min_requests", DEFAULT_MIN_REQUESTS)
    if isinstance(minimum, bool) or not isinstance(minimum, int) or not 1 <= minimum <= 10**9:
        raise FieldError("params.min_requests", "a whole number of requests, 1 or more")
    checked["min_requests"] = minimum
    return checked
