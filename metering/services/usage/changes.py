"""Changes to metered figures after they were stored: usage to fold again (a new SLO in force
over hours already folded), and the hours whose figures changed, queued in the transaction
of the change for the measure job (metering.models.ChangedHour)."""

from collections.abc import Iterable
from datetime import UTC, datetime

from django.db import connection
from django.db.models.functions import TruncHour

from metering.models import ChangedHour, RollupPending, UsageEvent


def usage_refold_queue(*, deployment_id: int, start: datetime, end: datetime | None) -> int:
    """Queue for the fold every (tenant, hour) of the deployment's events in [start, end)
    (no end: to now): their compliance follows the SLO in force, which a new version from a
    past hour changes. Returns the cells queued."""
    events = UsageEvent.objects.filter(deployment_id=deployment_id, time__gte=start)
    if end is not None:
        events = events.filter(time__lt=end)
    cells = events.annotate(cell_hour=TruncHour("time", tzinfo=UTC)).values_list(
        "tenant_id", "cell_hour"
    )
    queued = RollupPending.objects.bulk_create(
        RollupPending(tenant_id=tenant_id, deployment_id=deployment_id, hour=hour)
        for tenant_id, hour in cells.distinct()
    )
    return len(queued)


def changed_hours_store(*, hours: Iterable[datetime]) -> None:
    """Queue `hours` (whole UTC hours) as changed, in the caller's transaction."""
    ChangedHour.objects.bulk_create([ChangedHour(hour=hour) for hour in set(hours)])


def changed_hours_claim() -> set[datetime]:
    """The hours queued as changed, removed from the queue; run it in the transaction that
    acts on them, so a run that fails leaves them queued. An hour queued meanwhile stays."""
    with connection.cursor() as cursor:  # one statement: exactly the rows it returns go
        cursor.execute("DELETE FROM metering_changedhour RETURNING hour")
        hours = [hour for (hour,) in cursor.fetchall()]
    return {_aware(hour) for hour in hours}


def _aware(hour) -> datetime:
    if isinstance(hour, str):  # SQLite returns the stored text
        hour = datetime.fromisoformat(hour)
    return hour.replace(tzinfo=UTC) if hour.tzinfo is None else hour.astimezone(UTC)
