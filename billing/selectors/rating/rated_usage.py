"""Reads of billing's published rated usage (billing.models.RatedUsage): what was sold, per
deployment and hour, at what list value and realized amount; the months' rating errors and
minimum shortfalls. Stored reads only: the rating runs in billing's jobs
(billing.services.rating), never here."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import reduce
from operator import or_

from django.conf import settings
from django.db.models import DecimalField, Exists, F, OuterRef, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDate

from billing.domain.rating.types import RatingError
from billing.models import RatedChange, RatedTenantMonth, RatedUsage, RatedUsageMonth
from billing.selectors.rating.inputs import quantities_of
from portal.access import tenant_scoped
from portal.models import Tenant
from portal.periods import Period, month_start, next_month
from portal.pipeline import MEASURE, LogRead, log_read, stages_run

ZERO = Decimal(0)

PAID = RatedUsage.Sale.PAID
UNSOLD_REASONS = tuple(sale for sale in RatedUsage.Sale.values if sale != PAID)

PAID_SUMS = (
    "input_tokens", "cached_tokens", "output_tokens",
    "compliant_input_tokens", "compliant_cached_tokens", "compliant_output_tokens",
    "list_value", "contract_discount", "tier_discount", "realized", "promotions",
)  # fmt: skip


def _paid_sums() -> dict:
    """The sums of PAID_SUMS: stored, but for the promotions, which are each on-demand row's
    realized amount times its tenant-month's promotion rate (a period takes its pro-rata
    share of the month's credits; covered rows are realized at fees, never promoted)."""
    promotions = Coalesce(
        Sum(
            F("realized") * F("tenant_month__promotion_rate"),
            filter=Q(covered=False),
            output_field=DecimalField(),
        ),
        Value(ZERO),
        output_field=DecimalField(),
    )
    # First: the sums after it are named as the columns they sum.
    return {"promotions": promotions} | {name: Sum(name) for name in PAID_SUMS[:-1]}


@dataclass(frozen=True)
class TenantMonthTotals:
    """What one tenant's month rated to (or why it cannot be rated)."""

    usage_amount: Decimal  # the base of an SLA credit
    minimum_shortfall: Decimal
    currency: str
    error: RatingError | None


def month_totals(row: RatedTenantMonth) -> TenantMonthTotals:
    return TenantMonthTotals(
        usage_amount=row.usage_amount,
        minimum_shortfall=row.minimum_shortfall,
        currency=row.currency or settings.FACTORY_CURRENCY,
        error=RatingError(row.error) if row.error else None,
    )


def rated_month_totals(
    *, month_start: datetime, tenants: Iterable[Tenant] | None = None
) -> dict[int, TenantMonthTotals]:
    """The rated totals of the month per tenant (of `tenants`, default every tenant) as
    billing's job last stored them: at most one run of it behind the fold, never rated here."""
    rows = RatedTenantMonth.objects.filter(month_start=month_start)
    if tenants is not None:
        rows = rows.filter(tenant_id__in=[t.pk for t in tenants])
    return {row.tenant_id: month_totals(row) for row in rows}


def tenant_month_totals(
    *, month_start: datetime, tenants: Iterable[Tenant] | None = None
) -> dict[int, TenantMonthTotals]:
    """The rated totals of the month for each tenant with usage in it (of `tenants`, default
    every tenant), exact for what is metered: the stages before the measurement (the fold,
    billing's rate) run first, in this process, by the kernel's pipeline. For closing a
    month; pages read `rated_month_totals` as stored."""
    stages_run(before=MEASURE)
    return rated_month_totals(month_start=month_start, tenants=tenants)


def _within(spans: Iterable[Period]) -> Q | None:
    spans = list(spans)
    if not spans:
        return None
    return reduce(or_, (Q(hour__gte=span.start, hour__lt=span.end) for span in spans))


def rated_usage_list(*, spans: Iterable[Period]) -> QuerySet[RatedUsage]:
    """The rated usage of the hours inside any of the spans, for the caller to group."""
    condition = _within(spans)
    return RatedUsage.objects.filter(condition) if condition else RatedUsage.objects.none()


def paid_by_hour(*, spans: Iterable[Period]) -> list[dict]:
    """Paid usage summed over tenants per deployment and hour inside the spans, covered by
    reservations (`covered`) apart from on demand: tokens by class, SLO-compliant tokens by
    class and the money (PAID_SUMS), one row each."""
    return list(
        rated_usage_list(spans=spans)
        .filter(sale=RatedUsage.Sale.PAID)
        .values("deployment_id", "hour", "covered")
        .annotate(**_paid_sums())
        .order_by()
    )


def realized_by_day(*, start: datetime, end: datetime) -> list[dict]:
    """The paid usage's realized amount after promotions per UTC day (`day`, a date) and
    deployment (`deployment_id`) over the hours in [start, end): `realized`, `promotions`."""
    promotions = Sum(F("realized") * F("tenant_month__promotion_rate"), output_field=DecimalField())
    return list(
        rated_usage_list(spans=[Period(start, end)])
        .filter(sale=PAID)
        .annotate(day=TruncDate("hour", tzinfo=UTC))
        .values("day", "deployment_id")
        .annotate(promotions=promotions, realized=Sum("realized"))
        .order_by()
    )


def rating_errors(*, months: Iterable[datetime]) -> dict[str, str]:
    """Why a tenant's month cannot be rated, by tenant slug, for the given months."""
    return dict(
        RatedTenantMonth.objects.filter(month_start__in=list(months))
        .exclude(error="")
        .order_by("month_start")
        .values_list("tenant__slug", "error")
    )


def minimum_shortfalls(*, months: Iterable[datetime]) -> dict[datetime, Decimal]:
    """Per month, the committed-minimum shortfall of every tenant that could be rated."""
    months = list(months)
    totals = dict.fromkeys(months, ZERO)
    for month, amount in RatedTenantMonth.objects.filter(
        month_start__in=months, error=""
    ).values_list("month_start", "minimum_shortfall"):
        totals[month.astimezone(UTC)] += amount  # summed here: SQLite sums floats
    return totals


@dataclass(frozen=True)
class TenantSales:
    """What a tenant sold in a span as rated: the realized amount after promotions, the paid
    tokens (input + output of the paid usage, every class, covered by reservations or on
    demand) and, for a whole month, its committed-minimum shortfall and its reservations'
    unused fees as rated (they count only once the month is over, kpis.md 3d)."""

    realized: Decimal
    paid_tokens: int
    minimum_shortfall: Decimal = ZERO
    reservation_unused: Decimal = ZERO


def tenant_month_sales(*, months: Iterable[datetime]) -> dict[tuple[str, datetime], TenantSales]:
    """Per tenant slug and whole month, as its month was last rated (billing's rated
    tenant-months: one row each, however much usage, and its covered usage summed: a
    reservation's share of the month's rows). Months that cannot be rated are left out
    (`rating_errors` names them)."""
    months = list(months)
    rows = RatedTenantMonth.objects.filter(month_start__in=months, error="")
    covered: dict[tuple[str, datetime], tuple[Decimal, int]] = {}
    for slug, month, realized, input_tokens, output_tokens in _covered_totals(months).values_list(
        "tenant__slug", "month_start", "realized", "input_tokens", "output_tokens"
    ):
        key = (slug, month.astimezone(UTC))  # summed here: SQLite sums floats
        before = covered.get(key, (ZERO, 0))
        covered[key] = (before[0] + realized, before[1] + input_tokens + output_tokens)
    sales = {}
    for slug, month, realized, promotions, quantities, shortfall, reserved in rows.values_list(
        "tenant__slug", "month_start", "realized", "promotions", "quantities",
        "minimum_shortfall", "reserved_amount",
    ):  # fmt: skip
        month = month.astimezone(UTC)
        covered_realized, covered_tokens = covered.get((slug, month), (ZERO, 0))
        sales[slug, month] = TenantSales(
            realized=realized - promotions + covered_realized,
            # per usage line and project: covered usage has none
            paid_tokens=sum(quantities_of(quantities).values()) + covered_tokens,
            minimum_shortfall=shortfall,
            reservation_unused=reserved - covered_realized,
        )
    return sales


def tenant_sales(*, period: Period) -> dict[str, TenantSales]:
    """Per tenant slug, the paid usage rated in the period's hours (a part of a month)."""
    totals: dict[str, TenantSales] = {}
    for row in sales_by_tenant(period=period):
        if row["sale"] != PAID:
            continue
        seen = totals.get(row["tenant_slug"], TenantSales(ZERO, 0))
        totals[row["tenant_slug"]] = TenantSales(
            realized=seen.realized + row["realized"] - row["promotions"],
            paid_tokens=seen.paid_tokens + row["input_tokens"] + row["output_tokens"],
        )
    return totals


def unused_fees(*, months: Iterable[datetime]) -> dict[datetime, Decimal]:
    """Per month, the reservations' fees its covered usage did not realize (kpis.md 3d:
    revenue, like a minimum's shortfall, never part of ρ): every rated tenant-month's
    reservation lines less its covered rows' realized amounts."""
    months = list(months)
    totals = dict.fromkeys(months, ZERO)
    for month, amount in RatedTenantMonth.objects.filter(
        month_start__in=months, error=""
    ).values_list("month_start", "reserved_amount"):
        totals[month.astimezone(UTC)] += amount
    for month, realized in _covered_totals(months).values_list("month_start", "realized"):
        totals[month.astimezone(UTC)] -= realized  # summed here: SQLite sums floats
    return totals


def _covered_totals(months: list[datetime]) -> QuerySet[RatedUsageMonth]:
    """The month totals of covered rated usage (a row a tenant's project, deployment and
    service tier, not an hour) of the months' tenant-months that could be rated."""
    rated = RatedTenantMonth.objects.filter(
        tenant_id=OuterRef("tenant_id"), month_start=OuterRef("month_start"), error=""
    )
    return RatedUsageMonth.objects.filter(month_start__in=months, covered=True).filter(
        Exists(rated)
    )


def months_touched(period: Period) -> list[datetime]:
    """The first instants of the UTC months the period touches."""
    months, month = [], month_start(period.start)
    while month < period.end:
        months.append(month)
        month = next_month(month)
    return months


@dataclass
class Realization:
    """Rated usage of a period: per tenant and model, list value against realized revenue."""

    rows: list[dict] = field(default_factory=list)  # tenant, model, list, realized, tokens
    unsold: dict[str, dict[str, int]] = field(
        default_factory=dict
    )  # tenant name -> reason -> tokens
    errors: dict[str, str] = field(default_factory=dict)  # tenant -> rating error

    @property
    def list_value(self) -> Decimal:
        return sum((r["list_value"] for r in self.rows), ZERO)

    @property
    def realized(self) -> Decimal:
        return sum((r["realized"] for r in self.rows), ZERO)

    @property
    def price_realization(self) -> Decimal | None:
        """ρ = Σ realized / Σ list value over the paid usage (kpis.md section 3)."""
        return self.realized / self.list_value if self.list_value else None

    def unsold_by_reason(self) -> dict[str, int]:
        totals = dict.fromkeys(UNSOLD_REASONS, 0)
        for reasons in self.unsold.values():
            for reason, tokens in reasons.items():
                totals[reason] += tokens
        return totals


def sales_by_tenant(*, period: Period, tenants: Iterable[Tenant] | None = None) -> list[dict]:
    """The rated usage of the period summed per tenant, model and sale (paid, or why not):
    tenant (slug and name), model slug, sale, paid-or-not tokens (input + output) and, for
    paid rows, the money of PAID_SUMS."""
    rows = rated_usage_list(spans=[period])
    if tenants is not None:
        rows = rows.filter(tenant__in=list(tenants))
    return list(
        rows.values(
            "sale",
            tenant_slug=F("tenant__slug"),
            tenant_name=F("tenant__name"),
            model=F("deployment__model__slug"),
        )
        .annotate(**_paid_sums())
        .order_by("tenant_slug", "model", "sale")
    )


def realization_get(*, period: Period, user) -> Realization:
    """Price realization of the period for the tenants the user may see, from rated usage."""
    tenants = list(tenant_scoped(Tenant.objects.all(), user=user, field=None))
    rows: dict[tuple[str, str], dict] = {}
    unsold: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_slug = {t.slug: t for t in tenants}
    for sale in sales_by_tenant(period=period, tenants=tenants):
        tokens = sale["input_tokens"] + sale["output_tokens"]
        if sale["sale"] != PAID:
            unsold[sale["tenant_name"]][sale["sale"]] += tokens
            continue
        row = rows.setdefault(
            (sale["tenant_slug"], sale["model"]),
            {
                "tenant": by_slug[sale["tenant_slug"]],
                "model": sale["model"],
                "paid_tokens": 0,
                "list_value": ZERO,
                "realized": ZERO,
            },
        )
        row["paid_tokens"] += tokens
        row["list_value"] += sale["list_value"]
        row["realized"] += sale["realized"] - sale["promotions"]
    for row in rows.values():
        row["ratio"] = row["realized"] / row["list_value"] if row["list_value"] else None
    errors = rating_errors(months=months_touched(period))
    return Realization(
        rows=sorted(rows.values(), key=lambda r: (-r["list_value"], r["tenant"].slug)),
        unsold={name: dict(reasons) for name, reasons in sorted(unsold.items())},
        errors={slug: e for slug, e in errors.items() if slug in by_slug},
    )


def rated_changes_read(*, consumer: str) -> LogRead:
    """The entries of billing's change log past `consumer`'s cursor, oldest first; the
    stage consumes them with portal.pipeline.log_consume in the transaction that acts."""
    return log_read(RatedChange, consumer=consumer, log="billing.rated")
