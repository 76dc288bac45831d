"""Reads of the ingestion debugger: the rejected batches kept, and each source's last
batch with whether it is sending (metering.domain.usage.sources)."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

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


def source_list(*, now: datetime) -> list[SourceRow]:
    """Every source that ever sent usage: the deployments it meters, its newest event and
    last batch, and its state: silent when the engine counters of its deployments grew
    after its last batch (an engine scrape observed after it, with generated tokens)."""
    seen: dict[str, list[SourceSeen]] = defaultdict(list)
    for row in SourceSeen.objects.select_related("deployment").order_by("source"):
        seen[row.source].append(row)
    if not seen:
        return []
    since = min(row.last_received_at for rows in seen.values() for row in rows)
    grew: dict[int, datetime] = {}  # deployment id -> the last engine observation with output
    for deployment_id, observed in EngineHourly.objects.filter(
        hour__gte=hour_floor(since), generation_tokens__gt=0, last_observed_at__isnull=False
    ).values_list("deployment_id", "last_observed_at"):
        grew[deployment_id] = max(observed, grew.get(deployment_id, observed))
    result = []
    for source, rows in seen.items():
        last = max(row.last_received_at for row in rows)
        engines_grew = any(
            grew.get(row.deployment_id) is not None and grew[row.deployment_id] > last
            for row in rows
        )
        result.append(
            SourceRow(
                source=source,
                deployments=sorted(row.deployment.slug for row in rows),
                last_event_at=max(row.last_event_at for row in rows),
                last_received_at=last,
                state=source_state(last_received_at=last, now=now, engines_grew=engines_grew),
            )
        )
    return sorted(result, key=lambda row: row.last_received_at, reverse=True)
