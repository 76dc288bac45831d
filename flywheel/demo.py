"""Demo TFOM inputs from demo-factory.md: a cost model per pool and the factory costs.

Per GPU: all-in capex (server share plus 12.5% network and storage, so no separate
network/storage charge), IT power at full load (DGX H100 ≈ 10.2 kW / 8, DGX B200 ≈ 14.3 kW
/ 8), colocation at 150 per kW-month of IT power. Shared: 60-month straight-line
depreciation, PUE 1.30, electricity 0.083 per kWh; staff 129,000 a month (0.10 per
GPU-hour for 1,768 GPUs) and SG&A 1,300,000 a month (about 15% of expected revenue).
"""

from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TextIO

from django.contrib.auth.models import User
from django.db.models import Min

from billing.domain.budget import BUDGET
from flywheel.domain.loop.factors import SYMBOLS
from flywheel.models import CostModel, FactoryCosts, Goal, KpiSnapshot, Lever, LeverApplication
from flywheel.services.loop.applications import lever_apply
from flywheel.services.loop.cycles import cycle_run
from flywheel.services.loop.versions import goal_create, lever_create
from flywheel.services.plan import capacity_plan_update, forecasts_update
from flywheel.services.tfom import cost_model_create, factory_costs_create
from metering.selectors.factory import pool_list
from metering.selectors.usage import hourly_usage_list
from portal import clock
from portal.alerts import alerts_evaluate, rule_create
from portal.demo import APPLIED_LEVER, demo_lever_applied_at, demo_step
from portal.models import AlertRule
from portal.periods import day_floor, hour_floor, months_before
from portal.pipeline import stages_run

COSTS_FROM = datetime(2026, 1, 1, tzinfo=UTC)

COLOCATION_PER_KW_MONTH = Decimal(150)

# GPU type: (all-in capex per GPU, IT power per GPU at full load in kW)
GPU_COSTS = {
    "H100": (Decimal(45_000), Decimal("1.275")),
    "H200": (Decimal(54_000), Decimal("1.275")),
    "B200": (Decimal(61_900), Decimal("1.79")),
}

SHARED = {
    "depreciation_months": 60,
    "pue": Decimal("1.30"),
    "electricity_price_per_kwh": Decimal("0.083"),
    "idle_power_ratio": Decimal("0.3"),
    "network_storage_per_gpu_month": Decimal(0),  # inside the all-in capex
}

STAFF_PER_MONTH = Decimal(129_000)

SGA_PER_MONTH = Decimal(1_300_000)


@demo_step("flywheel: cost models per pool and factory costs (demo-factory.md TCO inputs)")
def demo_costs(*, stdout: TextIO) -> None:
    for pool in pool_list():
        costs = GPU_COSTS.get(pool.gpu_type.upper())
        if costs is None or CostModel.objects.filter(pool=pool).exists():
            continue
        capex, power_kw = costs
        cost_model_create(
            pool=pool,
            capex_per_gpu=capex,
            power_kw_per_gpu=power_kw,
            hosting_per_gpu_month=COLOCATION_PER_KW_MONTH * power_kw,
            effective_from=COSTS_FROM,
            **SHARED,
        )
        stdout.write(f"  cost model for {pool.slug}: capex {capex:,} per GPU, {power_kw} kW\n")
    if not FactoryCosts.objects.exists():
        factory_costs_create(
            staff_per_month=STAFF_PER_MONTH, sga_per_month=SGA_PER_MONTH, effective_from=COSTS_FROM
        )


@demo_step("flywheel: KPI snapshots of every demo day and month")
def demo_snapshots(*, stdout: TextIO) -> None:
    """Every stage of the pipeline once, in order, so the overview's trends are full on
    first start: with no day measured yet, the measure stage measures every day since the
    first pool went into service (the worker keeps them fresh from then on)."""
    stages_run()
    stdout.write(f"  {KpiSnapshot.objects.count()} snapshots\n")


@demo_step(
    "flywheel: forecasts of the factory, each pool and each model (kpis.md 6b), then the "
    "capacity plan (6c)"
)
def demo_forecasts(*, stdout: TextIO) -> None:
    """The forecast job once, after the snapshots, so the cockpit shows every forecast with
    its accuracy and the capacity plan page its plan on first start (the beat runs it daily
    from then on). Before it, the job as it ran at last month's start, so the plan page has
    the plan that stood then to set against what was measured in that month."""
    month_began = months_before(clock.now(), 1) + timedelta(hours=8)
    forecasts_update(now=month_began)
    capacity_plan_update(now=month_began)
    rows = forecasts_update()
    plan = capacity_plan_update()
    methods = Counter(row.method for row in rows)
    measured = sum(1 for row in rows if row.mape is not None)
    stdout.write(
        f"  {len(rows)} forecasts ({', '.join(f'{n} {m}' for m, n in sorted(methods.items()))}), "
        f"{measured} with their measured accuracy; a {len(plan.body['months'])}-month capacity "
        f"plan, and the plan of {month_began:%B} as it stood at its start\n"
    )


D = Decimal


def _effect(low: str, typical: str, high: str) -> dict[str, str]:
    return {"low": low, "typical": typical, "high": high}


# slug, name, description (with the source), effects, one-time cost, monthly cost
LEVERS = [
    (
        "continuous-batching",
        "Continuous batching",
        "Schedules work per decoding iteration instead of per request batch, so finished "
        "sequences leave and new ones join at once. Orca (Yu et al., OSDI 2022) reports up to "
        "36.9x the throughput of static batching. vLLM, SGLang and TensorRT-LLM already do it "
        "here, so the default is 1.0 (no gain); raise it for a fleet still on static batching.",
        {"occupancy": _effect("1", "1", "1.05"), "efficiency": _effect("1", "1", "1.1")},
        D(10_000),
        D(0),
    ),
    (
        "paged-kv-cache",
        "Paged KV cache",
        "Allocates the KV cache in fixed blocks (PagedAttention), so more sequences fit in "
        "GPU memory. The vLLM paper (Kwon et al., SOSP 2023) reports 2-4x the throughput of "
        "static allocation. The engines here already page their cache; the default counts "
        "what tuning block size and memory utilization still gains toward R_ref (1.00-1.10).",
        {"efficiency": _effect("1", "1.03", "1.1")},
        D(15_000),
        D(0),
    ),
    (
        "prefix-caching",
        "Prefix caching",
        "Reuses the KV cache of shared prompt prefixes (RadixAttention). The SGLang paper "
        "(Zheng et al., 2024) reports up to 6.4x throughput on shared-prefix workloads. About "
        "half of this factory's input already comes from the cache, so the default is 1.08 "
        "on efficiency (up to 1.25); cached input is priced lower, so price realization "
        "slips by about 1% (revenue per million tokens falls).",
        {
            "efficiency": _effect("1.02", "1.08", "1.25"),
            "price_realization": _effect("0.97", "0.99", "1"),
        },
        D(30_000),
        D(2_000),
    ),
    (
        "speculative-decoding",
        "Speculative decoding",
        "A small draft model proposes tokens the large model verifies in one pass. Leviathan "
        "et al. (ICML 2023) and EAGLE (Li et al., 2024) report 2-3x lower latency and about 2x "
        "throughput, shrinking at large batch sizes. Default: fewer TPOT misses (SLA delivery "
        "x1.008) and x1.05 efficiency at the strict SLO, down to x0.95 at full batches.",
        {
            "efficiency": _effect("0.95", "1.05", "1.15"),
            "sla_delivery": _effect("1.002", "1.008", "1.015"),
        },
        D(60_000),
        D(5_000),
    ),
    (
        "pd-disaggregation",
        "Prefill/decode disaggregation",
        "Runs prefill and decode on separate GPU groups so long prompts stop stalling decoding. "
        "DistServe (Zhong et al., OSDI 2024) reports up to 4.5x goodput; Mooncake (Qin et al., "
        "FAST 2025) serves 75% more requests on a real workload. Default: occupancy x1.08 "
        "(x1.02-1.20) and SLA delivery x1.01, since most requests here already meet their SLO.",
        {
            "occupancy": _effect("1.02", "1.08", "1.2"),
            "sla_delivery": _effect("1.005", "1.01", "1.019"),
        },
        D(250_000),
        D(15_000),
    ),
    (
        "fp8-fp4-quantization",
        "FP8 / FP4 quantization",
        "Serves weights and activations in 8 or 4 bits. The vLLM documentation reports up to "
        "1.6x throughput for FP8 against 16-bit weights. Models here already run FP8 (H100, "
        "H200) and NVFP4 (B200), the precision R_ref assumes; the default counts FP8 KV cache "
        "and the remaining layers (x1.02, up to x1.10).",
        {"efficiency": _effect("1", "1.02", "1.1")},
        D(40_000),
        D(0),
    ),
    (
        "pooled-scheduling",
        "Pooled multi-model scheduling",
        "Lets models share GPUs and shifts capacity to where demand is, instead of one fixed "
        "pool per model. AlpaServe (Li et al., OSDI 2023) serves up to 10x the request rate "
        "within SLO by statistical multiplexing; Alibaba's Aegaeon (SOSP 2025) cut the GPUs "
        "serving its long tail of models by 82%. Default: occupancy x1.20 (x1.10-1.36, the "
        "last reaching the 75% target from 55%).",
        {"occupancy": _effect("1.1", "1.2", "1.36")},
        D(180_000),
        D(20_000),
    ),
    (
        "failover-overload",
        "Failover and overload protection",
        "Hot spares, health-checked failover and admission control that sheds load before "
        "latency breaks the SLO. Managed services sell this as their uptime tiers (AWS Bedrock "
        "SLA: 99.9% monthly uptime). Default: availability x1.01 and SLA delivery x1.01, "
        "toward 99.9%.",
        {
            "availability": _effect("1.005", "1.01", "1.02"),
            "sla_delivery": _effect("1.005", "1.01", "1.019"),
        },
        D(80_000),
        D(10_000),
    ),
    (
        "trial-conversion",
        "Trial-to-paid conversion",
        "Sales and product work to convert proofs of concept (trial tenants) into paid "
        "contracts. No published figure: operator-set. Default: sell-through x1.15 (x1.05-"
        "1.29, the last reaching the 90% target from 70%).",
        {"sell_through": _effect("1.05", "1.15", "1.29")},
        D(20_000),
        D(30_000),
    ),
    (
        "discount-recovery",
        "Discount recovery",
        "Renegotiate the deepest contract discounts and volume tiers at renewal and stop "
        "stacking promotions. No published figure: operator-set. Default: price realization "
        "x1.12 (x1.05-1.30).",
        {"price_realization": _effect("1.05", "1.12", "1.3")},
        D(10_000),
        D(15_000),
    ),
]

# Levers that take GPUs out of service (pool, GPUs), with the levers above' fields.
WITHDRAWALS = [
    (
        "release-idle-h100",
        "Release idle H100s",
        "Take 96 of h100-a's 512 GPUs out of service (sold on the secondary market or handed "
        "back at the end of their lease), since its measured demand keeps about 45% of the "
        "pool idle. Saves their depreciation, colocation and idle power through the TFOM "
        "formulas; sells nothing more. Operator-set: 40,000 for decommissioning and "
        "logistics. Only under measured demand does it pay: if demand followed, those GPUs "
        "would have sold tokens.",
        "h100-a",
        96,
        D(40_000),
        D(0),
    ),
]

# The goal: keep a software-like gross margin while growing EBITDA; the last 30 days of
# the demo measure about 73 % and 6.3 M per month (Initech's reserved B200s serve its
# peaks at a flat fee), so the goal needs levers: under measured demand selling ones,
# under unlimited demand efficiency ones.
GOAL = {"min_gross_margin": D("0.80"), "min_ebitda_per_month": D(8_000_000)}


@demo_step("flywheel: lever catalogue (published uplifts), a goal, one lever applied, one cycle")
def demo_flywheel(*, stdout: TextIO) -> None:
    now = clock.now()
    first = hourly_usage_list().aggregate(first=Min("hour"))["first"]
    since = day_floor(first or now)  # the demo's first day: levers in force throughout
    for slug, name, description, effects, one_time, monthly in LEVERS:
        if Lever.objects.filter(slug=slug).exists():
            continue
        lever_create(
            slug=slug,
            name=name,
            description=description,
            effects=effects,
            one_time_cost=one_time,
            monthly_cost=monthly,
            effective_from=since,
            source=Lever.Source.PUBLISHED,
        )
        moves = ", ".join(f"{SYMBOLS[f]} x{e['typical']}" for f, e in effects.items())
        stdout.write(f"  lever {slug}: {moves}\n")
    pools = {pool.slug: pool for pool in pool_list()}
    for slug, name, description, pool, gpus, one_time, monthly in WITHDRAWALS:
        if Lever.objects.filter(slug=slug).exists() or pool not in pools:
            continue
        lever_create(
            slug=slug,
            name=name,
            description=description,
            effects={},
            one_time_cost=one_time,
            monthly_cost=monthly,
            effective_from=since,
            source=Lever.Source.OPERATOR,
            pool=pools[pool],
            gpus_withdrawn=gpus,
        )
        stdout.write(f"  lever {slug}: {gpus} GPUs of {pool} out of service\n")
    if not Goal.objects.exists():
        goal_create(
            effective_from=since,
            note="gross margin at least 80% and EBITDA at least 8 M per month",
            **GOAL,
        )
    applied_at = demo_lever_applied_at(now)
    if first is not None and not LeverApplication.objects.exists() and applied_at > first:
        lever_apply(
            slug=APPLIED_LEVER,
            applied_at=applied_at,
            note="EAGLE draft heads on every deployment, rolled out in one morning",
            now=now,
        )
        stdout.write(f"  applied {APPLIED_LEVER} at {applied_at:%Y-%m-%d %H:%M} UTC\n")
    cycle = cycle_run(now=now)
    goal = {None: "not set", True: "met", False: "not met"}[cycle.is_goal_met]
    stdout.write(
        f"  cycle {cycle.period_start:%Y-%m-%d} – {cycle.period_end:%Y-%m-%d}: "
        f"bottleneck {cycle.bottleneck or 'none'}, goal {goal}\n"
    )


# The operators' and Acme's alert rules; the last day replayed every ALERT_REPLAY so that
# what the `alerts` job would have fired and resolved during it is there (the day's
# degraded stretch of b200-a, h100-a's idle GPUs at night).
ALERT_RULES = (
    ("operator", {"kind": "slo_burn", "level": "critical"}),
    ("operator", {"kind": "gpu_waste", "scope": {"pool": "h100-a"},
                  "params": {"window_hours": 3, "threshold_pct": "58"}}),
    ("operator", {"kind": "reconciliation_drift"}),
    ("operator", {"kind": "source_silent"}),
    ("operator", {"kind": "scrape_down", "level": "critical"}),
    ("acme", {"kind": "slo_burn"}),
    ("acme", {"kind": "uptime_below_tier"}),
)  # fmt: skip
ALERT_REPLAY = timedelta(minutes=10)
REPLAYED_KINDS = ("slo_burn", "gpu_waste", "reconciliation_drift")  # read as of any instant


@demo_step("alerts: the operators' and Acme's rules, and what they fired the last day")
def demo_alerts(*, stdout: TextIO) -> None:
    if AlertRule.objects.exclude(kind=BUDGET).exists():
        stdout.write("  alert rules already set\n")
        return
    users = {name: User.objects.get(username=name) for name in {name for name, _ in ALERT_RULES}}
    for name, rule in ALERT_RULES:
        rule_create(by=users[name], **rule)
    now = clock.now()
    fired = resolved = 0
    # From 6 hours into the events' day: each burn window pair has its short window whole.
    moment = hour_floor(now) - timedelta(days=1) + timedelta(hours=6)
    while moment < now:
        counts = alerts_evaluate(now=moment, kinds=REPLAYED_KINDS)
        fired, resolved = fired + counts["fired"], resolved + counts["resolved"]
        moment += ALERT_REPLAY
    counts = alerts_evaluate(now=now)
    stdout.write(
        f"  {len(ALERT_RULES)} rules; the last day: {fired + counts['fired']} alerts fired, "
        f"{resolved + counts['resolved']} resolved\n"
    )
