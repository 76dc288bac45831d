"""Prometheus telemetry services: store pushes and scrapes of vLLM, SGLang and dcgm-exporter.

An exposition is parsed per metric family (a bad family is skipped and listed, never
fatal), compared with the previous cumulative values kept on its scrape target (or on
the push state of its pool, kind and source), and the reset-aware increases are added
into the UTC hour of the observation: EngineHourly per deployment, GpuHourly per GPU.
The first observation of a series is its baseline and adds nothing (data-formats.md
§0, §8). Engine counters feed reconciliation, latency charts and checks, never the
KPIs (kpis.md §1).

Only hourly aggregates are kept, not the 30 s samples: an increase between two
observations is attributed whole to the hour of the later one.
"""

from __future__ import annotations

import logging
import math
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final
from urllib.parse import urlsplit

from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction
from django.db.models import F

from .ingest.prometheus import (
    EngineStats,
    GpuStats,
    Histogram,
    counter_delta,
    engine_deltas,
    engine_stats_sum,
    histogram_sum,
    parse_scrape,
)
from .models import (
    Deployment,
    EngineHourly,
    GpuHourly,
    ModelAlias,
    Pool,
    ScrapeTarget,
    ServedModel,
    TelemetryKind,
    TelemetryPushState,
)

log = logging.getLogger(__name__)

MAX_EXPOSITION_BYTES: Final = 8 * 1024 * 1024  # a push body or a scraped page
MAX_ERROR_CHARS: Final = 2000
DEFAULT_PUSH_SOURCE: Final = "default"
# The per-request TPOT histogram; the ITL families are fallbacks (data-formats.md §8.6).
_PER_REQUEST_TPOT = "request_time_per_output_token_seconds"
_STATE_VERSION = 1

Fetch = Callable[[str, float], str]


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


@dataclass(frozen=True, slots=True)
class ScrapeOutcome:
    """The result of scraping one target: `result` when stored, `error` when it failed."""

    target_id: int
    url: str
    is_ok: bool
    error: str = ""
    result: TelemetryResult | None = None


# --- ingestion ------------------------------------------------------------------------------


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
    hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    with transaction.atomic():
        holder = _lock_state_holder(pool=pool, kind=kind, target=target, source=source)
        previous = holder.state if holder.state.get("kind") == kind else {}
        if kind == TelemetryKind.DCGM:
            new_state, is_baseline = _store_gpus(
                pool=pool, hour=hour, now=now, gpus=scrape.gpus, previous=previous
            )
            unknown: tuple[str, ...] = ()
            deployments: tuple[str, ...] = ()
        else:
            gauge_source = f"target:{target.pk}" if target is not None else f"push:{source}"
            new_state, is_baseline, unknown, deployments = _store_engines(
                pool=pool,
                hour=hour,
                now=now,
                replicas=scrape.replicas,
                previous=previous,
                deployment=holder.deployment if isinstance(holder, ScrapeTarget) else None,
                gauge_source=gauge_source,
            )
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


def _lock_state_holder(
    *, pool: Pool, kind: str, target: ScrapeTarget | None, source: str
) -> ScrapeTarget | TelemetryPushState:
    if target is not None:
        return ScrapeTarget.objects.select_for_update().get(pk=target.pk)
    TelemetryPushState.objects.bulk_create(
        [TelemetryPushState(pool=pool, kind=kind, source=source)], ignore_conflicts=True
    )
    return TelemetryPushState.objects.select_for_update().get(pool=pool, kind=kind, source=source)


# --- engines (vLLM, SGLang) -----------------------------------------------------------------


def _store_engines(
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
        key = str(target_deployment.pk)
        by_deployment[target_deployment.pk].append(replace(stats, model_name=key))
        counted[target_deployment.pk] |= stats.model_name in models_with_history
    for stats in current_by_model:
        target_deployment = resolved.get(stats.model_name)
        if target_deployment is not None:
            gauges_by_deployment[target_deployment.pk].append(
                replace(stats, model_name=str(target_deployment.pk))
            )

    deployment_ids = sorted(by_deployment)
    if deployment_ids:
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
    slugs = {d.pk: d.slug for d in resolved.values()}
    state = {"replicas": _next_replica_state(previous=previous, current=replicas)}
    return (
        state,
        not models_with_history,
        unknown,
        tuple(sorted(slugs[pk] for pk in deployment_ids)),
    )


def _resolve_deployments(
    *, pool: Pool, model_names: Sequence[str], deployment: Deployment | None
) -> dict[str, Deployment]:
    """Engine model name -> deployment: the target's deployment when set, else the served
    model named by the alias (first) or the slug, deployed on the pool."""
    names = sorted(set(model_names))
    if deployment is not None:
        return dict.fromkeys(names, deployment)
    model_ids = dict(ServedModel.objects.filter(slug__in=names).values_list("slug", "id"))
    model_ids.update(ModelAlias.objects.filter(alias__in=names).values_list("alias", "model_id"))
    deployments = {
        d.model_id: d for d in Deployment.objects.filter(pool=pool, model_id__in=model_ids.values())
    }
    return {
        name: deployments[model_ids[name]]
        for name in names
        if name in model_ids and model_ids[name] in deployments
    }


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
        ttft_histogram=_merge_histogram(stored=row.ttft_histogram, increase=increase.ttft),
        tpot_histogram=tpot_json,
        tpot_family=tpot_family,
        gauges=gauges,
        running_requests=_gauge_total(gauges, "running_requests"),
        waiting_requests=_gauge_total(gauges, "waiting_requests"),
        kv_cache_usage=_gauge_mean(gauges, "kv_cache_usage"),
        last_observed_at=now,
    )


def _merge_histogram(*, stored: Mapping[str, Any], increase: Histogram | None) -> dict[str, Any]:
    before = histogram_from_json(stored)
    if increase is None:
        return dict(stored)
    if before is None or before.count <= 0:
        return histogram_to_json(increase)
    if increase.count <= 0 and increase.edges != before.edges:
        return dict(stored)  # an empty increase must not coarsen the stored edges
    return histogram_to_json(histogram_sum(histograms=[before, increase]))


def _merge_tpot(
    *, stored: Mapping[str, Any], stored_family: str, increase: Histogram | None, family: str
) -> tuple[dict[str, Any], str]:
    """Add a TPOT increase unless it comes from another family than the hour's: then the
    per-request histogram wins over the inter-token fallback (data-formats.md §8.6)."""
    before = histogram_from_json(stored)
    if increase is None:
        return dict(stored), stored_family
    if before is None or before.count <= 0 or not stored_family or stored_family == family:
        return _merge_histogram(stored=stored, increase=increase), family
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


# --- dcgm-exporter --------------------------------------------------------------------------


def _gpu_key(gpu: GpuStats) -> str:
    if gpu.uuid:
        return f"{gpu.uuid}/{gpu.gpu_instance}" if gpu.gpu_instance else gpu.uuid
    return f"{gpu.hostname or ''}:{gpu.gpu}" + (f"/{gpu.gpu_instance}" if gpu.gpu_instance else "")


def _store_gpus(
    *,
    pool: Pool,
    hour: datetime,
    now: datetime,
    gpus: Sequence[GpuStats],
    previous: Mapping[str, Any],
) -> tuple[dict[str, Any], bool]:
    before: Mapping[str, Mapping[str, Any]] = previous.get("gpus", {})
    by_key = {_gpu_key(gpu): gpu for gpu in gpus}
    state: dict[str, dict[str, Any]] = {}
    if by_key:
        GpuHourly.objects.bulk_create(
            [GpuHourly(pool=pool, hour=hour, gpu_key=key) for key in sorted(by_key)],
            ignore_conflicts=True,
        )
        rows = GpuHourly.objects.select_for_update().filter(
            pool=pool, hour=hour, gpu_key__in=list(by_key)
        )
        for row in rows.order_by("gpu_key"):
            gpu = by_key[row.gpu_key]
            old = before.get(row.gpu_key, {})
            state[row.gpu_key] = _add_gpu_sample(row=row, gpu=gpu, old=old, now=now)
    return {"gpus": state}, not any(key in before for key in by_key)


def _add_gpu_sample(
    *, row: GpuHourly, gpu: GpuStats, old: Mapping[str, Any], now: datetime
) -> dict[str, Any]:
    """Add one sample of a GPU to its hour; returns the GPU's next state."""
    energy_j = Decimal(0)
    energy_mj = gpu.energy_mj if gpu.energy_mj is not None else old.get("energy_mj")
    if gpu.energy_mj is not None and gpu.energy_mj >= 0:
        increase_mj = counter_delta(previous=old.get("energy_mj"), current=gpu.energy_mj)
        energy_j = (Decimal(repr(increase_mj)) / 1000).quantize(Decimal("0.001"))
    xid = gpu.xid_last_code
    previous_xid = old.get("xid")
    is_new_xid = xid is not None and xid != 0 and "xid" in old and xid != previous_xid
    changes: dict[str, Any] = {
        "samples": F("samples") + 1,
        "energy_j": F("energy_j") + energy_j,
        "xid_changes": F("xid_changes") + (1 if is_new_xid else 0),
        "last_observed_at": now,
        "gpu": gpu.gpu,
        "uuid": gpu.uuid,
        "model_name": gpu.model_name or "",
        "hostname": gpu.hostname or "",
        "pod": gpu.pod or "",
        "namespace": gpu.namespace or "",
    }
    if gpu.utilisation_pct is not None:
        changes["utilisation_samples"] = F("utilisation_samples") + 1
        changes["utilisation_pct_sum"] = F("utilisation_pct_sum") + gpu.utilisation_pct
    if gpu.power_w is not None:
        changes["power_samples"] = F("power_samples") + 1
        changes["power_w_sum"] = F("power_w_sum") + gpu.power_w
    if xid is not None:
        changes["xid_last_code"] = xid
    GpuHourly.objects.filter(pk=row.pk).update(**changes)
    return {"energy_mj": energy_mj, "xid": xid if xid is not None else previous_xid}


# --- histograms as JSON ---------------------------------------------------------------------


def _le(edge: float) -> str:
    return "+Inf" if edge == math.inf else repr(float(edge))


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def histogram_to_json(histogram: Histogram) -> dict[str, Any]:
    """`{"le": ["0.1", ..., "+Inf"], "cumulative": [...], "sum", "count"}`: strict JSON
    (no Infinity, which PostgreSQL's jsonb refuses), edges as Prometheus writes `le`."""
    return {
        "le": [_le(edge) for edge in histogram.edges],
        "cumulative": [_number(count) for _, count in histogram.buckets],
        "sum": histogram.sum,
        "count": _number(histogram.count),
    }


def histogram_from_json(data: Mapping[str, Any] | None) -> Histogram | None:
    """The inverse of histogram_to_json; None for `{}` or None."""
    if not data:
        return None
    return Histogram(
        buckets=tuple(
            (float(edge), float(count))
            for edge, count in zip(data["le"], data["cumulative"], strict=True)
        ),
        sum=float(data["sum"]),
        count=float(data["count"]),
    )


# --- scraping -------------------------------------------------------------------------------


def fetch_metrics(url: str, timeout_s: float) -> str:
    """GET an http(s) `/metrics` page as text; raises OSError/ValueError on any failure."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"only http and https URLs can be scraped, got {url!r}")
    request = urllib.request.Request(  # noqa: S310  (scheme checked above)
        url, headers={"Accept": "text/plain;version=0.0.4", "User-Agent": "token-factory-portal"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
        body = response.read(MAX_EXPOSITION_BYTES + 1)
        charset = response.headers.get_content_charset() or "utf-8"
    if len(body) > MAX_EXPOSITION_BYTES:
        raise ExpositionTooLarge(f"the page is larger than {MAX_EXPOSITION_BYTES} bytes")
    return body.decode(charset)


def scrape_target(
    *, target: ScrapeTarget, now: datetime, fetch: Fetch = fetch_metrics
) -> ScrapeOutcome:
    """Fetch and store one target; never raises. A failure marks the target `failed` with
    the error and counts it in `consecutive_failures`; a success resets both."""
    text, error = _attempt_fetch(target=target, fetch=fetch)
    return _scrape_record(target=target, now=now, text=text, error=error)


def scrape_all(
    *, now: datetime, fetch: Fetch = fetch_metrics, max_workers: int = 16
) -> list[ScrapeOutcome]:
    """Scrape every enabled target once: fetch them concurrently, then store each in its own
    transaction. One target's failure never stops the others."""
    targets = list(
        ScrapeTarget.objects.filter(enabled=True)
        .select_related("pool", "deployment")
        .order_by("pk")
    )
    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(max_workers, len(targets))) as executor:
        fetched = list(executor.map(lambda t: _attempt_fetch(target=t, fetch=fetch), targets))
    return [
        _scrape_record(target=target, now=now, text=text, error=error)
        for target, (text, error) in zip(targets, fetched, strict=True)
    ]


def _attempt_fetch(*, target: ScrapeTarget, fetch: Fetch) -> tuple[str | None, Exception | None]:
    try:
        return fetch(target.url, float(target.timeout_s)), None
    except SoftTimeLimitExceeded:
        raise  # the task's time is up: stop, this target did not fail
    except Exception as error:  # any fetch failure is the target's, recorded on it
        return None, error


def _scrape_record(
    *, target: ScrapeTarget, now: datetime, text: str | None, error: Exception | None
) -> ScrapeOutcome:
    if error is None and text is not None:
        try:
            with transaction.atomic():
                result = telemetry_ingest(
                    text=text, kind=target.kind, pool=target.pool, target=target, now=now
                )
                ScrapeTarget.objects.filter(pk=target.pk).update(
                    last_scraped_at=now,
                    last_status=ScrapeTarget.Status.OK,
                    last_error="",
                    consecutive_failures=0,
                    last_skipped=[{"family": f, "reason": r} for f, r in result.skipped],
                    last_unknown_models=list(result.unknown_models),
                )
            return ScrapeOutcome(target_id=target.pk, url=target.url, is_ok=True, result=result)
        except SoftTimeLimitExceeded:
            raise
        except Exception as ingest_error:  # a bad page must not stop the other targets
            log.exception("scrape: storing %s failed", target.url)
            error = ingest_error
    message = _describe(error)
    log.warning("scrape: %s failed: %s", target.url, message)
    try:
        ScrapeTarget.objects.filter(pk=target.pk).update(
            last_scraped_at=now,
            last_status=ScrapeTarget.Status.FAILED,
            last_error=message,
            consecutive_failures=F("consecutive_failures") + 1,
        )
    except SoftTimeLimitExceeded:
        raise
    except Exception:  # the database itself is down: nothing more to record
        log.exception("scrape: could not record the failure of %s", target.url)
    return ScrapeOutcome(target_id=target.pk, url=target.url, is_ok=False, error=message)


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "no content"
    return f"{type(error).__name__}: {error}"[:MAX_ERROR_CHARS]
