"""A tenant's budgets (kpis.md 3c) and its projects' quotas (3e): their params (a `period`,
month or day, and `enforce`, soft or hard), their state and projection. Pure: the figures
come from billing's read models (billing.selectors.budget)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from billing.domain.rating.types import month_bounds
from portal.errors import FieldError
from portal.money import currency_places, money_parse, round_money

BUDGET = "budget"  # the alert kind of a tenant's budget (one per scope and period)
DEFAULT_THRESHOLDS = (50, 80, 100)  # percents of the budget, each reached once a month
STALE_AFTER = timedelta(minutes=15)  # rated usage further behind: state unknown (rated_as_of)
LEAST_ELAPSED = timedelta(hours=1)  # a projection never extrapolates less than this
MAX_TOKENS = 10**18

OK, WARNING, EXCEEDED, UNKNOWN, NONE = "ok", "warning", "exceeded", "unknown", "none"
MONTH, DAY = "month", "day"  # a budget's period
SOFT, HARD = "soft", "hard"  # alerts only, or also `blocked` once exceeded (gateways block)


def budget_params_check(params: dict, *, currency: str) -> dict:
    """{"amount": "5000.00"} (money in `currency`, whole cents) or {"tokens": 2000000000},
    optionally "thresholds": whole percents 1–1000 (default 50, 80, 100), "period": month
    (default) or day, "enforce": soft (default) or hard; errors name params.<x>."""
    if unknown := sorted(set(params) - {"amount", "tokens", "thresholds", "period", "enforce"}):
        raise FieldError(
            f"params.{unknown[0]}",
            "a budget takes amount or tokens, thresholds, period and enforce",
        )
    amount, tokens = params.get("amount"), params.get("tokens")
    if (amount is None) == (tokens is None):
        raise FieldError("params.amount", "give amount (money) or tokens, one of them")
    checked: dict = {}
    if amount is not None:
        checked["amount"] = str(_amount(amount, currency))
    else:
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 < tokens < MAX_TOKENS:
            raise FieldError("params.tokens", "a whole number of tokens above 0")
        checked["tokens"] = tokens
    thresholds = params.get("thresholds", list(DEFAULT_THRESHOLDS))
    if not isinstance(thresholds, list) or not thresholds:
        raise FieldError("params.thresholds", "a list of whole percents, e.g. [50, 80, 100]")
    for value in thresholds:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1000:
            raise FieldError("params.thresholds", "whole percents from 1 to 1000")
    checked["thresholds"] = sorted(set(thresholds))
    for name, allowed in (("period", (MONTH, DAY)), ("enforce", (SOFT, HARD))):
        value = params.get(name, allowed[0])
        if value not in allowed:
            raise FieldError(f"params.{name}", f"{allowed[0]} (default) or {allowed[1]}")
        checked[name] = value
    return checked


def budget_period(params: dict) -> str:
    return params.get("period", MONTH)


def budget_enforce(params: dict) -> str:
    return params.get("enforce", SOFT)


def budget_one_key(scope: dict, params: dict) -> str:
    """What a tenant's budget is one of (AlertRule.one_key): its project and its period ("" for
    the tenant's monthly budget, as every budget before projects)."""
    parts = [f"project:{scope['project']}"] if scope.get("project") else []
    if budget_period(params) != MONTH:
        parts.append(f"period:{budget_period(params)}")
    return " ".join(parts)


def period_bounds(*, period: str, now: datetime) -> tuple[datetime, datetime]:
    """The UTC month or day holding `now`."""
    if period == DAY:
        start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    start = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return month_bounds(month_start=start)


def _amount(value, currency: str) -> Decimal:
    amount = money_parse(
        value, field="params.amount", places=currency_places(currency), positive=True
    )
    return round_money(amount=amount, currency=currency)  # "5000" kept as "5000.00"


def budget_projected(*, spent: Decimal, start: datetime, end: datetime, as_of: datetime) -> Decimal:
    """The spend of the period [start, end) at its pace so far: spent × seconds(period) /
    seconds elapsed up to `as_of` (at least an hour)."""
    elapsed = max(as_of - start, LEAST_ELAPSED)
    return spent * Decimal((end - start).total_seconds()) / Decimal(elapsed.total_seconds())


def budget_state(*, spent: Decimal, budget: Decimal, thresholds: list[int]) -> str:
    """exceeded from 100 %, warning from the highest threshold below 100, else ok."""
    share = spent * 100 / budget
    below = [t for t in thresholds if t < 100]
    if share >= 100:
        return EXCEEDED
    return WARNING if below and share >= max(below) else OK


def thresholds_reached(*, spent: Decimal, budget: Decimal, thresholds: list[int]) -> list[int]:
    return [t for t in thresholds if spent * 100 >= budget * t]
