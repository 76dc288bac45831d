"""The closed-month register (kpis.md, General rules, "Closed months"). billing's month-end
close locks a month as its first step; from then on nothing may take effect inside it:
versions of prices, contracts, promotions, cost models, factory costs and deployments
(portal.versions), maintenance windows and incidents, postings dated in it, but the close's
own postings while it runs (`closing`). It lives in the kernel so that metering, below
billing, can ask it too. Late usage is not refused here: it is billed as an adjustment on
the next invoice."""

from datetime import datetime

from django.db import transaction

from portal import clock
from portal.errors import FieldError
from portal.models import ClosedMonth
from portal.periods import month_start, months_before, next_month
from portal.services import audit_record


@transaction.atomic
def month_close(*, month: datetime, by=None, now: datetime | None = None) -> ClosedMonth:
    """Lock the UTC month holding `month` for its close (its postings still allowed until
    `month_close_finish`); locking it again leaves the first record."""
    start = month_start(month)
    closed, created = ClosedMonth.objects.get_or_create(
        month=start, defaults={"closed_at": now or clock.now(), "closing": True}
    )
    if created:
        audit_record(
            actor=by, action="month.close", object_type="closed_month", object_id=f"{start:%Y-%m}"
        )
    return closed


def month_close_finish(*, month: datetime) -> None:
    """The month's close is done: from now on not even it posts into the month."""
    ClosedMonth.objects.filter(month=month_start(month)).update(closing=False)


def month_is_closed(moment: datetime, *, by_close: bool = False) -> bool:
    """Whether the UTC month holding `moment` is closed; `by_close`: to the close's own
    postings, a month whose close is still running is not."""
    months = ClosedMonth.objects.filter(month=month_start(moment))
    if by_close:
        months = months.filter(closing=False)
    return months.exists()


def month_closed_check(*, moment: datetime, field: str, by_close: bool = False) -> None:
    """Refuse, naming `field`, a record taking effect at `moment` inside a closed month
    (`by_close`: a posting of the month's own running close is allowed)."""
    if month_is_closed(moment, by_close=by_close):
        raise FieldError(
            field,
            f"{month_start(moment):%Y-%m} is closed: its invoices are issued, so nothing may "
            "take effect inside it (correct it with a credit note)",
        )


def closed_through() -> datetime | None:
    """The end of the last closed month (None while none is closed)."""
    last = ClosedMonth.objects.order_by("-month").values_list("month", flat=True).first()
    return next_month(last) if last is not None else None


def version_closed_check(*, moment: datetime, field: str = "effective_from") -> None:
    """Refuse, naming `field`, a version in force from `moment` on when that is before the end
    of the last closed month: it would be in force inside a closed month, whatever its date
    (kpis.md, Closed months)."""
    end = closed_through()
    if end is not None and moment < end:
        raise FieldError(
            field,
            f"is before the end of the last closed month ({months_before(end, 1):%Y-%m}): "
            "a version from then would be in force inside it; start it at "
            f"{end:%Y-%m-%dT%H:%M:%SZ} or later",
        )


def span_closed_check(*, start: datetime, end: datetime | None, field: str) -> None:
    """Refuse, naming `field`, a record in force over [start, end) (`end` None: still open)
    that overlaps a closed month: a maintenance window, an incident."""
    months = ClosedMonth.objects.filter(month__gte=month_start(start))
    if end is not None:
        months = months.filter(month__lt=end)
    if first := months.order_by("month").values_list("month", flat=True).first():
        raise FieldError(
            field,
            f"{first:%Y-%m} is closed: its invoices are issued, so nothing may take effect "
            "inside it (correct it with a credit note)",
        )


def first_open_day(moment: datetime) -> datetime:
    """The first instant of the first open month from the one holding `moment` on: where a
    posting dated in a closed month (a payment recorded late) is accounted."""
    start = month_start(moment)
    closed = set(ClosedMonth.objects.filter(month__gte=start).values_list("month", flat=True))
    while start in closed:
        start = next_month(start)
    return start


def closed_months(*, start: datetime, end: datetime, by_close: bool = False) -> set[datetime]:
    """The first instants of the closed months beginning in [start, end) (one query);
    `by_close`: only those whose close has finished (as month_is_closed)."""
    months = ClosedMonth.objects.filter(month__gte=start, month__lt=end)
    if by_close:
        months = months.filter(closing=False)
    return set(months.values_list("month", flat=True))
