"""Realistic usage events, reproducible from a seed: Zipf-skewed tenants, each with its own
preferred models, diurnal arrivals, log-normal tokens and latencies. Pure Python, no Django.

One generator gives both shapes of the same events: JSON items for the HTTP API and rows for
COPY (with the payload hash validation would compute, so replays of either are duplicates).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import accumulate

from metering.domain.usage.hashing import fields_hash
from tests.bench import config

_MIX = 0x9E3779B97F4A7C15  # odd: seq -> seq * _MIX mod 2^64 is a bijection (unique ids)
_MASK = (1 << 64) - 1


def tenant_slug(rank: int) -> str:
    return f"tenant-{rank:03d}"


def project_slug(number: int) -> str:
    """The slug of a tenant's project `number` (1…config.PROJECTS): p01, p02, …"""
    return f"p{number:02d}"


def project_of(seq: int, projects: int) -> int:
    """The project of the event of sequence number `seq` among a tenant's `projects`: 0 (none)
    for one event in five, else 1…projects in turn over a scrambled sequence (every project
    of a tenant gets a share of each of its hours and deployments). Deterministic."""
    if projects <= 0:
        return 0
    slot = ((seq * _MIX) & _MASK) >> 32
    if slot % 5 == 0:
        return 0
    return 1 + (slot // 5) % projects


def deployment_specs() -> list[tuple[str, str]]:
    """(model slug, pool slug) of every deployment, in a fixed order."""
    return [(model, pool) for model, pools, *_ in config.MODELS for pool in pools]


@dataclass(frozen=True)
class Row:
    """One event as stored: what COPY writes into the key and event tables."""

    seq: int
    source: str
    event_id: str
    payload_hash: str
    time: datetime
    tenant: int  # rank (index into the tenant list)
    deployment: int  # index into deployment_specs()
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    ttft_ms: float
    tpot_ms: float
    latency_ms: float
    is_error: bool
    project: int = 0  # 1…config.PROJECTS: the tenant's project_slug(project); 0: none


class EventGenerator:
    """Events of `config.TENANTS` tenants over the deployments of `config.MODELS`."""

    def __init__(self, *, seed: int = config.SEED) -> None:
        self.seed = seed
        self.deployments = deployment_specs()
        self.multi_pool = {m for m, pools, *_ in config.MODELS if len(pools) > 1}
        tenant_weights = [1 / (r + 1) ** config.TENANT_ZIPF for r in range(config.TENANTS)]
        self.tenant_cum = list(accumulate(tenant_weights))
        index = {spec: i for i, spec in enumerate(self.deployments)}
        self.deployment_cum: list[list[float]] = []
        self.deployment_ids: list[list[int]] = []
        for rank in range(config.TENANTS):
            order = [m for m, *_ in config.MODELS]
            random.Random(seed * 1000 + rank).shuffle(order)  # this tenant's favourite models
            ids, weights = [], []
            for k, model in enumerate(order):
                pools = next(p for m, p, *_ in config.MODELS if m == model)
                weight = 1 / (k + 1) ** config.MODEL_ZIPF
                shares = (
                    [1.0]
                    if len(pools) == 1
                    else [1 - config.SECOND_POOL_SHARE, config.SECOND_POOL_SHARE]
                )
                for pool, share in zip(pools, shares, strict=True):
                    ids.append(index[(model, pool)])
                    weights.append(weight * share)
            self.deployment_ids.append(ids)
            self.deployment_cum.append(list(accumulate(weights)))
        self.hour_cum = list(accumulate(config.HOUR_WEIGHTS))

    def rows(
        self,
        *,
        seq0: int,
        count: int,
        start: datetime,
        days: int,
        hours: int | None = None,
        projects: int = 0,
    ):
        """`count` events with sequence numbers seq0…; times in `days` days from `start`
        (diurnal), or uniformly in the `hours` hours from `start` when given; spread over
        `projects` projects of each tenant and none (project_of), or none when 0 (the
        ingestion stages' events name no project)."""
        rng = random.Random(self.seed ^ (seq0 * 7919 + count))
        rand, lognorm, getrandbits = rng.random, rng.lognormvariate, rng.getrandbits
        tenant_total = self.tenant_cum[-1]
        hour_total = self.hour_cum[-1]
        sources = config.SOURCES
        models = self.deployments
        in_mu, in_sigma = config.INPUT_TOKENS
        out_mu, out_sigma = config.OUTPUT_TOKENS
        ttft_mu, ttft_sigma = config.TTFT_MS
        tpot_mu, tpot_sigma = config.TPOT_MS
        for seq in range(seq0, seq0 + count):
            if hours is None:
                day = int(rand() * days)
                hour = bisect_right(self.hour_cum, rand() * hour_total)
                offset = (day * 24 + hour) * 3600_000_000 + getrandbits(32) % 3600_000_000
            else:
                offset = int(rand() * hours * 3600_000_000)
            time = start + timedelta(microseconds=offset)
            tenant = bisect_right(self.tenant_cum, rand() * tenant_total)
            cum = self.deployment_cum[tenant]
            deployment = self.deployment_ids[tenant][bisect_right(cum, rand() * cum[-1])]
            input_tokens = max(1, int(lognorm(in_mu, in_sigma)))
            cached = int(input_tokens * (0.2 + 0.7 * rand())) if rand() < config.CACHED_SHARE else 0
            is_error = rand() < config.ERROR_RATE
            output_tokens = 0 if is_error else max(1, int(lognorm(out_mu, out_sigma)))
            ttft = round(lognorm(ttft_mu, ttft_sigma), 1)
            tpot = round(lognorm(tpot_mu, tpot_sigma), 2)
            latency = round(ttft + tpot * output_tokens, 1)
            source = sources[seq & 3]
            event_id = f"req-{(seq * _MIX) & _MASK:016x}"
            model, pool = models[deployment]
            # in the order both the payload hash and the row take them
            measures = (input_tokens, cached, output_tokens, ttft, tpot, latency)
            pool_named = pool if model in self.multi_pool else None
            status = "error" if is_error else "ok"
            project = project_of(seq, projects)
            digest = fields_hash(
                source, event_id, time, tenant_slug(tenant), model, pool_named, *measures, status,
                project=project_slug(project) if project else None,
            )  # fmt: skip
            yield Row(
                seq, source, event_id, digest, time, tenant, deployment, *measures, is_error,
                project,
            )  # fmt: skip

    def item(self, row: Row) -> dict:
        """The JSON item of the HTTP API for a row (pool only where the model needs it)."""
        model, pool = self.deployments[row.deployment]
        item = {
            "id": row.event_id,
            "source": row.source,
            "time": row.time.isoformat(timespec="microseconds").replace("+00:00", "Z"),
            "tenant": tenant_slug(row.tenant),
            "model": model,
            "input_tokens": row.input_tokens,
            "cached_tokens": row.cached_tokens,
            "output_tokens": row.output_tokens,
            "ttft_ms": row.ttft_ms,
            "tpot_ms": row.tpot_ms,
            "latency_ms": row.latency_ms,
            "status": "error" if row.is_error else "ok",
        }
        if model in self.multi_pool:
            item["pool"] = pool
        if row.project:
            item["project"] = project_slug(row.project)
        return item

    def otlp_body(self, rows: list[Row]) -> bytes:
        """The rows as one OTLP/HTTP protobuf trace export of GenAI spans (data-formats.md
        6b, current attribute names), one resource per source, as a gateway's exporter
        sends them: trace and span ids from the sequence number, times in nanoseconds."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
        from opentelemetry.proto.trace.v1.trace_pb2 import Status

        request = ExportTraceServiceRequest()
        by_source: dict[str, list] = {}
        for row in rows:
            by_source.setdefault(row.source, []).append(row)
        for source, group in by_source.items():
            resource = request.resource_spans.add()
            _attribute(resource.resource.attributes, "service.name", source)
            spans = resource.scope_spans.add().spans
            for row in group:
                model, pool = self.deployments[row.deployment]
                span = spans.add()
                span.trace_id = row.seq.to_bytes(16, "big")
                span.span_id = ((row.seq * _MIX) & _MASK).to_bytes(8, "big")
                span.name = f"chat {model}"
                end = int(row.time.timestamp() * 1_000_000) * 1000
                span.end_time_unix_nano = end
                span.start_time_unix_nano = end - int(row.latency_ms * 1_000_000)
                attributes = span.attributes
                _attribute(attributes, "gen_ai.operation.name", "chat")
                _attribute(attributes, "gen_ai.request.model", model)
                _attribute(attributes, "tenant.id", tenant_slug(row.tenant))
                if model in self.multi_pool:
                    _attribute(attributes, "tokenfactory.pool", pool)
                if row.is_error:
                    span.status.code = Status.STATUS_CODE_ERROR
                    continue
                _attribute(attributes, "gen_ai.usage.input_tokens", row.input_tokens)
                _attribute(attributes, "gen_ai.usage.cache_read.input_tokens", row.cached_tokens)
                _attribute(attributes, "gen_ai.usage.output_tokens", row.output_tokens)
                _attribute(attributes, "gen_ai.server.time_to_first_token", row.ttft_ms / 1000)
                _attribute(attributes, "gen_ai.server.time_per_output_token", row.tpot_ms / 1000)
        return request.SerializeToString()


def _attribute(attributes, key: str, value) -> None:
    pair = attributes.add()
    pair.key = key
    if isinstance(value, str):
        pair.value.string_value = value
    elif isinstance(value, int):
        pair.value.int_value = value
    else:
        pair.value.double_value = value


def expected_tokens_per_event() -> float:
    """Mean input + output tokens of an event (for allowances sized to the data)."""
    return math.exp(config.INPUT_TOKENS[0] + config.INPUT_TOKENS[1] ** 2 / 2) + math.exp(
        config.OUTPUT_TOKENS[0] + config.OUTPUT_TOKENS[1] ** 2 / 2
    )
