"""The closed-month register (kpis.md, General rules, "Closed months"). billing's invoice run
closes a month once it has issued the month's invoices; from then on nothing may take effect
inside it: versions of prices, contracts, promotions, cost models, factory costs and
deployments (portal.versions), maintenance windows and incidents. It lives in the kernel so
that metering, below billing, can ask it too. Late usage is not refused here: it is billed
as an adjustment on the next invoice."""

from datetime import datetime

from django.db import transaction

from portal import clock
from portal.errors import FieldError
from portal.models import ClosedMonth
from portal.periods import month_start
from portal.services import audit_record


@transaction.atomic
def month_close(*, month: datetime, by=None, now: datetime | None = None) -> ClosedMonth:
    """Close the UTC month holding `month`; closing it again leaves the first record."""
    start = month_start(month)
    closed, created = ClosedMonth.objects.get_or_create(
        month=start, defaults={"closed_at": now or clock.now()}
    )
    if created:
        audit_record(
            actor=by, action="month.close", object_type="closed_month", object_id=f"{start:%Y-%m}"
        )
    return closed


def month_is_closed(moment: datetime) -> bool:
    """Whether the UTC month holding `moment` is closed."""
    return ClosedMonth.objects.filter(month=month_start(moment)).exists()


def month_closed_check(*, moment: datetime, field: str) -> None:
    """Refuse, naming `field`, a record taking effect at `moment` inside a closed month."""
    if month_is_closed(moment):
        raise FieldError(
            field,
            f"{month_start(moment):%Y-%m} is closed: its invoices are issued, so nothing may "
            "take effect inside it (correct it with a credit note)",
        )


def closed_months(*, start: datetime, end: datetime) -> set[datetime]:
    """The first instants of the closed months beginning in [start, end) (one query)."""
    return set(
        ClosedMonth.objects.filter(month__gte=start, month__lt=end).values_list("month", flat=True)
    )
