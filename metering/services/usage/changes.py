"""Changes to metered figures after they were stored: usage to fold again (a new SLO in force
over hours already folded), and the hours whose figures changed, queued in the transaction
of the change for the measure job (metering.models.ChangedHour)."""

from collections.abc import Iterable
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models.functions import TruncHour
from django.utils.module_loading import import_string

from metering.models import ChangedHour, RollupPending, UsageEvent


def fold_on_commit() -> None:
    """Embedded default (no broker, no beat): once the caller's transaction commits, fold
    what it queued and bring the read models other apps derive from folded usage up to date
    (settings.USAGE_FOLDED_REFRESH), so reads are exact as soon as the write has answered.
    With a broker, the rollup job (every minute) and those apps' own jobs do it."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        # robust: the change is stored; a failed fold is the rollup job's to redo, never a
        # reason to answer otherwise.
        transaction.on_commit(_fold_and_refresh, robust=True)


def _fold_and_refresh() -> None:
    from metering.services.usage.rollup import rollup_pending  # rollup stores changed hours

    if rollup_pending():
        for path in settings.USAGE_FOLDED_REFRESH:
            import_string(path)()


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
    fold_on_commit()
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
