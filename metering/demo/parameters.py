"""The demo factory's parameters: pools, volume, per-request distributions, and shared helpers."""

import math
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

from portal import clock
from portal.demo import APPLIED_EFFICIENCY, demo_lever_applied_at
from portal.periods import day_floor, hour_floor, months_before

SEED = 20261130
# slug, name, GPU type, GPUs, model slug, model name, alias, R_ref, SLO TTFT ms, SLO TPOT ms
POOLS = [
    (
        "h100-a",
        "H100 SXM hall A",
        "H100",
        512,
        "llama-3.3-70b",
        "Llama-3.3-70B (FP8)",
        "meta-llama/Llama-3.3-70B-Instruct",
        2100,
        2000,
        200,
    ),
    (
        "h200-a",
        "H200 hall A",
        "H200",
        256,
        "qwen3-235b-a22b",
        "Qwen3-235B-A22B (FP8)",
        "Qwen/Qwen3-235B-A22B",
        2790,
        2000,
        80,
    ),
    (
        "b200-a",
        "B200 hall B",
        "B200",
        1000,
        "deepseek-r1",
        "DeepSeek-R1-0528 (NVFP4)",
        "deepseek-ai/DeepSeek-R1-0528",
        3550,
        2000,
        80,
    ),
]
AVAILABILITY, OCCUPANCY, EFFICIENCY = 0.97, 0.55, 0.80
# The share of requests each deployment version promises within its SLO (the burn rate's
# target, kpis.md 3c): the demo's requests meet their thresholds about 97.7 % of the time
# (ERROR_RATE, TPOT_MISS_RATE and the TTFT tail below).
SLO_TARGET = Decimal("0.97")
# One stretch of the last day where a pool's requests came late (a KV-cache eviction storm
# nobody opened an incident for): the pool, its start after the day's start, its length,
# and the share of requests over the TTFT threshold. The burn-rate alert catches it.
DEGRADED = ("b200-a", timedelta(hours=6, minutes=10), timedelta(minutes=50), 0.6)
_TRACES = Path(__file__).resolve().parents[3] / "shared" / "samples" / "traces"
# Each model's request sizes come from a real trace: chat on Llama (Azure conversations),
# ChatGPT-style traffic on Qwen (BurstGPT), long-context conversations on DeepSeek-R1
# (Mooncake, Kimi). Their input lengths only shape each request's share: an hour's input is
# INPUT_PER_OUTPUT times its output, as demo-factory.md sets the workload.
TRACES = {
    "llama-3.3-70b": _TRACES / "azure_llm_2023_conv.csv",
    "qwen3-235b-a22b": _TRACES / "burstgpt_1_first400_via_gitm.csv",
    "deepseek-r1": _TRACES / "mooncake_fast25_conversation_trace.jsonl",
}
# Service tiers (demo-factory.md): about 8% of the requests priority (served at half the
# first-token time, judged against half the TTFT threshold), 10% batch (OpenAI Batch: no
# latency SLO), the rest standard. Drawn per tenant-hour from an RNG of their own, so the
# rest of the demo draws as before.
TIER_SHARES = (("priority", 0.08), ("batch", 0.10))
TIER_SEED = SEED + 67


def demo_tier(rng) -> str:
    """A tenant-hour's service tier, drawn from `rng` (one draw)."""
    draw = rng.random()
    for tier, share in TIER_SHARES:
        if draw < share:
            return tier
        draw -= share
    return "standard"


INPUT_PER_OUTPUT = 3  # input:output tokens ≈ 3:1, half of the input from the prefix cache

# Token classes (kpis.md section 3). DeepSeek-R1 thinks before it answers: most of its output
# is reasoning; Qwen3 thinks on part of its traffic (its hybrid thinking mode). A few tenants
# send long, stable prompt prefixes and write part of their uncached input to the prompt cache.
REASONING_SHARE = {"deepseek-r1": 0.62, "qwen3-235b-a22b": 0.18}  # of the output
CACHE_WRITE_SHARE = {"acme": 0.3, "initech": 0.25, "wayne": 0.2}  # of the uncached input


def demo_token_classes(
    *, model: str, tenant: str, input_tokens: int, cached_tokens: int, output_tokens: int
) -> dict[str, int]:
    """The cache-write and reasoning tokens inside a demo request's (or hour's) counts."""
    uncached = input_tokens - cached_tokens
    return {
        "cache_write_tokens": int(uncached * CACHE_WRITE_SHARE.get(tenant, 0)),
        "reasoning_tokens": int(output_tokens * REASONING_SHARE.get(model, 0)),
    }


# Volume. A factory this size serves ~10^8 requests a day, far more than a demo should store
# as events. So each of the last day's events stands for REQUEST_SCALE requests of one size
# (its `requests` field): its tokens are their totals. The past days' rollups count the
# same requests, so the last day (about 70,000 events) reads like the days before.
REQUEST_SCALE = 10_000

# Per-request latencies (ms), shared by the events and the synthetic rollups; load (busy /
# healthy GPUs) slows both first token and decoding (metering.demo.requests.load_factor).
ERROR_RATE = 0.004
TTFT_MEDIAN_MS, TTFT_SIGMA = 400, 0.6  # log-normal at 1/3 load
TPOT_TYPICAL_MS = {"llama-3.3-70b": 45, "qwen3-235b-a22b": 30, "deepseek-r1": 28}  # at 1/3 load
TPOT_MISS_RATE = 0.012  # requests above the TPOT SLO, at 1.05-1.5 x it
# With the 2,000 ms TTFT SLO: ≈ 98% of requests ok and within SLO (σ ≈ 0.98).

EVENT_CHUNK = 5_000  # events per validate + ingest + fold round


def demo_window(now: datetime) -> tuple[datetime, datetime]:
    """The demo's usage and capacity (demo-factory.md): from the first day of the month two
    months back, so it holds two closed months whatever day it is loaded on, to the current
    hour, so "this month" has its hours so far even on the 1st (kpis.md section 0)."""
    return months_before(day_floor(now), 2), hour_floor(now)


def last_month_start(now: datetime) -> datetime:
    """The first day of the demo's last closed month (its incidents happen in it)."""
    return months_before(day_floor(now), 1)


def hour_output(hour: datetime, busy_gpus: int, r_ref: float) -> float:
    """Output tokens a pool produces in an hour with this many busy GPUs: η = EFFICIENCY, and
    APPLIED_EFFICIENCY times that once the demo's applied lever is in service."""
    uplift = APPLIED_EFFICIENCY if hour >= demo_lever_applied_at(clock.now()) else 1.0
    return busy_gpus * 3600 * r_ref * EFFICIENCY * uplift


# Each tenant's demand peaks at an hour of its own, as the regions its users work in
# (the factory's busiest hour is 16:00 UTC): its share of an hour's output rises and falls
# around its mean by TENANT_SWING. A tenant that peaks with the factory meets its fullest
# pools, slower first tokens and fewer compliant requests; one that peaks at night the
# emptiest: SLO attainment varies by tenant as its traffic does.
TENANT_PEAK_STEP = 7  # hours between the peaks of tenants next in size (the largest at 16:00)
TENANT_SWING = 0.8
# A tenant that reserves a model's capacity (billing.demo.RESERVATIONS) sends that model more
# than its weight: Initech's weight times 1.5 on DeepSeek-R1 fills its 64 reserved B200s at
# about 70 % a day, 60-90 % every day, past 100 % in its busiest hours (its overage).
MODEL_DEMAND = {("initech", "deepseek-r1"): 1.5}


def tenant_hour_shares(weights: dict[str, float], hour: int, *, model: str) -> dict[str, float]:
    """The tenants' shares of the output of an hour (UTC hour of the day) of `model`'s pool,
    summing to 1: each tenant's weight (times its MODEL_DEMAND) times its demand at that hour,
    normalised (so a pool's hour produces what its busy GPUs make, however the tenants share
    it)."""
    demand = {
        slug: weight
        * MODEL_DEMAND.get((slug, model), 1.0)
        * (1 + TENANT_SWING * math.cos((hour - 16 - TENANT_PEAK_STEP * rank) / 24 * 2 * math.pi))
        for rank, (slug, weight) in enumerate(weights.items())
    }
    total = sum(demand.values())
    return {slug: value / total for slug, value in demand.items()}
