"""Reservations: the list (a tenant member sees its own) with the service tiers' multipliers,
and one reservation's utilization against its capacity (kpis.md 3d)."""

from datetime import timedelta

from django.shortcuts import get_object_or_404, render

from billing.charts import utilization_chart
from billing.domain.reservations import by_day
from billing.selectors.reservations import (
    reservation_list,
    reservation_months,
    reservation_overage,
    reservation_utilization,
    tier_multiplier_list,
)
from metering.selectors.usage import window_resolve
from portal.charts import figure_json
from portal.decorators import role_required
from portal.models import Role
from portal.periods import Period


def month_so_far() -> Period:
    """This month to the published cut, as every read of an open period (kpis.md section 0):
    what a reservation's fee, utilization and unused fee are reported over."""
    return window_resolve({}, default="this_month").period


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def reservations(request):
    """Every reservation the user may see, with this month's fee and utilization so far."""
    period = month_so_far()
    return render(
        request,
        "billing/reservations/reservations.html",
        {
            "title": "Reservations",
            "rows": reservation_rows(user=request.user, start=period.start, end=period.end),
            "month": period.start,
            "until": period.end,
            "tiers": tier_multiplier_list(),
        },
    )


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def reservation_detail(request, pk: int):
    """One reservation: utilization by hour or day against its capacity, covered against
    overage tokens, its fees and the part unused."""
    reservation = get_object_or_404(reservation_list(user=request.user), pk=pk)
    window = window_resolve(request.GET, default="this_month")
    period = window.period
    hours = reservation_utilization(reservation, start=period.start, end=period.end)
    overage = reservation_overage(reservation, start=period.start, end=period.end)
    daily = period.end - period.start > timedelta(days=2)
    buckets = by_day(hours) if daily else hours
    over = {}
    for hour, tokens in overage.items():
        key = hour.replace(hour=0) if daily else hour
        over[key] = over.get(key, 0) + tokens
    total = sum(hours[1:], hours[0]) if hours else None
    return render(
        request,
        "billing/reservations/reservation.html",
        {
            "title": f"Reservation {reservation.pk}",
            "reservation": reservation,
            "gpus": _gpus(reservation),
            "versions": sorted(reservation.gpus.all(), key=lambda v: v.effective_from),
            "rows": [_shown(b) | {"overage": over.get(b.start, 0)} for b in buckets],
            "total": _shown(total),
            "overage": sum(overage.values()),
            "window": window,
            "granularity": "day" if daily else "hour",
            "chart": figure_json(utilization_chart(buckets, over, daily=daily))
            if buckets
            else None,
        },
    )


def reservation_rows(*, user, start, end) -> list[dict]:
    """The reservations the user may see as the list shows them, with [start, end)'s
    figures (the tenant's home shows its own the same way)."""
    return [
        {"reservation": reservation, "month": _shown(total), "gpus": _gpus(reservation)}
        for reservation, total in reservation_months(user=user, start=start, end=end)
    ]


def _gpus(reservation) -> int:
    versions = sorted(reservation.gpus.all(), key=lambda v: v.effective_from)
    return versions[-1].gpus if versions else 0


def _shown(figures) -> dict | None:
    """Figures as the pages show them: whole tokens, exact money and ratio."""
    if figures is None:
        return None
    return {
        "start": figures.start,
        "cap": round(figures.cap),
        "covered": round(figures.covered),
        "utilization": figures.utilization,
        "fee": figures.fee,
        "covered_realized": figures.covered_realized,
        "unused": figures.unused,
    }
