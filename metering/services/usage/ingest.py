"""Usage ingestion, one service for every path (architecture.md "Ingestion"): a format's
adapter decodes its request into a `Batch` (inside `refusals_recorded`) and calls
`batch_ingest` with it and its rule, all or nothing (the native formats) or OTLP's partial
one. The service checks what the token is
bound to, the references (tenants, models, deployments), the conflicts with what is
stored, stores the batch (metering.services.usage.store: deduplicated on (source, id))
and keeps the ingestion debugger's record of what it refused. `usage_ingest` stores events
already validated (the demo and the tests call it too)."""

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from metering.domain.usage.body import BatchError, PayloadTooLarge
from metering.domain.usage.dedupe import dedupe_within_batch
from metering.domain.usage.fields import (
    EventError,
    EventIn,
    bound_project_errors,
    bound_tenant_errors,
)
from metering.domain.usage.formats import merge_errors
from metering.domain.usage.validation import event_references, validate_events
from metering.selectors.ingestion import (
    CONFLICT,
    events_place,
    usage_conflict_errors,
    usage_reference_errors,
)
from metering.services.usage.rejections import rejection_record
from metering.services.usage.store import ProjectsFull, StoredConflict, events_store
from portal import clock
from portal.errors import FieldError
from portal.projects import limit_message


@dataclass(frozen=True)
class IngestResult:
    accepted: int
    duplicates: int
    # Under the partial rule (OTLP): the events left out, each error naming its position in
    # the batch and the field (`id` for a changed payload of a known (source, id)).
    rejected: tuple[EventError, ...] = ()


class IngestRejected(Exception):
    """The batch is invalid: nothing was stored. `errors` name each event's index and field;
    `received`: the events the batch held (0: not known)."""

    http_status = 400

    def __init__(self, errors: list[EventError], *, received: int = 0, source: str = ""):
        super().__init__(f"{len(errors)} invalid event(s)")
        self.errors = errors
        self.received = received
        self.source = source  # the batch's sources, for the ingestion debugger

    def api_errors(self) -> list[dict]:
        return [e.as_dict() for e in self.errors]


class IngestConflict(Exception):
    """Events reuse a stored (source, id) with a different payload: nothing was stored."""

    http_status = 409

    def __init__(self, indexes: list[int], *, received: int = 0, source: str = ""):
        super().__init__(f"{len(indexes)} conflicting event(s)")
        self.indexes = indexes
        self.received = received
        self.source = source

    def api_errors(self) -> list[dict]:
        return [{"index": i, "field": "id", "message": CONFLICT} for i in self.indexes]


# What refuses a request whole (answered 400, 409, 413 or 415), kept for the debugger: a
# body that cannot be read, a field of the request (its media type), an invalid batch.
REFUSALS = (IngestRejected, IngestConflict, BatchError, PayloadTooLarge, FieldError)


@dataclass(frozen=True)
class Sender:
    """Who sent a request: the path it came to and its token's prefix (the debugger names
    them), and the tenant its token is bound to: a tenant's own gateway meters that tenant
    only, on every path (architecture.md, roles); and the project it is bound to: the
    events that name none are that project's, naming another is refused (kpis.md 3e)."""

    path: str
    token_prefix: str = ""
    bound_tenant: str | None = None
    bound_project: str | None = None

    @property
    def is_bound(self) -> bool:
        """Whether its token is bound to a tenant or a project (else it meters any)."""
        return self.bound_tenant is not None or self.bound_project is not None

    def bound_errors(self, tenants: Iterable[tuple[int, Any]]) -> list[EventError]:
        """Errors naming `tenant` for each (index, tenant) this sender may not meter."""
        if self.bound_tenant is None:
            return []
        return bound_tenant_errors(tenants=tenants, bound=self.bound_tenant)

    def foreign_errors(self, named: Iterable[tuple[int, Any, Any]]) -> list[EventError]:
        """Errors naming `tenant` or `project` for each (index, tenant, project) this sender
        may not meter (its events defaulted to its bound project already)."""
        named = list(named)
        errors = self.bound_errors((i, tenant) for i, tenant, _ in named)
        if self.bound_project is not None:
            projects = ((i, project) for i, _, project in named)
            errors += bound_project_errors(projects=projects, bound=self.bound_project)
        return sorted(errors, key=lambda error: error.index)

    def events_defaulted(self, events: Sequence[EventIn]) -> list[EventIn]:
        """The events, those naming no project given the bound one (hashed with it)."""
        if self.bound_project is None:
            return list(events)
        bound = self.bound_project
        replace = msgspec.structs.replace
        return [replace(e, project=bound) if e.project is None else e for e in events]

    def items_defaulted(self, items: Sequence[Any]) -> list[Any]:
        """Raw items likewise: an object naming no project (or null) takes the bound one."""
        if self.bound_project is None:
            return list(items)
        return [
            {**item, "project": self.bound_project}
            if type(item) is dict and item.get("project") is None
            else item
            for item in items
        ]

    def tenant_of(self, tenant: str | None) -> str:
        """The tenant a request names for all its records (a query's): the bound one when
        it names none; FieldError naming `tenant` when there is none, or another."""
        tenant = tenant or self.bound_tenant
        if not tenant:
            raise FieldError("tenant", "query parameter is required")
        if errors := self.bound_errors([(0, tenant)]):
            raise FieldError("tenant", errors[0].message)
        return tenant


@dataclass(frozen=True)
class Batch:
    """A request's records as its format decoded them: `items`, a raw event dict per record
    (None: a record the conversion refused, or under the partial rule one that is not a
    usage record), or `events` already validated (the native fast path); the conversion's
    `errors`; `names`, renaming errors as the format names its fields; `sources`, the
    names the debugger gives the batch (default: its items')."""

    items: Sequence[Any] = ()
    events: Sequence[EventIn] | None = None
    errors: Sequence[EventError] = ()
    names: Callable[[list[EventError]], list[EventError]] | None = None
    sources: Iterable[str] | None = None


def batch_ingest(*, sender: Sender, batch: Batch, partial: bool = False) -> IngestResult:
    """Ingest a decoded batch. All or nothing by default: any invalid event refuses the
    batch (IngestRejected, every error of every kind at once; IngestConflict for a changed
    payload of a stored key) and nothing is stored. `partial` (OTLP's rule): every valid
    event is stored and the others are returned in the result's `rejected`, each naming its
    record's index and field. What is refused, whole or in part, is kept for the ingestion
    debugger (a request its adapter could not decode too: `refusals_recorded`)."""
    with refusals_recorded(sender):
        result = _partly(batch, sender) if partial else _wholly(batch, sender)
    if result.rejected:
        rejection_record(
            at=clock.now(),
            path=sender.path,
            token_prefix=sender.token_prefix,
            source=_sources(batch),
            status=200,
            received=len(batch.items),
            errors=[error.as_dict() for error in result.rejected],
        )
    return result


@contextmanager
def refusals_recorded(sender: Sender) -> Iterator[None]:
    """Keep every refusal raised inside (REFUSALS) for the ingestion debugger, then let it
    be answered as every API error is: around an adapter's decoding, and the service's."""
    try:
        yield
    except REFUSALS as refusal:
        rejection_record(
            at=clock.now(),
            path=sender.path,
            token_prefix=sender.token_prefix,
            source=getattr(refusal, "source", ""),
            status=refusal.http_status,
            received=getattr(refusal, "received", 0),
            errors=refusal.api_errors(),
        )
        raise


def _wholly(batch: Batch, sender: Sender) -> IngestResult:
    """All or nothing: a refused batch is answered with every error of every kind at once
    (its field errors, its unknown tenants, models and deployments, the tenants and projects
    its sender may not meter and its payload conflicts), named as its format names them."""
    now = clock.now()
    if batch.events is not None:  # validated by the format's decoder
        events = sender.events_defaulted(batch.events)
        if sender.is_bound and (
            errors := sender.foreign_errors((i, e.tenant, e.project) for i, e in enumerate(events))
        ):
            raise IngestRejected(errors, received=len(events), source=batch_sources(events))
        return usage_ingest(events=events, received_at=now)
    items = sender.items_defaulted(batch.items)
    events, errors = validate_events(items=items, now=now)
    invalid = {error.index for error in errors}
    positions = [i for i in range(len(items)) if i not in invalid]  # of `events`
    errors = merge_errors(conversion=batch.errors, validation=errors)
    errors += sender.foreign_errors(
        (i, item.get("tenant"), item.get("project"))
        for i, item in enumerate(items)
        if type(item) is dict
    )
    if errors:
        references = usage_reference_errors(refs=event_references(items=items))
        refused = {error.index for error in [*errors, *references]}
        fine = [(i, e) for i, e in zip(positions, events, strict=True) if i not in refused]
        conflicts = usage_conflict_errors(events=[e for _, e in fine], indexes=[i for i, _ in fine])
        errors = sorted([*errors, *references, *conflicts], key=lambda error: error.index)
        raise IngestRejected(_named(batch, errors), received=len(items), source=_sources(batch))
    try:
        return usage_ingest(events=events, received_at=now)
    except IngestRejected as rejected:
        if batch.names is None:
            raise
        raise IngestRejected(
            _named(batch, list(rejected.errors)),
            received=rejected.received,
            source=rejected.source,
        ) from None


def _partly(batch: Batch, sender: Sender) -> IngestResult:
    """OTLP's rule: the valid events are stored, the others returned, each error naming its
    record's index."""
    now = clock.now()
    items = sender.items_defaulted(batch.items)
    present = [(index, item) for index, item in enumerate(items) if item is not None]
    events, problems = validate_events(items=[item for _, item in present], now=now)
    rejected = [
        *batch.errors,
        *(EventError(present[e.index][0], e.field, e.message) for e in problems),
    ]
    refused = {error.index for error in problems}
    indexes = [index for k, (index, _) in enumerate(present) if k not in refused]
    foreign = sender.foreign_errors(
        (index, e.tenant, e.project) for index, e in zip(indexes, events, strict=True)
    )
    if foreign:
        rejected += foreign
        refused_spans = {error.index for error in foreign}
        kept = [(i, e) for i, e in zip(indexes, events, strict=True) if i not in refused_spans]
        indexes, events = [i for i, _ in kept], [e for _, e in kept]
    result = usage_ingest(events=events, received_at=now, partial=True)
    rejected += [EventError(indexes[e.index], e.field, e.message) for e in result.rejected]
    return IngestResult(
        accepted=result.accepted,
        duplicates=result.duplicates,
        rejected=tuple(sorted(rejected, key=lambda error: error.index)),
    )


def _named(batch: Batch, errors: list[EventError]) -> list[EventError]:
    return errors if batch.names is None else batch.names(errors)


def _sources(batch: Batch) -> str:
    """The batch's sources as the debugger names them."""
    if batch.sources is None:
        return batch_sources(batch.items)
    return ", ".join(sorted(batch.sources))


def usage_ingest(
    *, events: Sequence[EventIn], received_at: datetime, partial: bool = False
) -> IngestResult:
    """Store a validated batch all or nothing; replays of a stored (source, id) with the same
    payload are counted as duplicates, with another payload they are a conflict (409).
    `partial` (OTLP's rule, architecture.md "Ingestion"): the events that cannot be stored
    (an unknown tenant, model or deployment, a new project past its tenant's limit; a
    changed payload for a known id) are left out
    and reported in the result's `rejected`, every other event is stored."""
    rows, errors = events_place(events)
    if errors and not partial:
        refused = {error.index for error in errors}
        fine = [i for i in range(len(events)) if i not in refused]
        conflicts = usage_conflict_errors(events=[events[i] for i in fine], indexes=fine)
        errors = sorted([*errors, *conflicts], key=lambda error: error.index)
        raise IngestRejected(errors, received=len(events), source=batch_sources(events))
    refused = {error.index for error in errors}
    positions = [i for i in range(len(events)) if i not in refused]  # of the events kept
    kept = [events[i] for i in positions]
    unique, duplicates, conflicts = dedupe_within_batch(events=kept)
    if conflicts and not partial:
        raise IngestConflict(conflicts, received=len(events), source=batch_sources(events))
    rejected = [*errors, *(EventError(positions[i], "id", CONFLICT) for i in conflicts)]
    if len(unique) == len(kept) == len(rows):  # no key repeated: the rows are `kept`, in order
        unique_rows = list(rows)
    else:  # the row of each key's first occurrence, the one `unique` keeps
        by_key = {(row.event.source, row.event.id): row for row in reversed(rows)}
        unique_rows = [by_key[(e.source, e.id)] for e in unique]
    accepted = replayed = 0
    while unique_rows:
        try:
            accepted, replayed = events_store(unique_rows, kept, received_at)
            break
        except ProjectsFull as full:  # filled by a batch stored since they were placed
            past = [
                EventError(positions[i], "project", limit_message(kept[i].tenant))
                for i in full.indexes
            ]
            if not partial:
                raise IngestRejected(
                    past, received=len(events), source=batch_sources(events)
                ) from None
            rejected += past
            keys = {(kept[i].source, kept[i].id) for i in full.indexes}
            unique_rows = [r for r in unique_rows if (r.event.source, r.event.id) not in keys]
        except StoredConflict as conflict:
            if not partial:
                raise IngestConflict(
                    conflict.indexes, received=len(events), source=batch_sources(events)
                ) from None
            # Left out, and the rest stored without them (nothing of the first try was).
            seen = {error.index for error in rejected}
            new = [i for i in conflict.indexes if positions[i] not in seen]
            keys = {(kept[i].source, kept[i].id) for i in new}
            rejected += [EventError(positions[i], "id", CONFLICT) for i in new]
            duplicates -= len(new) - len(keys)  # their repeats in the batch: refused too
            unique_rows = [r for r in unique_rows if (r.event.source, r.event.id) not in keys]
    return IngestResult(
        accepted=accepted,
        duplicates=duplicates + replayed,
        rejected=tuple(sorted(rejected, key=lambda error: error.index)),
    )


def batch_sources(events: Sequence) -> str:
    """The distinct sources of a batch (events, or raw items whose source is well-formed),
    as the ingestion debugger names them."""
    names = set()
    for event in events:
        if type(event) is dict:
            source = event.get("source", "default")
        else:  # an EventIn, or None for a record that could not be converted
            source = getattr(event, "source", None)
        if type(source) is str:
            names.add(source)
    return ", ".join(sorted(names))[:128]
