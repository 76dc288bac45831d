"""What the benchmark factory looks like and how big its runs are (environment, read once).

BENCH_EVENTS  comma-separated dataset sizes, small first (default "1000000,10000000";
              BENCH_QUICK=1 makes it "100000,1000000").
BENCH_ROUNDS  A/B rounds per comparison (default 6; quick 4).
BENCH_INGEST  events per side per ingestion round (default 50,000).
BENCH_RESERVATIONS reservations in the datasets (default 50; 0 for none).
BENCH_PROJECTS projects of every tenant in the datasets (default 20; 0 for none): p01, p02, …,
              each with a cost center, created in setup by the projects' service; the
              bulk-loaded events name one of them, or none for one event in five (by their
              sequence number, events.project_of), so the rollups, the rating and the
              chargeback carry them. Ingestion stages' events name no project.
BENCH_BASELINE the git revision the A/B of ingestion compares this tree with (default: the
              last commit that changed a migration). One with this tree's migrations is
              served on the large dataset's database; one with other migrations gets a
              database of its own, migrated and set up by its own code, and this tree's arm
              another, set up by this tree's (BASELINE_DATABASES).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "var" / "bench"

# The revision ingestion is compared with, served from its own tree: by default the last
# commit that changed a migration, which can share the large dataset's database. A revision
# whose migrations differ (the one before service tiers, or before projects) cannot: each
# arm then ingests into a database of its own, migrated and set up by its own tree's code
# (manage.py migrate, tests.bench.ops.setup).
MIGRATIONS = ":(glob)*/migrations/*.py"
BASELINE_DATABASES = {"this": "bench_baseline_this", "baseline": "bench_baseline"}


def baseline() -> str:
    if revision := os.environ.get("BENCH_BASELINE"):
        return revision
    return _git("log", "-1", "--format=%h", "--", MIGRATIONS).stdout.strip()


def baseline_schema_differs(revision: str, against: str | None = None) -> bool:
    """Whether `revision`'s migrations differ from those of `against` (default: this tree,
    uncommitted changes too). A revision git does not know is an error, not a difference."""
    found = _git("diff", "--quiet", revision, *([against] if against else []), "--",
                 MIGRATIONS, check=False)  # fmt: skip
    if found.returncode not in (0, 1):
        raise SystemExit(f"BENCH_BASELINE: git cannot compare {revision}: {found.stderr.strip()}")
    return found.returncode == 1


def _git(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=check
    )


# The PostgreSQL settings scripts/bench.sh measures with (a standby made here runs with them).
PG_OPTIONS = os.environ.get("BENCH_PG_OPTIONS", "")


SEED = 20260901
# The dataset month: 30 days, in the past (events more than 5 minutes ahead are refused).
MONTH_START = datetime(2026, 9, 1, tzinfo=UTC)
MONTH_END = datetime(2026, 10, 1, tzinfo=UTC)
# The served budget reads' clock (tests/bench/clocked_wsgi.py): the dataset month's last
# minute, so "this month" and "today" are the dataset's, not the real calendar's.
BUDGET_AT = MONTH_END - timedelta(minutes=1)
DAYS = 30
# Ingestion runs write into another month, so the dataset month stays as generated.
INGEST_START = datetime(2026, 11, 1, tzinfo=UTC)
INGEST_DAYS = 28

TENANTS = 200
# of the paid tenants, each on a deployment it uses (goal 8 rates with them; 0: none)
RESERVATIONS = int(os.environ.get("BENCH_RESERVATIONS", "50"))
# projects of every tenant, p01… (events.project_of spreads the datasets' events; 0: none)
PROJECTS = int(os.environ.get("BENCH_PROJECTS", "20"))
TENANT_ZIPF = 1.1  # share of tenant of rank r ∝ 1 / r^s
MODEL_ZIPF = 1.5  # each tenant's preference over its own ordering of the models
SOURCES = ("gw-eu-1", "gw-eu-2", "gw-us-1", "gw-us-2")  # API gateways sending events
ERROR_RATE = 0.004

# pool slug, GPU type, GPUs
POOLS = [("h100-a", "H100", 512), ("h200-a", "H200", 256), ("b200-b", "B200", 1000)]
# model slug, pools, R_ref (output tokens/s per GPU), SLO TTFT ms, SLO TPOT ms,
# list prices per million (input, cached input, output)
MODELS = [
    ("llama-3.3-70b", ("h100-a", "b200-b"), 2100, 2000, 200, ("0.88", "0.44", "0.88")),
    ("qwen3-235b-a22b", ("h200-a",), 2790, 2000, 80, ("0.35", "0.175", "1.40")),
    ("deepseek-r1", ("b200-b",), 3550, 2000, 80, ("0.55", "0.14", "2.19")),
    ("llama-3.1-8b", ("h100-a",), 16000, 1000, 50, ("0.10", "0.05", "0.10")),
    ("qwen3-32b", ("h100-a", "h200-a"), 4200, 2000, 80, ("0.20", "0.10", "0.60")),
    ("gpt-oss-120b", ("b200-b",), 9000, 1500, 50, ("0.15", "0.075", "0.60")),
    ("mistral-small-24b", ("h200-a",), 6000, 1500, 60, ("0.10", "0.05", "0.30")),
    ("bge-reranker", ("h100-a",), 30000, 500, 20, ("0.02", "0.01", "0.02")),
]
SECOND_POOL_SHARE = 0.3  # traffic of a two-pool model that goes to its second pool

# Per-request distributions (log-normal: mu, sigma of the natural log).
INPUT_TOKENS = (7.0, 1.1)  # median ≈ 1,100 tokens
OUTPUT_TOKENS = (5.5, 0.9)  # median ≈ 245 tokens
CACHED_SHARE = 0.5  # requests with a prefix-cache hit; cached = U(0.2, 0.9) × input
TTFT_MS = (6.0, 0.6)  # median ≈ 400 ms
TPOT_MS = (3.2, 0.45)  # median ≈ 25 ms


def _diurnal(hour: int) -> float:
    """Demand relative to the daily mean: low at 04:00 UTC, high at 16:00 UTC."""
    import math

    return 1 + 0.6 * math.sin((hour - 10) / 24 * 2 * math.pi)


HOUR_WEIGHTS = [_diurnal(h) for h in range(24)]


@dataclass(frozen=True)
class Sizes:
    small: int
    large: int
    rounds: int
    ingest_events: int  # per side and round
    quick: bool


def sizes() -> Sizes:
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    default = "100000,1000000" if quick else "1000000,10000000"
    values = [int(v.replace("_", "")) for v in os.environ.get("BENCH_EVENTS", default).split(",")]
    if len(values) != 2 or values[0] <= 0 or values[1] < values[0]:
        raise SystemExit("BENCH_EVENTS must be two sizes, small first, e.g. 1000000,10000000")
    rounds = int(os.environ.get("BENCH_ROUNDS", "4" if quick else "6"))
    ingest = int(os.environ.get("BENCH_INGEST", "50000"))
    return Sizes(values[0], values[1], max(2, rounds), max(1000, ingest // 1000 * 1000), quick)
