"""Store one exposition (a push or a scrape) into its UTC hour, serialised per state row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from django.db import transaction

from metering.domain.telemetry.parse import parse_scrape
from metering.models import Pool, ScrapeTarget, TelemetryKind, TelemetryPushState
from metering.services.telemetry.engine_hours import store_engines
from metering.services.telemetry.gpu_hours import store_gpus
from portal.periods import hour_floor

MAX_EXPOSITION_BYTES: Final = 8 * 1024 * 1024  # a push body or a scraped page

DEFAULT_PUSH_SOURCE: Final = "default"

_STATE_VERSION = 1


class ExpositionTooLarge(ValueError):
    """A scraped page or pushed body exceeds MAX_EXPOSITION_BYTES."""


@dataclass(frozen=True, slots=True)
class TelemetryResult:
    """What one exposition stored: families kept, families skipped (name, reason), engine
    model names that resolve to no deployment of the pool, deployments and GPUs written."""

    kind: str
    families: int
    skipped: tuple[tuple[str, str], ...]
    unknown_models: tuple[str, ...]
    deployments: tuple[str, ...]  # slugs whose hour was written
    gpus: int
    is_baseline: bool  # no series had a previous observation: nothing was added


def telemetry_ingest(
    *,
    text: str,
    kind: str,
    pool: Pool,
    target: ScrapeTarget | None = None,
    now: datetime,
    source: str = DEFAULT_PUSH_SOURCE,
) -> TelemetryResult:
    """Store one exposition's increases into its hour; atomic, and serialised per state row.

    The previous cumulative values come from `target.state` for a scrape, else from the
    TelemetryPushState of (pool, kind, source); both are locked for the transaction.
    Unknown engine model names are reported in the result (their baseline is still kept,
    so an alias added later does not count their whole history).
    """
    if kind not in TelemetryKind.values:
        raise ValueError(f"kind must be one of {', '.join(TelemetryKind.values)}, got {kind!r}")
    if target is not None and (target.kind != kind or target.pool_id != pool.pk):
        raise ValueError("the target's kind and pool must match the exposition's")
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    scrape = parse_scrape(text=text, kind=kind)  # type: ignore[arg-type]  # checked above
    hour = hour_floor(now)
    with transaction.atomic():
        holder = _lock_state_holder(pool=pool, kind=kind, target=target, source=source)
        previous = holder.state if holder.state.get("kind") == kind else {}
        new_state, is_baseline, unknown, deployments = _store(
            scrape, kind=kind, pool=pool, hour=hour, now=now, previous=previous, holder=holder,
            source=source,
        )  # fmt: skip
        new_state.update(kind=kind, version=_STATE_VERSION, observed_at=now.isoformat())
        if isinstance(holder, ScrapeTarget):
            ScrapeTarget.objects.filter(pk=holder.pk).update(state=new_state)
        else:
            TelemetryPushState.objects.filter(pk=holder.pk).update(
                state=new_state, last_pushed_at=now
            )
    if target is not None:
        target.state = new_state
    return TelemetryResult(
        kind=kind,
        families=len(scrape.families),
        skipped=scrape.skipped,
        unknown_models=unknown,
        deployments=deployments,
        gpus=len(scrape.gpus),
        is_baseline=is_baseline,
    )


def _store(scrape, *, kind, pool, hour, now, previous, holder, source) -> tuple:
    """The exposition's increases stored into its hour: a DCGM page's GPUs, an engine
    page's replicas (a scrape target may bind them to its deployment). Returns the new
    state, whether it was only a baseline, the unknown model names and the deployments."""
    if kind == TelemetryKind.DCGM:
        new_state, is_baseline = store_gpus(
            pool=pool, hour=hour, now=now, gpus=scrape.gpus, previous=previous
        )
        unknown: tuple[str, ...] = ()
        deployments: tuple[str, ...] = ()
    else:
        gauge_source = (
            f"target:{holder.pk}" if isinstance(holder, ScrapeTarget) else f"push:{source}"
        )
        new_state, is_baseline, unknown, deployments = store_engines(
            pool=pool,
            hour=hour,
            now=now,
            replicas=scrape.replicas,
            previous=previous,
            deployment=holder.deployment if isinstance(holder, ScrapeTarget) else None,
            gauge_source=gauge_source,
        )
    return new_state, is_baseline, unknown, deployments


def _lock_state_holder(
    *, pool: Pool, kind: str, target: ScrapeTarget | None, source: str
) -> ScrapeTarget | TelemetryPushState:
    if target is not None:
        return ScrapeTarget.objects.select_for_update().get(pk=target.pk)
    TelemetryPushState.objects.bulk_create(
        [TelemetryPushState(pool=pool, kind=kind, source=source)], ignore_conflicts=True
    )
    return TelemetryPushState.objects.select_for_update().get(pool=pool, kind=kind, source=source)
