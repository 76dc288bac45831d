"""Budgets (kpis.md section 3c): a tenant's month-to-date spend against its `budget` rule,
from billing's read models only (the tenant-month's rated totals, rated usage, the rate
stage's mark), in a query count that does not grow with tenants; and the `budget` alert
kind evaluated from the same read. The month to date is the window every read of this month
answers for (kpis.md section 0: up to the published cut, portal.pipeline), and the rated
totals are the cut's: the rate stage writes them with it, so the budget counts what the
usage API, the KPIs and the pages count."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import F, Q, Sum
from django.db.models.functions import TruncDay

from billing.domain.budget import (
    BUDGET,
    NONE,
    STALE_AFTER,
    UNKNOWN,
    budget_projected,
    budget_state,
    thresholds_reached,
)
from billing.models import RatedMark, RatedTenantMonth, RatedUsage
from billing.selectors.month_to_date import month_spent
from metering.selectors.usage import usage_fold_backlog, window_resolve
from portal import clock
from portal.alert_kinds import Evaluation, Finding
from portal.formatting import rfc3339
from portal.models import AlertRule, Tenant
from portal.money import money_str, round_money
from portal.periods import month_start

TOKENS = "tokens"


@dataclass(frozen=True)
class Budget:
    """One tenant's budget this month: `unit` is its currency or "tokens"."""

    state: str  # none | unknown | ok | warning | exceeded
    unit: str
    month: datetime
    budget: Decimal | None = None
    spent: Decimal | None = None
    projected: Decimal | None = None
    as_of: datetime | None = None
    thresholds: tuple[int, ...] = ()
    reached: tuple[int, ...] = ()
    rule: AlertRule | None = None

    @property
    def remaining(self) -> Decimal | None:
        return None if self.spent is None else self.budget - self.spent

    def as_json(self) -> dict:
        def shown(value: Decimal | None) -> str | int | None:
            if value is None:
                return None
            if self.unit == TOKENS:
                return int(value)
            return money_str(amount=value, currency=self.unit)

        return {
            "state": self.state,
            "unit": self.unit,
            "month": self.month.strftime("%Y-%m"),
            "budget": shown(self.budget),
            "spent": shown(self.spent),
            "remaining": shown(self.remaining),
            "projected": shown(self.projected),
            "as_of": rfc3339(self.as_of) if self.as_of else None,
            "thresholds": list(self.thresholds),
            "reached": list(self.reached),
        }


def rated_as_of(*, now: datetime) -> datetime | None:
    """How far rated usage is current, or None (budgets then answer `unknown`, pages show
    no figure, never `ok` on stale ones) when it was never rated, when it is more than
    STALE_AFTER behind the newest accepted event or the last fold, whichever is later, or
    when an event has waited for the fold more than STALE_AFTER: so also while no worker
    runs at all and events are accepted."""
    mark = RatedMark.objects.values_list("rated_until", flat=True).first()
    if mark is None:
        return None
    backlog = usage_fold_backlog()
    if backlog.newest is not None and backlog.newest - mark > STALE_AFTER:
        return None
    if backlog.oldest_waiting is not None and now - backlog.oldest_waiting > STALE_AFTER:
        return None
    return min(mark, now)


def budgets_read(rules: Iterable[AlertRule], *, now: datetime | None = None) -> list[Budget]:
    """The budgets of `rules` (budget rules, each a tenant's) this month, in 4 queries
    however many."""
    now = now or clock.now()
    window = window_resolve({"period": "this_month"}, now=now)
    month, rules = window.start, list(rules)
    if rated_as_of(now=now) is None:
        return [_budget(rule, month=month, state=UNKNOWN) for rule in rules]
    as_of = window.to
    ids = [rule.tenant_id for rule in rules]
    money = {
        row.tenant_id: row
        for row in RatedTenantMonth.objects.filter(tenant_id__in=ids, month_start=month)
    }
    token_ids = [rule.tenant_id for rule in rules if "tokens" in rule.params]
    tokens = dict(
        RatedUsage.objects.filter(tenant_id__in=token_ids, month_start=month)
        .values("tenant_id")
        .annotate(total=Sum(F("input_tokens") + F("output_tokens")))
        .values_list("tenant_id", "total")
    ) if token_ids else {}  # fmt: skip
    budgets = []
    for rule in rules:
        if "tokens" in rule.params:
            unit, budget = TOKENS, Decimal(rule.params["tokens"])
            spent = Decimal(tokens.get(rule.tenant_id) or 0)
            projected = budget_projected(spent=spent, month=month, as_of=as_of).to_integral()
        else:
            rated = money.get(rule.tenant_id)
            unit = (rated and rated.currency) or settings.FACTORY_CURRENCY
            budget = Decimal(rule.params["amount"])
            exact = rated.usage_amount - rated.promotions if rated else Decimal(0)
            spent = month_spent(rated, currency=unit)
            projected = round_money(
                amount=budget_projected(spent=exact, month=month, as_of=as_of), currency=unit
            )
        thresholds = rule.params["thresholds"]
        budgets.append(
            Budget(
                state=budget_state(spent=spent, budget=budget, thresholds=thresholds),
                unit=unit,
                month=month,
                budget=budget,
                spent=spent,
                projected=projected,
                as_of=as_of,
                thresholds=tuple(thresholds),
                reached=tuple(
                    thresholds_reached(spent=spent, budget=budget, thresholds=thresholds)
                ),
                rule=rule,
            )
        )
    return budgets


def _budget(rule: AlertRule, *, month: datetime, state: str) -> Budget:
    unit = TOKENS if "tokens" in rule.params else settings.FACTORY_CURRENCY
    budget = Decimal(rule.params.get("tokens") or rule.params["amount"])
    return Budget(
        state=state,
        unit=unit,
        month=month,
        budget=budget,
        thresholds=tuple(rule.params["thresholds"]),
        rule=rule,
    )


def budget_days(budget: Budget) -> list[tuple[datetime, Decimal]]:
    """A budget's month so far, day by day: (day, spent up to its end), the last equal to
    `spent`. Each day's share of the month's spend is its share of the rated amounts (of
    the tokens, for a token budget): one query on the tenant-month's rated usage."""
    if budget.rule is None or not budget.spent:
        return []
    rows = RatedUsage.objects.filter(tenant_id=budget.rule.tenant_id, month_start=budget.month)
    measure = (
        Sum(F("input_tokens") + F("output_tokens"))
        if budget.unit == TOKENS
        else Sum("realized", filter=Q(sale=RatedUsage.Sale.PAID))
    )
    daily = list(
        rows.annotate(day=TruncDay("hour", tzinfo=UTC))
        .values("day")
        .annotate(amount=measure)
        .order_by("day")
        .values_list("day", "amount")
    )
    total = sum((amount or 0 for _, amount in daily), Decimal(0))
    if not total:
        return []
    days, running = [], Decimal(0)
    for day, amount in daily:
        running += amount or 0
        days.append((day, budget.spent * running / total))
    return days


def budget_get(*, tenant: Tenant, now: datetime | None = None) -> Budget:
    """A tenant's budget this month; `none` without a budget rule (a disabled one too)."""
    now = now or clock.now()
    rule = AlertRule.objects.filter(kind=BUDGET, tenant=tenant, enabled=True)
    rule = rule.select_related("tenant").first()
    if rule is None:
        return Budget(state=NONE, unit=settings.FACTORY_CURRENCY, month=month_start(now))
    return budgets_read([rule], now=now)[0]


def _text(budget: Budget, value: Decimal) -> str:
    """A budget figure in a sentence: grouped, money to the cent (1,332,628.05)."""
    if budget.unit == TOKENS:
        return f"{int(value):,}"
    return f"{round_money(amount=value, currency=budget.unit):,}"


def budget_evaluate(rules: list[AlertRule], now: datetime) -> Evaluation:
    """The `budget` kind: each threshold reached this month is a finding (keyed by the
    month and the threshold, so each fires once a month); rules read as unknown are
    skipped (stale figures neither fire nor resolve)."""
    findings, skipped = [], set()
    for budget in budgets_read(rules, now=now):
        rule = budget.rule
        if budget.state == UNKNOWN:
            skipped.add(rule.pk)
            continue
        shown = budget.as_json()
        spent, of, projected = (
            _text(budget, value) for value in (budget.spent, budget.budget, budget.projected)
        )
        for threshold in budget.reached:
            findings.append(
                Finding(
                    rule=rule,
                    window_start=budget.month,
                    threshold=str(threshold),
                    value=f"{budget.spent * 100 / budget.budget:.1f}%",
                    summary=(
                        f"{rule.tenant.name} reached {threshold}% of its {budget.month:%B %Y} "
                        f"budget: {spent} of {of} {budget.unit} spent, {projected} projected"
                    ),
                    figures={k: shown[k] for k in ("budget", "spent", "projected", "as_of")},
                    link="/",
                )
            )
    return Evaluation(findings=findings, skipped=skipped)
