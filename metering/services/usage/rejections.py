"""The ingestion debugger's record (IngestRejection): every batch refused whole and every
OTLP export with rejected spans, kept 7 days, without payload; purged by the retention job."""

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.urls import reverse

from metering.models import IngestRejection
from portal.events import event_raise
from portal.models import Event

KEPT = timedelta(days=7)
QUIET = timedelta(minutes=15)  # between two events for the same path and source
ERRORS_KEPT = 10  # the first errors of a batch; their count is kept whole


def _storable(value):
    """A value as text and JSON columns keep it: strings without NUL (PostgreSQL refuses it)
    and with lone surrogates replaced (not valid UTF-8), inside lists and dicts too. A refused
    body may hold anything; what it was answered is kept, readable."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_storable(key): _storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_storable(item) for item in value]
    return value


def rejection_record(
    *,
    at: datetime,
    path: str,
    token_prefix: str,
    source: str,
    status: int,
    received: int,
    errors: Sequence[dict],
) -> IngestRejection:
    """Keep what a refused (or partly refused) request was answered: its path, the token's
    prefix, its source when the body named one, the events or spans it held, how many were
    rejected (the distinct indexes errors name; a whole batch when no error names one) and
    the first ERRORS_KEPT errors."""
    indexes = {error["index"] for error in errors if error.get("index") is not None}
    rejection = IngestRejection.objects.create(
        at=at,
        path=_storable(path)[:100],
        token_prefix=token_prefix,
        source=_storable(source)[:128],
        status=status,
        received=received,
        rejected=len(indexes) if indexes else received,
        errors=[_storable(dict(error)) for error in errors[:ERRORS_KEPT]],
    )
    _rejected_raise(rejection)
    return rejection


def _rejected_raise(rejection: IngestRejection) -> None:
    """usage.batch_rejected, to the factory's operators (no payload: its path, source,
    counts and first errors); one per path and source each QUIET, however many batches a
    misconfigured gateway sends meanwhile (the debugger keeps every one)."""
    recent = Event.objects.filter(
        type="usage.batch_rejected",
        occurred_at__gt=rejection.at - QUIET,
        data__path=rejection.path,
        data__source=rejection.source,
    )
    if recent.exists():
        return
    partly = rejection.rejected < rejection.received
    what = (
        f"{rejection.rejected} of {rejection.received} events refused"
        if partly
        else f"a batch of {rejection.received} refused"
    )
    event_raise(
        type="usage.batch_rejected",
        summary=f"Usage ingestion: {what} ({rejection.source or rejection.path})",
        data={
            "rejection_id": rejection.pk,
            "path": rejection.path,
            "source": rejection.source,
            "token_prefix": rejection.token_prefix,
            "status": rejection.status,
            "received": rejection.received,
            "rejected": rejection.rejected,
            "errors": rejection.errors[:5],
        },
        level=Event.Level.WARNING,
        link=reverse("metering"),
        at=rejection.at,
    )


def rejections_purge(*, now: datetime) -> int:
    """Delete the rejections older than KEPT; returns how many."""
    deleted, _ = IngestRejection.objects.filter(at__lt=now - KEPT).delete()
    return deleted
