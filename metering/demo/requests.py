"""The demo's requests: their sizes drawn from a real trace per model, their latencies from
the model (its output length and decode speed) and the pool's load in that hour.

One rule for both halves of the demo: the past days' rollups take the distributions whole
(request counts, histogram, sums), the last day's events draw requests from them."""

import math
import random
from bisect import bisect_right
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cache, cached_property

from metering.demo.parameters import (
    ERROR_RATE,
    TPOT_MISS_RATE,
    TPOT_TYPICAL_MS,
    TRACES,
    TTFT_MEDIAN_MS,
    TTFT_SIGMA,
)
from metering.domain.usage.formats import trace_events
from metering.domain.usage.rollup import LATENCY_BUCKETS_MS


@dataclass(frozen=True)
class TraceRequest:
    offset_s: float  # seconds into its hour
    input_tokens: int
    output_tokens: int


@cache
def trace_requests(model_slug: str) -> tuple[TraceRequest, ...]:
    """The model's trace as requests that produced output (a failed or empty row sizes
    nothing), arrival times folded into one hour. A missing trace file gives a log-normal
    stand-in (median 250 output tokens, 3 input per output), so the demo still loads."""
    path = TRACES[model_slug]
    if not path.exists():
        rng = random.Random(model_slug)
        return tuple(
            TraceRequest(rng.random() * 3600, round(o * 3), round(o))
            for o in (rng.lognormvariate(math.log(250), 0.8) for _ in range(2000))
        )
    raw = [
        (datetime.fromisoformat(e["time"]), e["input_tokens"], e["output_tokens"])
        for e in trace_events(path=path, tenant="demo", model=model_slug)
    ]
    first = raw[0][0]
    return tuple(TraceRequest((t - first).total_seconds() % 3600, i, o) for t, i, o in raw if o > 0)


@cache
def mean_output(model_slug: str) -> float:
    sizes = trace_requests(model_slug)
    return sum(r.output_tokens for r in sizes) / len(sizes)


@cache
def sorted_outputs(model_slug: str) -> tuple[int, ...]:
    return tuple(sorted(r.output_tokens for r in trace_requests(model_slug)))


def load_factor(load: float) -> float:
    """How much slower first tokens and decoding get as the pool fills (busy/healthy GPUs):
    ×1.0 at 1/3 busy, ×1.4 when full."""
    return 0.8 + 0.6 * load


@dataclass(frozen=True)
class LatencyModel:
    """The latencies of one model's requests in one hour (ms)."""

    slo_ttft_ms: int
    slo_tpot_ms: int
    ttft_mu: float  # log-normal TTFT
    tpot_ms: float  # typical decode time per output token, within the SLO
    model_slug: str

    @classmethod
    def at(cls, *, model_slug: str, slo_ttft_ms: int, slo_tpot_ms: int, load: float):
        factor = load_factor(load)
        return cls(
            slo_ttft_ms=slo_ttft_ms,
            slo_tpot_ms=slo_tpot_ms,
            ttft_mu=math.log(TTFT_MEDIAN_MS * factor),
            tpot_ms=min(TPOT_TYPICAL_MS[model_slug] * factor, 0.8 * slo_tpot_ms),
            model_slug=model_slug,
        )

    def for_tier(self, tier: str) -> "LatencyModel":
        """The latencies of a tier's requests: a priority request's first token comes in
        half the time and is judged against half the TTFT threshold (the demo's priority
        SLO); the others' as they are (batch is judged against none: its rows count it)."""
        if tier != "priority":
            return self
        return replace(self, slo_ttft_ms=self.slo_ttft_ms // 2, ttft_mu=self.ttft_mu - math.log(2))

    # --- one request (the last day's events) ---

    def draw(self, rng: random.Random, output_tokens: float) -> dict:
        """TTFT, TPOT, end-to-end latency and status of one request of that size."""
        if rng.random() < TPOT_MISS_RATE:
            tpot = self.slo_tpot_ms * rng.uniform(1.05, 1.5)
        else:
            tpot = min(self.tpot_ms * rng.uniform(0.7, 1.3), 0.99 * self.slo_tpot_ms)
        ttft = rng.lognormvariate(self.ttft_mu, TTFT_SIGMA)
        return {
            "ttft_ms": ttft,
            "tpot_ms": tpot,
            "latency_ms": ttft + output_tokens * tpot,
            "status": "error" if rng.random() < ERROR_RATE else "ok",
        }

    # --- many requests (the rollups of the days before) ---

    @cached_property
    def within_slo(self) -> float:
        """The share of requests that succeed within both SLO thresholds."""
        ttft_ok = _lognormal_cdf(self.slo_ttft_ms, self.ttft_mu, TTFT_SIGMA)
        return (1 - ERROR_RATE) * (1 - TPOT_MISS_RATE) * ttft_ok

    @cached_property
    def ttft_mean(self) -> float:
        return math.exp(self.ttft_mu + TTFT_SIGMA**2 / 2)

    @cached_property
    def tpot_mean(self) -> float:
        return (1 - TPOT_MISS_RATE) * self.tpot_ms + TPOT_MISS_RATE * 1.275 * self.slo_tpot_ms

    @cached_property
    def latency_mean(self) -> float:
        return self.ttft_mean + mean_output(self.model_slug) * self.tpot_mean

    @cached_property
    def latency_cdf(self) -> tuple[float, ...]:
        """The share of requests at or under each histogram edge: the trace's output lengths
        at the hour's median first-token time and typical decode speed."""
        outputs = sorted_outputs(self.model_slug)
        first = math.exp(self.ttft_mu)
        return tuple(
            bisect_right(outputs, (edge - first) / self.tpot_ms) / len(outputs)
            for edge in LATENCY_BUCKETS_MS
        )


def _lognormal_cdf(x: float, mu: float, sigma: float) -> float:
    return 0.5 * math.erfc(-(math.log(x) - mu) / (sigma * math.sqrt(2)))
