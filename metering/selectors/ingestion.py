"""Reads of ingestion: the ids a batch's tenants, models and pools are stored under (or why
not), the keys of its events already stored; and of the ingestion debugger: the rejected
batches kept, and each source's last batch with whether it is sending
(metering.domain.usage.sources)."""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import msgspec
from django.db import connection
from django.db.models import Max, QuerySet

from metering.domain.usage.dedupe import dedupe_within_batch, stored_conflicts
from metering.domain.usage.fields import EventError, EventIn, EventRef
from metering.domain.usage.sources import SourceState, source_state
from metering.models import EngineHourly, EventKey, IngestRejection, SourceSeen
from metering.selectors.factory import placements_read
from portal.bulk import prepared_cursor
from portal.models import Tenant
from portal.periods import hour_floor
from portal.projects import limit_message, projects_beyond_limit

CONFLICT = "this (source, id) is already stored with a different payload"


class PlacedEvent(msgspec.Struct, frozen=True, gc=False):
    """A valid event with the ids it is stored under. A struct, made by position: one is
    made for every event of every batch, and read a dozen times (a named tuple costs five
    times as much to make from a tuple of ids, and each of its fields is a descriptor call)."""

    event: EventIn
    tenant_id: int
    deployment_id: int


def events_place(events: Sequence[EventIn]) -> tuple[list[PlacedEvent], list[EventError]]:
    """Map tenant, model (slug or alias) and pool slugs to ids; unknown ones are errors, and
    so are the projects a tenant has no room for (portal.projects.MAX_PROJECTS). The
    projects themselves are looked up, or created, when the events are stored."""
    # A batch names few distinct (tenant, model, pool, project): each is checked once, and
    # only a batch with an unknown one is checked event by event, so each error names its
    # event.
    keys = [(e.tenant, e.model, e.pool, e.project) for e in events]
    distinct = dict.fromkeys(keys)  # in the order of their first events
    refs = [EventRef(i, t, m, p, True, project) for i, (t, m, p, project) in enumerate(distinct)]
    placed, errors = _check_references(refs)
    if errors:
        refs = [
            EventRef(i, e.tenant, e.model, e.pool, True, e.project) for i, e in enumerate(events)
        ]
        placed, errors = _check_references(refs)
        pairs = zip(events, placed, strict=True)
        return [PlacedEvent(event, *ids) for event, ids in pairs if ids is not None], errors
    ids_of = dict(zip(distinct, placed, strict=True))
    return [
        PlacedEvent(e, tenant_id, deployment_id)
        for e, (tenant_id, deployment_id) in zip(events, map(ids_of.__getitem__, keys), strict=True)
    ], errors


def usage_reference_errors(*, refs: Sequence[EventRef]) -> list[EventError]:
    """Errors naming each reference of `refs` to an unknown or closed tenant, an unknown
    model, a model without a deployment on the pool or a new project past its tenant's
    limit. For a batch refused for its field errors, so one answer lists every error of
    every kind."""
    return _check_references(refs)[1]


def usage_conflict_errors(*, events: Sequence[EventIn], indexes: Sequence[int]) -> list[EventError]:
    """Errors naming `id` for each of `events` (at `indexes` of its batch) whose (source, id)
    is stored, or earlier in the batch, with another payload. For a batch refused for other
    errors, so one answer lists every error of every kind."""
    _, _, repeats = dedupe_within_batch(events=events)
    stored = stored_conflicts(events=events, stored=stored_digests(events))
    return [EventError(indexes[i], "id", CONFLICT) for i in sorted({*repeats, *stored})]


def _tenants_read(slugs: set[str]) -> dict[str, tuple[int, str]]:
    """(id, status) of each tenant of `slugs` that exists. A batch names up to hundreds: on
    PostgreSQL they are one array of a prepared statement (the ORM's IN list binds, quotes
    and has PostgreSQL parse and plan a value each, at every batch)."""
    if connection.vendor != "postgresql":
        rows = Tenant.objects.filter(slug__in=slugs).values_list("slug", "id", "status")
        return {slug: (pk, status) for slug, pk, status in rows}
    # Joined to the array's elements (hashed), not `= ANY(%s)`: prepared, its plan takes the
    # array as a parameter and compares every tenant with every element.
    with prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT slug, id, status FROM {Tenant._meta.db_table} "  # noqa: S608 (the model's table)
            "WHERE slug IN (SELECT unnest(%s::text[]))",
            [list(slugs)],
        )
        return {slug: (pk, status) for slug, pk, status in cursor.fetchall()}


def _check_references(
    refs: Sequence[EventRef],
) -> tuple[list[tuple[int, int] | None], list[EventError]]:
    """Per reference (tenant id, deployment id), or None when an error names why."""
    slugs = {r.tenant for r in refs if r.tenant is not None}
    tenants = _tenants_read(slugs)
    known = placements_read(names={r.model for r in refs if r.model is not None})
    # A batch names few distinct tenants and (model, pool) pairs: decide each once.
    tenant_ids: dict[str, int | None] = {}  # None: refused (unknown or closed)
    for slug in slugs:
        tenant = tenants.get(slug)
        ok = tenant is not None and tenant[1] != Tenant.Status.CLOSED
        tenant_ids[slug] = tenant[0] if ok else None
    placements: dict[tuple[str, str | None], tuple[int | None, tuple[str, str] | None]] = {}
    wanted: dict[int, set[str]] = defaultdict(set)
    for ref in refs:
        if ref.project is not None and ref.tenant is not None and tenant_ids[ref.tenant]:
            wanted[tenant_ids[ref.tenant]].add(ref.project)
    beyond = projects_beyond_limit(wanted) if wanted else set()
    placed: list[tuple[int, int] | None] = []
    errors: list[EventError] = []
    append = placed.append
    for ref in refs:
        tenant_id = None if ref.tenant is None else tenant_ids[ref.tenant]
        deployment_id, problem = None, None
        if ref.model is not None:
            key = (ref.model, ref.pool)
            if not ref.is_placeable:
                if ref.model not in known.model_ids:
                    problem = ("model", f"unknown model {ref.model!r}")
            elif key in placements:
                deployment_id, problem = placements[key]
            else:
                deployment, problem = known.place(ref.model, ref.pool)
                deployment_id = None if deployment is None else deployment.id
                placements[key] = (deployment_id, problem)
        full = tenant_id is not None and (tenant_id, ref.project) in beyond
        if tenant_id is not None and deployment_id is not None and not full:
            append((tenant_id, deployment_id))
            continue
        append(None)
        if full:
            errors.append(EventError(ref.index, "project", limit_message(cast(str, ref.tenant))))
        if ref.tenant is not None and tenant_id is None:
            if ref.tenant not in tenants:
                errors.append(EventError(ref.index, "tenant", f"unknown tenant {ref.tenant!r}"))
            else:
                message = f"tenant {ref.tenant!r} is closed"
                errors.append(EventError(ref.index, "tenant", message))
        if problem:
            errors.append(EventError(ref.index, problem[0], problem[1]))
    return placed, errors


def stored_digests(events: Sequence[EventIn]) -> dict[tuple[str, str], str]:
    """The payload hash of each (source, id) of `events` already stored."""
    keys = {(e.source, e.id) for e in events}
    stored: dict[tuple[str, str], str] = {}
    sources = {s for s, _ in keys}
    for chunk_start in range(0, len(events), 500):
        chunk = events[chunk_start : chunk_start + 500]
        for source, event_id, digest in EventKey.objects.filter(
            source__in=sources, event_id__in=[e.id for e in chunk]
        ).values_list("source", "event_id", "payload_hash"):
            if (source, event_id) in keys:
                stored[(source, event_id)] = digest
    return stored


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
