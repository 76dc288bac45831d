"""Reads of the ingestion debugger: the rejected batches kept, and each source's last
batch with whether it is sending (metering.domain.usage.sources)."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Max, QuerySet

from metering.domain.usage.sources import SourceState, source_state
from metering.models import EngineHourly, IngestRejection, SourceSeen
from portal.periods import hour_floor


def rejection_list() -> QuerySet[IngestRejection]:
    """The rejected batches and partial successes kept (7 days), newest first."""
    return IngestRejection.objects.order_by("-at", "-pk")


@dataclass(frozen=True)
class SourceRow:
    source: str
    deployments: list[str]
    last_event_at: datetime
    last_received_at: datetime
    state: SourceState
    grown: list[str]  # its deployments whose engines generated after its last batch
    engine_observed_at: datetime | None  # the newest such engine observation


def source_list(*, now: datetime, since: datetime | None = None) -> list[SourceRow]:
    """Every source that ever sent usage (or since `since`): the deployments it meters, its
    newest event and last batch, and its state: silent when the engine counters of its
    deployments grew after its last batch (an engine scrape observed after it, with
    generated tokens). Hours keep no finer time, so tokens generated in the batch's hour
    before it count too. 2 queries however many sources."""
    rows = SourceSeen.objects.select_related("deployment").order_by("source")
    if since is not None:
        rows = rows.filter(
            source__in=SourceSeen.objects.filter(last_received_at__gte=since).values("source")
        )
    seen: dict[str, list[SourceSeen]] = defaultdict(list)
    for row in rows:
        seen[row.source].append(row)
    if not seen:
        return []
    first = min(row.last_received_at for rows in seen.values() for row in rows)
    grew = dict(
        EngineHourly.objects.filter(
            hour__gte=hour_floor(first), generation_tokens__gt=0, last_observed_at__isnull=False
        )
        .values("deployment_id")
        .annotate(observed=Max("last_observed_at"))
        .values_list("deployment_id", "observed")
    )
    result = []
    for source, rows in seen.items():
        last = max(row.last_received_at for row in rows)
        grown = [
            row for row in rows if grew.get(row.deployment_id) and grew[row.deployment_id] > last
        ]
        result.append(
            SourceRow(
                source=source,
                deployments=sorted(row.deployment.slug for row in rows),
                last_event_at=max(row.last_event_at for row in rows),
                last_received_at=last,
                state=source_state(last_received_at=last, now=now, engines_grew=bool(grown)),
                grown=sorted(row.deployment.slug for row in grown),
                engine_observed_at=max((grew[row.deployment_id] for row in grown), default=None),
            )
        )
    return sorted(result, key=lambda row: row.last_received_at, reverse=True)
