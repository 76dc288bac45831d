"""vLLM, SGLang and NVIDIA Dynamo `/metrics`, normalised per model (and per replica for reset
handling).

Both generations of names are read (vLLM V0/V1, old/new SGLang). A replica is the
unit that restarts and resets its counters: the vLLM `engine` label, the SGLang
`dp_rank` label, "" when the engine has neither. Series are summed over every other
label (`is_streaming`, `engine_type`, `priority`, ...) except `tp_rank`: only rank 0
is kept, as SGLang may repeat scheduler gauges on every TP rank (data-formats.md §8.1).
Pure: no Django.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from metering.domain.telemetry.counters import counter_delta
from metering.domain.telemetry.exposition import Family, Labels, family_histograms, family_values
from metering.domain.telemetry.histograms import Histogram, histogram_delta, histogram_sum

EngineKind = Literal["vllm", "sglang", "dynamo"]

_Key = tuple[str, str]  # (model_name, replica)

_EMPTY: Mapping[str, float] = MappingProxyType({})

# Candidate families per field, first present wins (newest name first).
_NAMES: Mapping[EngineKind, Mapping[str, tuple[str, ...]]] = {
    "vllm": {
        "prompt_tokens": ("vllm:prompt_tokens",),
        "generation_tokens": ("vllm:generation_tokens",),
        "running_requests": ("vllm:num_requests_running",),
        "waiting_requests": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "ttft": ("vllm:time_to_first_token_seconds",),
        "tpot": (
            "vllm:request_time_per_output_token_seconds",
            "vllm:inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds",
        ),
        "e2e_latency": ("vllm:e2e_request_latency_seconds",),
    },
    "sglang": {
        "prompt_tokens": ("sglang:prompt_tokens",),
        "generation_tokens": ("sglang:generation_tokens",),
        "requests_total": ("sglang:num_requests",),
        "requests_aborted": ("sglang:num_aborted_requests",),
        "running_requests": ("sglang:num_running_reqs",),
        "waiting_requests": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "ttft": ("sglang:time_to_first_token_seconds",),
        "tpot": (
            "sglang:request_time_per_output_token_seconds",
            "sglang:inter_token_latency_seconds",
            "sglang:time_per_output_token_seconds",
        ),
        "e2e_latency": ("sglang:e2e_request_latency_seconds",),
    },
    # Dynamo's frontend (data-formats.md 6c): its token counts are the sums of the
    # per-request sequence-length histograms (DYNAMO_TOKENS); the KV gauge is a 0-1 ratio.
    "dynamo": {
        "requests_total": ("dynamo_frontend_requests",),  # ..._total: the family drops it
        "running_requests": ("dynamo_frontend_inflight_requests",),
        "waiting_requests": ("dynamo_frontend_queued_requests",),
        "kv_cache_usage": ("dynamo_component_kvstats_gpu_cache_usage_percent",),
        "ttft": ("dynamo_frontend_time_to_first_token_seconds",),
        "tpot": ("dynamo_frontend_inter_token_latency_seconds",),
    },
}

# Dynamo counts tokens per request in histograms: their sums are the token counters.
DYNAMO_TOKENS: Mapping[str, str] = {
    "prompt_tokens": "dynamo_frontend_input_sequence_tokens",
    "generation_tokens": "dynamo_frontend_output_sequence_tokens",
}

# Dynamo's frontend is one process per model service: no replica label ("").
_REPLICA_LABEL: Mapping[EngineKind, str] = {"vllm": "engine", "sglang": "dp_rank", "dynamo": ""}

# Very old SGLang labelled the model `name=`; vLLM's `name` is never a model.
_MODEL_LABELS: Mapping[EngineKind, tuple[str, ...]] = {
    "vllm": ("model_name",),
    "sglang": ("model_name", "name"),
    "dynamo": ("model",),
}


@dataclass(frozen=True, slots=True)
class EngineStats:
    """Engine telemetry of one model on one replica, or summed over replicas (replica None).

    Counters are cumulative since the replica started (or increments, when produced by
    `engine_stats_delta`); gauges are point-in-time. None means not exposed.
    """

    model_name: str
    replica: str | None  # vLLM `engine`, SGLang `dp_rank`, "" if unlabelled; None = sum
    prompt_tokens: float | None = None  # counter, tokens, incl. prefix-cache hits
    generation_tokens: float | None = None  # counter, tokens
    cached_prompt_tokens: float | None = None  # counter, prompt tokens served from cache
    requests_total: float | None = None  # counter, finished requests incl. aborted
    requests_aborted: float | None = None  # counter
    requests_by_reason: Mapping[str, float] = field(default_factory=lambda: _EMPTY, hash=False)
    running_requests: float | None = None  # gauge, requests
    waiting_requests: float | None = None  # gauge, requests
    kv_cache_usage: float | None = None  # gauge, fraction 0-1 (mean over replicas)
    ttft: Histogram | None = None  # s
    tpot: Histogram | None = None  # s; per-request mean when tpot_family says so
    tpot_family: str | None = None  # the family TPOT was read from (fallback order)
    e2e_latency: Histogram | None = None  # s


def engine_replica_stats(
    *, families: Mapping[str, Family], kind: EngineKind
) -> tuple[EngineStats, ...]:
    """One EngineStats per (model_name, replica) found in the families, sorted."""
    names = _NAMES[kind]
    reader = _Reader(replica_label=_REPLICA_LABEL[kind], model_labels=_MODEL_LABELS[kind])

    def first(field_name: str) -> Family | None:
        return next((families[n] for n in names.get(field_name, ()) if n in families), None)

    sums = {
        name: reader.sums(first(name))
        for name in ("prompt_tokens", "generation_tokens", "running_requests", "waiting_requests")
    }
    sums["cached_prompt_tokens"] = _cached_prompt_tokens(families, kind=kind, reader=reader)
    by_reason: dict[_Key, dict[str, float]] = {}
    if kind == "vllm":
        by_reason = reader.sums_by(families.get("vllm:request_success"), label="finished_reason")
        sums["requests_total"] = {k: math.fsum(v.values()) for k, v in by_reason.items()}
        sums["requests_aborted"] = {k: v.get("abort", 0.0) for k, v in by_reason.items()}
    elif kind == "dynamo":
        for name, family in DYNAMO_TOKENS.items():
            per_key = reader.histograms(families.get(family))
            sums[name] = {key: histogram.sum for key, histogram in per_key.items()}
        requests = first("requests_total")
        sums["requests_total"] = reader.sums(requests)
        sums["requests_aborted"] = reader.sums(requests, label="status", value="error")
    else:
        sums["requests_total"] = reader.sums(first("requests_total"))
        sums["requests_aborted"] = reader.sums(first("requests_aborted"))
    kv_usage = reader.means(first("kv_cache_usage"))
    tpot_family = first("tpot")
    histograms = {
        "ttft": reader.histograms(first("ttft")),
        "tpot": reader.histograms(tpot_family),
        "e2e_latency": reader.histograms(first("e2e_latency")),
    }
    keys: set[_Key] = set(by_reason) | set(kv_usage)
    keys.update(*sums.values(), *histograms.values())
    return tuple(
        EngineStats(
            model_name=key[0],
            replica=key[1],
            prompt_tokens=sums["prompt_tokens"].get(key),
            generation_tokens=sums["generation_tokens"].get(key),
            cached_prompt_tokens=sums["cached_prompt_tokens"].get(key),
            requests_total=sums["requests_total"].get(key),
            requests_aborted=sums["requests_aborted"].get(key),
            requests_by_reason=MappingProxyType(by_reason.get(key, {})),
            running_requests=sums["running_requests"].get(key),
            waiting_requests=sums["waiting_requests"].get(key),
            kv_cache_usage=kv_usage.get(key),
            ttft=histograms["ttft"].get(key),
            tpot=histograms["tpot"].get(key),
            tpot_family=tpot_family.name if tpot_family and key in histograms["tpot"] else None,
            e2e_latency=histograms["e2e_latency"].get(key),
        )
        for key in sorted(keys)
    )


def engine_stats_sum(*, replicas: Sequence[EngineStats]) -> tuple[EngineStats, ...]:
    """Sum per model_name over replicas; the KV-cache usage fraction is averaged instead."""
    by_model: dict[str, list[EngineStats]] = defaultdict(list)
    for stats in replicas:
        by_model[stats.model_name].append(stats)
    return tuple(_sum_model(model, group) for model, group in sorted(by_model.items()))


def engine_stats_delta(*, previous: EngineStats | None, current: EngineStats) -> EngineStats:
    """Increase of one replica's counters and histograms; gauges are the current values.

    Uses counter_delta / histogram_delta, so a restarted replica counts from zero and
    a first observation is a zero baseline.
    """

    def delta(before: float | None, now: float | None) -> float | None:
        return None if now is None else counter_delta(previous=before, current=now)

    def hdelta(before: Histogram | None, now: Histogram | None) -> Histogram | None:
        return None if now is None else histogram_delta(previous=before, current=now)

    before = previous or EngineStats(model_name=current.model_name, replica=current.replica)
    by_reason = {
        reason: counter_delta(previous=before.requests_by_reason.get(reason), current=value)
        for reason, value in current.requests_by_reason.items()
    }
    requests_total = delta(before.requests_total, current.requests_total)
    requests_aborted = delta(before.requests_aborted, current.requests_aborted)
    if by_reason:  # derived from the per-reason series: reset-handle those instead
        requests_total = math.fsum(by_reason.values())
        requests_aborted = by_reason.get("abort", 0.0)
    return EngineStats(
        model_name=current.model_name,
        replica=current.replica,
        prompt_tokens=delta(before.prompt_tokens, current.prompt_tokens),
        generation_tokens=delta(before.generation_tokens, current.generation_tokens),
        cached_prompt_tokens=delta(before.cached_prompt_tokens, current.cached_prompt_tokens),
        requests_total=requests_total,
        requests_aborted=requests_aborted,
        requests_by_reason=MappingProxyType(by_reason),
        running_requests=current.running_requests,
        waiting_requests=current.waiting_requests,
        kv_cache_usage=current.kv_cache_usage,
        ttft=hdelta(before.ttft, current.ttft),
        tpot=hdelta(
            before.tpot if before.tpot_family == current.tpot_family else None, current.tpot
        ),
        tpot_family=current.tpot_family,
        e2e_latency=hdelta(before.e2e_latency, current.e2e_latency),
    )


def engine_deltas(
    *, previous: Sequence[EngineStats], current: Sequence[EngineStats]
) -> tuple[EngineStats, ...]:
    """Per-model increase between two scrapes' replica stats (`Scrape.replicas`).

    Deltas are taken per replica, then summed, like `sum by (model_name) (increase(x))`:
    a restart of one engine then resets only that engine's share. A replica absent from
    `previous` is a baseline.
    """
    before = {(stats.model_name, stats.replica): stats for stats in previous}
    return engine_stats_sum(
        replicas=[
            engine_stats_delta(previous=before.get((now.model_name, now.replica)), current=now)
            for now in current
        ]
    )


@dataclass(frozen=True, slots=True)
class _Reader:
    replica_label: str
    model_labels: tuple[str, ...]

    def key(self, labels: Labels) -> _Key | None:
        if labels.get("tp_rank", "0") != "0":
            return None
        model = next((labels[n] for n in self.model_labels if labels.get(n)), "")
        return model, labels.get(self.replica_label, "")

    def sums(self, family: Family | None, *, label: str = "", value: str = "") -> dict[_Key, float]:
        out: dict[_Key, float] = defaultdict(float)
        for labels, sample_value in family_values(family=family) if family else ():
            key = self.key(labels)
            if key is not None and math.isfinite(sample_value):
                if label and labels.get(label) != value:
                    continue
                out[key] += sample_value
        return dict(out)

    def sums_by(self, family: Family | None, *, label: str) -> dict[_Key, dict[str, float]]:
        out: dict[_Key, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for labels, sample_value in family_values(family=family) if family else ():
            key = self.key(labels)
            if key is not None and math.isfinite(sample_value):
                out[key][labels.get(label, "")] += sample_value
        return {key: dict(values) for key, values in out.items()}

    def means(self, family: Family | None) -> dict[_Key, float]:
        seen: dict[_Key, list[float]] = defaultdict(list)
        for labels, sample_value in family_values(family=family) if family else ():
            key = self.key(labels)
            if key is not None and math.isfinite(sample_value):
                seen[key].append(sample_value)
        return {key: math.fsum(values) / len(values) for key, values in seen.items()}

    def histograms(self, family: Family | None) -> dict[_Key, Histogram]:
        seen: dict[_Key, list[Histogram]] = defaultdict(list)
        for labels, histogram in family_histograms(family=family) if family else ():
            key = self.key(labels)
            if key is not None:
                seen[key].append(histogram)
        return {key: histogram_sum(histograms=group) for key, group in seen.items()}


def _cached_prompt_tokens(
    families: Mapping[str, Family], *, kind: EngineKind, reader: _Reader
) -> dict[_Key, float]:
    if kind == "dynamo":
        return {}  # its frontend does not count prefix-cache hits
    if kind == "vllm":
        by_source = families.get("vllm:prompt_tokens_by_source")
        if by_source is not None:
            return reader.sums(by_source, label="source", value="local_cache_hit")
        # V1 0.9+ counts tokens; the older gpu_prefix_cache_hits counted blocks: not used.
        return reader.sums(families.get("vllm:prefix_cache_hits"))
    cached = families.get("sglang:cached_tokens")
    if cached is not None and any(
        labels.get("cache_source") == "total" for labels, _ in family_values(family=cached)
    ):
        return reader.sums(cached, label="cache_source", value="total")
    return reader.sums(cached)


def _sum_model(model_name: str, group: Sequence[EngineStats]) -> EngineStats:
    def total(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return math.fsum(present) if present else None

    def merged(values: list[Histogram | None]) -> Histogram | None:
        present = [v for v in values if v is not None]
        return histogram_sum(histograms=present) if present else None

    by_reason: dict[str, float] = defaultdict(float)
    for stats in group:
        for reason, value in stats.requests_by_reason.items():
            by_reason[reason] += value
    kv = [s.kv_cache_usage for s in group if s.kv_cache_usage is not None]
    return EngineStats(
        model_name=model_name,
        replica=None,
        prompt_tokens=total([s.prompt_tokens for s in group]),
        generation_tokens=total([s.generation_tokens for s in group]),
        cached_prompt_tokens=total([s.cached_prompt_tokens for s in group]),
        requests_total=total([s.requests_total for s in group]),
        requests_aborted=total([s.requests_aborted for s in group]),
        requests_by_reason=MappingProxyType(dict(by_reason)),
        running_requests=total([s.running_requests for s in group]),
        waiting_requests=total([s.waiting_requests for s in group]),
        kv_cache_usage=math.fsum(kv) / len(kv) if kv else None,
        ttft=merged([s.ttft for s in group]),
        tpot=merged([s.tpot for s in group]),
        tpot_family=next((s.tpot_family for s in group if s.tpot_family), None),
        e2e_latency=merged([s.e2e_latency for s in group]),
    )
