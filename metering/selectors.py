"""Reads of metering data. Tenant scoping goes through portal.access.tenant_scoped only."""

from django.db.models import F, QuerySet, Sum
from django.db.models.functions import TruncDay

from metering.models import DailyUsage, HourlyUsage
from portal.access import tenant_get, tenant_scoped
from portal.periods import Period

USAGE_SUMS = ["requests", "errors", "input_tokens", "cached_tokens", "output_tokens"]


def _is_midnight(moment) -> bool:
    return (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0)


def usage_list(
    *,
    user,
    period: Period,
    granularity: str = "day",
    tenant: str | None = None,
    model: str | None = None,
    pool: str | None = None,
) -> QuerySet:
    """Usage per period (hour or day), tenant, model and pool, from the rollups only."""
    if granularity == "day" and _is_midnight(period.start) and _is_midnight(period.end):
        rows = DailyUsage.objects.filter(day__gte=period.start.date(), day__lt=period.end.date())
        rows = rows.annotate(period_start=F("day"))  # a date; callers present it as midnight UTC
    else:
        rows = HourlyUsage.objects.filter(hour__gte=period.start, hour__lt=period.end)
        rows = rows.annotate(period_start=TruncDay("hour") if granularity == "day" else F("hour"))
    rows = tenant_scoped(rows, user=user)
    if tenant:
        rows = rows.filter(tenant=tenant_get(user=user, slug=tenant))
    if model:
        rows = rows.filter(deployment__model__slug=model)
    if pool:
        rows = rows.filter(deployment__pool__slug=pool)
    return (
        rows.values(
            "period_start", "tenant__slug", "deployment__model__slug", "deployment__pool__slug"
        )
        .annotate(**{name: Sum(name) for name in USAGE_SUMS})
        .order_by(
            "period_start", "tenant__slug", "deployment__model__slug", "deployment__pool__slug"
        )
    )
