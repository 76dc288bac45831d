"""The demo factory's parameters: pools, volume, per-request distributions, and shared helpers."""

from datetime import datetime, timedelta
from pathlib import Path

from portal.periods import day_floor, hour_floor, months_before

DAYS = 30
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
TRACE = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "samples"
    / "traces"
    / "azure_llm_2023_code.csv"
)

# Volume. A factory this size serves ~10^8 requests a day, far more than a demo should store
# as events. So one demo request stands for REQUEST_SCALE real ones and carries their tokens:
# its token counts are scaled up by REQUEST_SCALE (about 1.8 M output tokens per demo request
# instead of ~900). The past days' rollups use the same scale, so the request-level last day
# (about 110,000 events) has the requests, tokens and tokens per request of the days before.
REQUEST_SCALE = 2_000
OUTPUT_TOKENS_PER_REQUEST = 900 * REQUEST_SCALE  # mean, per demo request
INPUT_PER_OUTPUT = 3  # input:output tokens ≈ 3:1, half of the input from the prefix cache

# Per-request distributions, shared by the events and the synthetic rollups (ms).
ERROR_RATE = 0.004
TTFT_MU, TTFT_SIGMA = 6.0, 0.6  # log-normal: median 403 ms, mean 483 ms
LATENCY_MU, LATENCY_SIGMA = 8.3, 0.5  # log-normal end to end: median 4.0 s
TPOT_OK_RANGE = (0.2, 0.95)  # x the TPOT SLO, uniform
TPOT_MISS_RATE = 0.012  # requests above the TPOT SLO, at 1.05-1.5 x it
# With the 2,000 ms TTFT SLO: ≈ 98.0% of requests ok and within SLO (σ ≈ 0.98).

EVENT_CHUNK = 5_000  # events per validate + ingest + fold round


def demo_window(now: datetime) -> tuple[datetime, datetime]:
    """The demo's usage and capacity: from the first day of last month (at least DAYS before
    today), so it holds a closed month whatever day it is loaded on, to the current hour, so
    "this month" has its hours so far even on the 1st (kpis.md section 0)."""
    today = day_floor(now)
    return min(today - timedelta(days=DAYS), months_before(today, 1)), hour_floor(now)


def hour_output(busy_gpus: int, r_ref: float) -> float:
    """Output tokens a pool produces in an hour with this many busy GPUs (η = EFFICIENCY)."""
    return busy_gpus * 3600 * r_ref * EFFICIENCY


def requests_for(output_tokens: float) -> int:
    return max(1, round(output_tokens / OUTPUT_TOKENS_PER_REQUEST))
