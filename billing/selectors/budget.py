"""Budgets (kpis.md 3c) and projects' quotas (3e): a tenant's, or one of its projects', spend
this month or day against its `budget` rules, from billing's read models only (the
tenant-month's rated totals, rated usage per project, the rate stage's mark), in a query
count that does not grow with tenants; the budget read a gateway blocks on; and the
`budget` alert kind evaluated from the same read. The month to date is the window every read
of this month answers for (kpis.md section 0: up to the published cut, portal.pipeline), and
the rated totals are the cut's: the rate stage writes them with it, so the budget counts what
the usage API, the KPIs and the pages count."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from weakref import WeakKeyDictionary

from django.conf import settings
from django.db import connections
from django.db.models import F, Q, QuerySet, Sum
from django.db.models.functions import TruncDay

from billing.domain.budget import (
    BUDGET,
    DAY,
    EXCEEDED,
    HARD,
    MONTH,
    NONE,
    SOFT,
    STALE_AFTER,
    UNKNOWN,
    budget_enforce,
    budget_period,
    budget_projected,
    budget_state,
    period_bounds,
    thresholds_reached,
)
from billing.models import RatedMark, RatedTenantMonth, RatedUsage
from billing.selectors.month_to_date import month_spent
from metering.selectors.usage import (
    FoldBacklog,
    fold_backlog_columns,
    fold_backlog_of,
    window_until,
)
from portal import clock
from portal.alert_kinds import Evaluation, Finding
from portal.bulk import ModelColumns, constant_rows, prepared_cursor, statement_cursor
from portal.errors import FieldError
from portal.formatting import rfc3339
from portal.models import AlertRule, Project, Tenant
from portal.money import EXACT, money_str, round_money
from portal.periods import month_start
from portal.pipeline import Cut, cut_columns, cut_of
from portal.snapshot import snapshot_read

TOKENS = "tokens"


@dataclass(frozen=True)
class Budget:
    """One budget of a tenant, or of one of its projects, this period (its month or day):
    `unit` is its currency or "tokens"."""

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
    period: str = MONTH
    start: datetime | None = None  # the period's first instant (the month's, or the day's)
    project: str = ""  # the project's slug; "" for the tenant's own budget
    enforce: str = SOFT

    @property
    def remaining(self) -> Decimal | None:
        return None if self.spent is None else self.budget - self.spent

    @property
    def blocked(self) -> bool:
        """A hard budget exceeded: a gateway blocks its scope (kpis.md 3e)."""
        return self.enforce == HARD and self.state == EXCEEDED

    def scope_json(self) -> dict:
        scope = {"tenant": self.rule.tenant.slug if self.rule else None}
        if self.project:
            scope["project"] = self.project
        return {**scope, "period": self.period}

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
            "period": self.period,
            "period_start": rfc3339(self.start or self.month),
            "project": self.project or None,
            "enforce": self.enforce,
            "blocked": self.blocked,
            "budget": shown(self.budget),
            "spent": shown(self.spent),
            "remaining": shown(self.remaining),
            "projected": shown(self.projected),
            "as_of": rfc3339(self.as_of) if self.as_of else None,
            "thresholds": list(self.thresholds),
            "reached": list(self.reached),
        }


def _marks() -> tuple[datetime, FoldBacklog, Cut | None] | None:
    """The rating's mark, the fold's backlog and the published cut, in one query; None
    before the rate first ran."""
    found = constant_rows(RatedMark, _marks_row)
    return _marks_of(found[0]) if found else None


def _marks_of(row: tuple) -> tuple[datetime, FoldBacklog, Cut | None]:
    """_marks from a row of `_marks_row`."""
    return row[0], fold_backlog_of(*row[1:4]), cut_of(*row[4:6])


def _marks_row() -> QuerySet:
    fold, cut = fold_backlog_columns(), cut_columns()
    row = RatedMark.objects.annotate(**fold, **cut).values_list("rated_until", *fold, *cut)
    return row.order_by("pk")[:1]


def _as_of(marks: tuple | None, *, now: datetime) -> datetime | None:
    """rated_as_of from `_marks`."""
    if marks is None:
        return None
    mark, backlog, _ = marks
    if backlog.newest is not None and backlog.newest - mark > STALE_AFTER:
        return None
    if backlog.oldest_waiting is not None and now - backlog.oldest_waiting > STALE_AFTER:
        return None
    return min(mark, now)


def rated_as_of(*, now: datetime) -> datetime | None:
    """How far rated usage is current, or None (budgets then answer `unknown`, pages show
    no figure, never `ok` on stale ones) when it was never rated, when it is more than
    STALE_AFTER behind the newest accepted event or the last fold, whichever is later, or
    when an event has waited for the fold more than STALE_AFTER: so also while no worker
    runs at all and events are accepted. One query: the fold's backlog is read with the
    rating's mark."""
    return _as_of(_marks(), now=now)


def _project_of(rule: AlertRule) -> str:
    return (rule.scope or {}).get("project") or ""


def _is_whole_month(rule: AlertRule) -> bool:
    """The tenant's monthly budget: in money, read from its tenant-month's rated totals."""
    return not _project_of(rule) and budget_period(rule.params) == MONTH


def _of_rated_usage(rule: AlertRule) -> bool:
    """Read from rated usage: a project's, a day's, or a tenant's monthly token budget."""
    return "tokens" in rule.params or not _is_whole_month(rule)


def _wanted(rules: list[AlertRule], slugs: dict | None) -> tuple[list[int], list | None, dict]:
    """The tenants whose rated usage the rules read from it (_of_rated_usage) sum, their
    projects (None: every row of those tenants; the projects' only when every such rule is
    a project's) and the projects' slugs by (tenant id, project id): a query unless the
    caller read the projects the rules name already (`slugs`)."""
    wanted = [rule for rule in rules if _of_rated_usage(rule)]
    ids = {rule.tenant_id for rule in wanted}
    if slugs is None:
        slugs = {
            (tenant_id, pk): slug
            for tenant_id, pk, slug in Project.objects.filter(
                tenant_id__in=ids, slug__in={_project_of(rule) for rule in wanted} - {""}
            ).values_list("tenant_id", "pk", "slug")
        }
    projects = None
    if all(_project_of(rule) for rule in wanted):  # projects' only: their rows only
        projects = [pk for _, pk in slugs]
    return sorted(ids), projects, slugs


def _cells(sums: list[tuple], slugs: dict) -> dict[tuple, list]:
    """[tokens, realized, tokens of the day, realized of the day] of the month's rated usage
    (`sums`, as _month_read's) per (tenant id, project slug of `slugs`) and per (tenant id,
    "")."""
    cells: dict[tuple, list] = defaultdict(lambda: [Decimal(0)] * 4)
    for tenant_id, project_id, *values in sums:
        keys = [(tenant_id, "")]
        if (tenant_id, project_id) in slugs:
            keys.append((tenant_id, slugs[tenant_id, project_id]))
        for key in keys:
            cells[key] = [a + Decimal(b or 0) for a, b in zip(cells[key], values, strict=True)]
    return cells


# The tenant-month's rated totals a budget reads (not its lines and quantities: JSON decoded
# at every read for nothing).
_MONEY = ("tenant_id", "currency", "usage_amount", "promotions", "promotion_rate")

# The rated usage sums of _month_read on PostgreSQL (its positional values: paid twice, the
# day twice, the tenants, the month, and the projects in {projects}: "AND project_id =
# ANY(%s::bigint[])", or nothing for every project). Two statements, not one condition
# `(%s OR project_id = ANY(…))`: a prepared statement's generic plan cannot use the
# (tenant, month, project) index for such a condition, and took 6–9 ms a read for p01.
_SUMS = f"""
    SELECT tenant_id, project_id, SUM(input_tokens + output_tokens) AS tokens,
        SUM(realized) FILTER (WHERE sale = %s) AS realized,
        SUM(input_tokens + output_tokens) FILTER (WHERE hour >= %s) AS day_tokens,
        SUM(realized) FILTER (WHERE sale = %s AND hour >= %s) AS day_realized
    FROM {RatedUsage._meta.db_table}
    WHERE tenant_id = ANY(%s::bigint[]) AND month_start = %s {{projects}}
    GROUP BY tenant_id, project_id
"""  # noqa: S608 (the model's table)
_SUMMED = ("tenant_id", "project_id", "tokens", "realized", "day_tokens", "day_realized")

_month_statements: WeakKeyDictionary = WeakKeyDictionary()


def _month_statement(using: str, *, of_projects: bool) -> tuple:
    """_month_read's statement on PostgreSQL (summing some projects' rows, or every row of
    the tenants), built once a connection: the marks' row (_marks_row) beside the
    tenant-months' totals and the sums, each as one row of arrays (none when the rate never
    ran); its marks' values and the ORM's converters of them."""
    db = connections[using]
    if (made := _month_statements.setdefault(db, {}).get(of_projects)) is None:
        compiler = _marks_row().query.get_compiler(using=using)
        marks, params = compiler.as_sql()
        converters = compiler.get_converters([column[0] for column in compiler.select])
        months = ", ".join(f"array_agg({column})" for column in _MONEY)
        sums = ", ".join(f"array_agg({column})" for column in _SUMMED)
        summed = _SUMS.format(projects="AND project_id = ANY(%s::bigint[])" if of_projects else "")
        sql = (
            f"SELECT marks.*, months.*, sums.* FROM ({marks}) marks, "  # noqa: S608 (the models' names)
            f"(SELECT {months} FROM {RatedTenantMonth._meta.db_table} "
            f"WHERE tenant_id = ANY(%s::bigint[]) AND month_start = %s) months, "
            f"(SELECT {sums} FROM ({summed}) summed) sums"
        )
        made = _month_statements[db][of_projects] = (sql, list(params), compiler, converters)
    return made


def _month_read(
    *,
    tenants: list[int],
    of_usage: list[int],
    projects: list[int] | None,
    month: datetime,
    day: datetime,
) -> tuple[tuple | None, dict[int, RatedTenantMonth], list[tuple]]:
    """Of one instant: the rating's marks (as _marks), the `tenants`' tenant-month totals of
    `month` by tenant id, and (tenant id, project id, tokens, realized, tokens of the day,
    realized of the day) of the `of_usage` tenants' rated usage of `month` (of their
    `projects` only, unless None) per tenant and project: paid sales' realized amounts, `day`
    onwards for the day's; None, {} and [] before the rate first ran. On PostgreSQL one
    statement prepared once a connection, its own snapshot (a gateway's read opens no
    transaction); elsewhere _month_read_of_orm."""
    using = RatedUsage.objects.db  # the request's reads (a replica's in a GET)
    if connections[using].vendor != "postgresql":
        return _month_read_of_orm(
            tenants=tenants, of_usage=of_usage, projects=projects, month=month, day=day
        )
    sql, params, compiler, converters = _month_statement(using, of_projects=projects is not None)
    paid = RatedUsage.Sale.PAID.value
    params = [*params, tenants, month, paid, day, paid, day, of_usage, month]
    if projects is not None:
        params.append(projects)
    with prepared_cursor(using) as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()
    if found is None:
        return None, {}, []
    width = len(compiler.select)
    marks = found[:width]
    if converters:
        [marks] = compiler.apply_converters([marks], converters)
    months, sums = found[width : width + len(_MONEY)], found[width + len(_MONEY) :]
    money = {
        row[0]: RatedTenantMonth(**dict(zip(_MONEY, row, strict=True)))
        for row in zip(*(column or [] for column in months), strict=True)
    }
    return _marks_of(marks), money, list(zip(*(column or [] for column in sums), strict=True))


def _month_read_of_orm(
    *,
    tenants: list[int],
    of_usage: list[int],
    projects: list[int] | None,
    month: datetime,
    day: datetime,
) -> tuple[tuple | None, dict[int, RatedTenantMonth], list[tuple]]:
    """_month_read in three queries of the GET's snapshot (SQLite's; PostgreSQL's is
    compared with it in the tests)."""
    snapshot_read()  # the marks and the cut of one instant, and every figure after them
    marks = _marks()
    if marks is None:
        return None, {}, []
    rated_months = RatedTenantMonth.objects.filter(tenant_id__in=tenants, month_start=month)
    money = {row.tenant_id: row for row in rated_months.only(*_MONEY)}
    tokens = F("input_tokens") + F("output_tokens")
    paid, today = Q(sale=RatedUsage.Sale.PAID), Q(hour__gte=day)
    rows = RatedUsage.objects.filter(tenant_id__in=of_usage, month_start=month)
    if projects is not None:
        rows = rows.filter(project_id__in=projects)
    rows = rows.values("tenant_id", "project_id").annotate(
        month_tokens=Sum(tokens),
        month_realized=Sum("realized", filter=paid),
        day_tokens=Sum(tokens, filter=today),
        day_realized=Sum("realized", filter=paid & today),
    )
    fields = ["month_tokens", "month_realized", "day_tokens", "day_realized"]
    return marks, money, list(rows.values_list("tenant_id", "project_id", *fields))


def budgets_read(
    rules: Iterable[AlertRule], *, now: datetime | None = None, slugs: dict | None = None
) -> list[Budget]:
    """The budgets of `rules` (budget rules, each a tenant's or one of its projects') this
    period, in 2 queries however many (the projects the rules name; then the rating's mark
    with the fold's and the cut, the tenant-months' rated totals and their rated usage of
    one instant, _month_read); 1 given the projects' `slugs`."""
    now = now or clock.now()
    rules = list(rules)
    of_usage, projects, slugs = _wanted(rules, slugs)
    marks, money, sums = _month_read(
        tenants=sorted({rule.tenant_id for rule in rules}),
        of_usage=of_usage,
        projects=projects,
        month=month_start(now),
        day=period_bounds(period=DAY, now=now)[0],
    )
    cut = marks[2] if marks else None
    month, as_of = window_until({"period": "this_month"}, now=now, cut=cut)
    if _as_of(marks, now=now) is None:
        return [_budget(rule, month=month, state=UNKNOWN, now=now) for rule in rules]
    cells = _cells(sums, slugs)
    budgets = []
    for rule in rules:
        period = budget_period(rule.params)
        start, end = period_bounds(period=period, now=now)
        rated = money.get(rule.tenant_id)
        cell = cells.get((rule.tenant_id, _project_of(rule)), [Decimal(0)] * 4)
        of_day = 2 if period == DAY else 0
        if "tokens" in rule.params:
            unit, budget = TOKENS, Decimal(rule.params["tokens"])
            spent = cell[of_day]
            projected = budget_projected(spent=spent, start=start, end=end, as_of=as_of)
            projected = projected.to_integral()
        else:
            unit = (rated and rated.currency) or settings.FACTORY_CURRENCY
            budget = Decimal(rule.params["amount"])
            if _is_whole_month(rule):
                exact = rated.usage_amount - rated.promotions if rated else Decimal(0)
                spent = month_spent(rated, currency=unit)
            else:  # a row's promotions are its realized amount × the month's promotion rate
                rate = rated.promotion_rate if rated else Decimal(0)
                with localcontext(EXACT):
                    exact = cell[1 + of_day] * (1 - rate)
                spent = round_money(amount=exact, currency=unit)
            projected = round_money(
                amount=budget_projected(spent=exact, start=start, end=end, as_of=as_of),
                currency=unit,
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
                **_rule_fields(rule, now=now),
            )
        )
    return budgets


def _rule_fields(rule: AlertRule, *, now: datetime) -> dict:
    period = budget_period(rule.params)
    return {
        "period": period,
        "start": period_bounds(period=period, now=now)[0],
        "project": _project_of(rule),
        "enforce": budget_enforce(rule.params),
    }


def _budget(rule: AlertRule, *, month: datetime, state: str, now: datetime) -> Budget:
    unit = TOKENS if "tokens" in rule.params else settings.FACTORY_CURRENCY
    budget = Decimal(rule.params.get("tokens") or rule.params["amount"])
    return Budget(
        state=state,
        unit=unit,
        month=month,
        budget=budget,
        thresholds=tuple(rule.params["thresholds"]),
        rule=rule,
        **_rule_fields(rule, now=now),
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


def _rules(tenant: Tenant):
    return AlertRule.objects.filter(kind=BUDGET, tenant=tenant, enabled=True).select_related(
        "tenant"
    )


_rule_statements: WeakKeyDictionary = WeakKeyDictionary()


def _rules_read(tenant: Tenant, project: str = "") -> tuple[list[AlertRule], int | None]:
    """The rules of `_rules`, each holding `tenant`, and the id of the tenant's project
    `project` (None: it has no project of that slug): one statement built once a connection,
    prepared on PostgreSQL (the ORM took about a millisecond building and compiling it at
    every budget read), the project's row joined to the rules so that it is read without
    them too."""
    using = AlertRule._default_manager.db
    db = connections[using]
    if (made := _rule_statements.get(db)) is None:
        columns = ModelColumns(db, [(AlertRule, "r")])
        quote, field = db.ops.quote_name, AlertRule._meta.get_field
        kind, of, enabled, pk = (
            quote(field(name).column) for name in ("kind", "tenant", "enabled", "id")
        )
        in_tenant, slug = (
            quote(Project._meta.get_field(name).column) for name in ("tenant", "slug")
        )
        named = (
            f"SELECT {quote(Project._meta.pk.column)} FROM {quote(Project._meta.db_table)} "  # noqa: S608 (names from the model)
            f"WHERE {in_tenant} = %s AND {slug} = %s"
        )
        sql = (
            f"SELECT {columns.select}, p.id FROM (SELECT ({named}) AS id) p "  # noqa: S608 (names from the model)
            f"LEFT JOIN {quote(AlertRule._meta.db_table)} r "
            f"ON r.{kind} = %s AND r.{of} = %s AND r.{enabled} = %s ORDER BY r.{pk}"
        )
        made = _rule_statements[db] = (sql, columns)
    sql, columns = made
    with statement_cursor(using) as cursor:
        cursor.execute(sql, [tenant.pk, project, BUDGET, tenant.pk, True])
        rows = cursor.fetchall()
    read = [columns.read(row) for row in rows]  # one row at least: the project's
    rules = [rule for (rule,), _ in read if rule is not None]
    for rule in rules:
        AlertRule._meta.get_field("tenant").set_cached_value(rule, tenant)
    return rules, read[0][1][0]


def budget_get(*, tenant: Tenant, now: datetime | None = None) -> Budget:
    """A tenant's monthly budget this month; `none` without one (a disabled one too)."""
    now = now or clock.now()
    rule = _rules(tenant).filter(one_key="").first()
    if rule is None:
        return Budget(state=NONE, unit=settings.FACTORY_CURRENCY, month=month_start(now))
    return budgets_read([rule], now=now)[0]


def budget_answer(*, tenant: Tenant, project: str = "", now: datetime | None = None) -> dict:
    """What a gateway asks before a request (kpis.md 3e): the tenant's monthly budget as
    before, every budget of the tenant (and of `project`, a slug of its projects) this
    period, and `blocked` when a hard one of them is exceeded, `blocked_by` naming the
    first such scope, the tenant's before the project's (a tenant's hard budget blocks all
    its projects). A slug the tenant has no project of is a FieldError naming `project`."""
    now = now or clock.now()
    rules, project_id = _rules_read(tenant, project)
    slugs = {}
    if project:
        if project_id is None:
            raise FieldError("project", f"{tenant.slug} has no project {project!r}")
        slugs[tenant.pk, project_id] = project
    rules = [rule for rule in rules if _project_of(rule) in ("", project)]
    rules.sort(key=lambda rule: (bool(_project_of(rule)), rule.one_key))
    budgets = budgets_read(rules, now=now, slugs=slugs)
    whole = next((b for b in budgets if not b.project and b.period == MONTH), None)
    if whole is None:
        whole = Budget(state=NONE, unit=settings.FACTORY_CURRENCY, month=month_start(now))
    blocking = next((b for b in budgets if b.blocked), None)
    answer = {
        **whole.as_json(),
        "blocked": blocking is not None,
        "blocked_by": blocking.scope_json() if blocking else None,
        "budgets": [budget.as_json() for budget in budgets],
    }
    if project:
        own = [b for b in budgets if b.project == project]
        answer["project"] = {
            "slug": project,
            "blocked": any(b.blocked for b in own),
            "budgets": [budget.as_json() for budget in own],
        }
    return answer


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
        whose = rule.tenant.name + (f" project {budget.project}" if budget.project else "")
        when = f"{budget.month:%B %Y}" if budget.period == MONTH else f"{budget.start:%Y-%m-%d}"
        for threshold in budget.reached:
            findings.append(
                Finding(
                    rule=rule,
                    window_start=budget.start or budget.month,
                    threshold=str(threshold),
                    value=f"{budget.spent * 100 / budget.budget:.1f}%",
                    summary=(
                        f"{whose} reached {threshold}% of its {when} budget: {spent} of {of} "
                        f"{budget.unit} spent, {projected} projected"
                    ),
                    figures={k: shown[k] for k in ("budget", "spent", "projected", "as_of")},
                    link="/",
                )
            )
    return Evaluation(findings=findings, skipped=skipped)


def tenant_budgets(*, tenant: Tenant, now: datetime | None = None) -> list[Budget]:
    """Every enabled budget of the tenant and of its projects this period (its projects'
    quotas): one read however many."""
    return budgets_read(_rules_read(tenant)[0], now=now)
