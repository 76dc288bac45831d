"""vLLM and SGLang expositions: add their increases and gauges to EngineHourly per deployment."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db.models import F

from metering.domain.telemetry.engines import EngineStats, engine_deltas, engine_stats_sum
from metering.domain.telemetry.histogram_json import (
    histogram_from_json,
    histogram_merge,
    histogram_to_json,
)
from metering.domain.telemetry.histograms import Histogram
from metering.models import Deployment, EngineHourly, Pool
from metering.selectors.factory import Placed, placements_read

# The per-request TPOT histogram; the ITL families are fallbacks (data-formats.md §8.6).
_PER_REQUEST_TPOT = "request_time_per_output_token_seconds"


def store_engines(
    *,
    pool: Pool,
    hour: datetime,
    now: datetime,
    replicas: Sequence[EngineStats],
    previous: Mapping[str, Any],
    deployment: Deployment | None,
    gauge_source: str,
) -> tuple[dict[str, Any], bool, tuple[str, ...], tuple[str, ...]]:
    before = [_stats_from_json(item) for item in previous.get("replicas", ())]
    before_keys = {(stats.model_name, stats.replica) for stats in before}
    models_with_history = {
        stats.model_name for stats in replicas if (stats.model_name, stats.replica) in before_keys
    }
    increases = engine_deltas(previous=before, current=replicas)
    current_by_model = engine_stats_sum(replicas=replicas)  # for the gauges
    resolved = _resolve_deployments(
        pool=pool, model_names=[stats.model_name for stats in increases], deployment=deployment
    )
    unknown = tuple(
        sorted(name for name in {s.model_name for s in increases} if name not in resolved)
    )

    by_deployment: dict[int, list[EngineStats]] = defaultdict(list)
    gauges_by_deployment: dict[int, list[EngineStats]] = defaultdict(list)
    counted: dict[int, bool] = defaultdict(bool)
    for stats in increases:
        target_deployment = resolved.get(stats.model_name)
        if target_deployment is None:
            continue
        key = str(target_deployment.id)
        by_deployment[target_deployment.id].append(replace(stats, model_name=key))
        counted[target_deployment.id] |= stats.model_name in models_with_history
    for stats in current_by_model:
        target_deployment = resolved.get(stats.model_name)
        if target_deployment is not None:
            gauges_by_deployment[target_deployment.id].append(
                replace(stats, model_name=str(target_deployment.id))
            )

    deployment_ids = sorted(by_deployment)
    _hours_add(
        hour, by_deployment, gauges_by_deployment, counted, gauge_source=gauge_source, now=now
    )
    slugs = {d.id: d.slug for d in resolved.values()}
    state = {"replicas": _next_replica_state(previous=previous, current=replicas)}
    return (
        state,
        not models_with_history,
        unknown,
        tuple(sorted(slugs[pk] for pk in deployment_ids)),
    )


def _hours_add(hour, by_deployment, gauges_by_deployment, counted, *, gauge_source, now) -> None:
    """Each deployment's increases and gauges added to its hour, the rows locked in
    deployment order."""
    deployment_ids = sorted(by_deployment)
    if not deployment_ids:
        return
    EngineHourly.objects.bulk_create(
        [EngineHourly(deployment_id=pk, hour=hour) for pk in deployment_ids],
        ignore_conflicts=True,
    )
    rows = EngineHourly.objects.select_for_update().filter(
        deployment_id__in=deployment_ids, hour=hour
    )
    for row in rows.order_by("deployment_id"):
        (increase,) = engine_stats_sum(replicas=by_deployment[row.deployment_id])
        (gauge,) = engine_stats_sum(replicas=gauges_by_deployment[row.deployment_id])
        _add_engine_increase(
            row=row,
            increase=increase,
            gauge=gauge,
            is_counted=counted[row.deployment_id],
            gauge_source=gauge_source,
            now=now,
        )


def _resolve_deployments(
    *, pool: Pool, model_names: Sequence[str], deployment: Deployment | None
) -> dict[str, Placed]:
    """Engine model name -> deployment: the target's deployment when set, else the served
    model the name or alias names, deployed on the pool."""
    names = set(model_names)
    if deployment is not None:
        return dict.fromkeys(names, Placed(deployment.pk, deployment.slug))
    known = placements_read(names=names)
    placed = {name: known.place(name, pool.slug)[0] for name in names}
    return {name: found for name, found in placed.items() if found is not None}


def _add_engine_increase(
    *,
    row: EngineHourly,
    increase: EngineStats,
    gauge: EngineStats,
    is_counted: bool,
    gauge_source: str,
    now: datetime,
) -> None:
    by_reason = dict(row.requests_by_reason)
    for reason, value in increase.requests_by_reason.items():
        by_reason[reason] = by_reason.get(reason, 0) + _tokens(value)
    tpot_json, tpot_family = _merge_tpot(
        stored=row.tpot_histogram,
        stored_family=row.tpot_family,
        increase=increase.tpot,
        family=increase.tpot_family or "",
    )
    gauges = dict(row.gauges)
    gauges[gauge_source] = {
        "running_requests": gauge.running_requests,
        "waiting_requests": gauge.waiting_requests,
        "kv_cache_usage": gauge.kv_cache_usage,
        "observed_at": now.isoformat(),
    }
    EngineHourly.objects.filter(pk=row.pk).update(
        intervals=F("intervals") + (1 if is_counted else 0),
        prompt_tokens=F("prompt_tokens") + _tokens(increase.prompt_tokens),
        generation_tokens=F("generation_tokens") + _tokens(increase.generation_tokens),
        cached_prompt_tokens=F("cached_prompt_tokens") + _tokens(increase.cached_prompt_tokens),
        requests=F("requests") + _tokens(increase.requests_total),
        aborted_requests=F("aborted_requests") + _tokens(increase.requests_aborted),
        requests_by_reason=by_reason,
        ttft_histogram=histogram_merge(stored=row.ttft_histogram, increase=increase.ttft),
        tpot_histogram=tpot_json,
        tpot_family=tpot_family,
        gauges=gauges,
        running_requests=_gauge_total(gauges, "running_requests"),
        waiting_requests=_gauge_total(gauges, "waiting_requests"),
        kv_cache_usage=_gauge_mean(gauges, "kv_cache_usage"),
        last_observed_at=now,
    )


def _merge_tpot(
    *, stored: Mapping[str, Any], stored_family: str, increase: Histogram | None, family: str
) -> tuple[dict[str, Any], str]:
    """Add a TPOT increase unless it comes from another family than the hour's: then the
    per-request histogram wins over the inter-token fallback (data-formats.md §8.6)."""
    before = histogram_from_json(stored)
    if increase is None:
        return dict(stored), stored_family
    if before is None or before.count <= 0 or not stored_family or stored_family == family:
        return histogram_merge(stored=stored, increase=increase), family
    if _PER_REQUEST_TPOT in family and _PER_REQUEST_TPOT not in stored_family:
        return histogram_to_json(increase), family
    return dict(stored), stored_family


def _gauge_total(gauges: Mapping[str, Mapping[str, Any]], name: str) -> float | None:
    values = [g[name] for g in gauges.values() if g.get(name) is not None]
    return math.fsum(values) if values else None


def _gauge_mean(gauges: Mapping[str, Mapping[str, Any]], name: str) -> float | None:
    values = [g[name] for g in gauges.values() if g.get(name) is not None]
    return math.fsum(values) / len(values) if values else None


def _tokens(value: float | None) -> int:
    return 0 if value is None else round(value)


_STATS_COUNTERS = (
    "prompt_tokens",
    "generation_tokens",
    "cached_prompt_tokens",
    "requests_total",
    "requests_aborted",
)

_STATS_HISTOGRAMS = ("ttft", "tpot")


def _stats_to_json(stats: EngineStats) -> dict[str, Any]:
    out: dict[str, Any] = {"model_name": stats.model_name, "replica": stats.replica}
    for name in _STATS_COUNTERS:
        out[name] = getattr(stats, name)
    out["requests_by_reason"] = dict(stats.requests_by_reason)
    for name in _STATS_HISTOGRAMS:
        histogram = getattr(stats, name)
        out[name] = None if histogram is None else histogram_to_json(histogram)
    out["tpot_family"] = stats.tpot_family
    return out


def _stats_from_json(data: Mapping[str, Any]) -> EngineStats:
    return EngineStats(
        model_name=data["model_name"],
        replica=data["replica"],
        **{name: data.get(name) for name in _STATS_COUNTERS},
        requests_by_reason=dict(data.get("requests_by_reason") or {}),
        ttft=histogram_from_json(data.get("ttft")),
        tpot=histogram_from_json(data.get("tpot")),
        tpot_family=data.get("tpot_family"),
    )


def _next_replica_state(
    *, previous: Mapping[str, Any], current: Sequence[EngineStats]
) -> list[dict[str, Any]]:
    """The current replicas' cumulative values. A series this scrape lacks (its family was
    skipped) keeps its previous value, so the next delta spans both intervals. Replicas
    absent from the scrape are dropped, like stale Prometheus series."""
    before = {(item["model_name"], item["replica"]): item for item in previous.get("replicas", ())}
    state = []
    for stats in current:
        item = _stats_to_json(stats)
        old = before.get((stats.model_name, stats.replica), {})
        for name, value in old.items():
            if item.get(name) in (None, {}) and value not in (None, {}):
                item[name] = value
        state.append(item)
    return state
