"""KPI engine: capacity integration, TEF, TFI and throughput (kpis.md sections 1-4), and the
one declaration of each KPI (`KPIS`): its key, label, unit, shown decimals, band and the
formula that computes it over a scope's sums. The TFOM API's schema, /metrics's gauges,
the bands and the pages' labels are read from the declarations.

Pure: imports no Django. Arithmetic is Decimal throughout. Capacity is integrated in
whole GPU-microseconds (exact Python ints, since datetimes have microsecond
resolution) and returned as exact Decimal GPU-seconds. Ratios and rates are divided
in KPI_CONTEXT (34 significant digits, half-even) whatever the caller's context, so
a figure never depends on who called.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from typing import Any, Literal

from flywheel.domain.bands import (
    Band,
    BandRule,
    occupancy_band,
    sla_delivery_band,
    target_band,
    tef_band,
    tfi_band,
)
from metering.domain.usage.production import production_tokens
from portal.formatting import percent_text

Telemetry = Literal["measured", "partial", "assumed"]

# decimal128 precision: ample for GPU-seconds (about 20 digits at 10^6 GPUs over a year
# in microseconds) and for money, and independent of the thread's decimal context.
KPI_CONTEXT = Context(prec=34, rounding=ROUND_HALF_EVEN)

ZERO = Decimal(0)

_MICROSECOND = timedelta(microseconds=1)

_MICROS_PER_SECOND = 10**6


@dataclass(frozen=True, kw_only=True)
class CapacitySample:
    """One capacity sample of one pool: GPU counts holding from `time` (busy ≤ healthy ≤ installed)."""

    time: datetime  # aware
    interval_s: int | Decimal | None = None  # seconds the values hold; None = until the next sample
    installed: int
    healthy: int
    busy: int

    def __post_init__(self) -> None:
        if self.time.tzinfo is None:
            raise ValueError("capacity sample time must be timezone-aware")
        if not 0 <= self.busy <= self.healthy <= self.installed:
            raise ValueError("capacity sample needs 0 <= busy <= healthy <= installed")
        if self.interval_s is not None and self.interval_s <= 0:
            raise ValueError("capacity sample interval_s must be positive")


@dataclass(frozen=True, kw_only=True)
class CapacityTotals:
    """One pool's integrated capacity over a period, in GPU-seconds (C, A, B)."""

    calendar_gpu_seconds: Decimal  # C
    available_gpu_seconds: Decimal  # A
    busy_gpu_seconds: Decimal  # B
    covered_seconds: Decimal  # seconds of the period some sample covers
    telemetry: Telemetry


@dataclass(frozen=True, kw_only=True)
class PoolInputs:
    """What one pool contributed over a period: capacity, production and sales sums."""

    pool: str  # slug
    calendar_gpu_seconds: Decimal  # C
    available_gpu_seconds: Decimal  # A
    busy_gpu_seconds: Decimal  # B
    telemetry: Telemetry
    std_gpu_seconds: Decimal  # Σ std(e) over every event, failed ones included
    production_tokens: Decimal  # Σ tok(e), in output-token units
    compliant_std_gpu_seconds: Decimal  # Σ std(e) over SLA-compliant events
    compliant_paid_std_gpu_seconds: Decimal  # Σ std(e) over compliant and paid events
    output_tokens: int  # every event's output tokens
    paid_output_tokens: int  # paid events' output tokens, compliant or not
    list_value: Decimal  # money, over paid events
    realized_revenue: Decimal  # money, over paid events, after discounts, tiers, promotions
    # Reservations (kpis.md 3d): Σ gpus × t, their capacity Σ cap and the tok they covered
    # (output-token units), and Σ std of the paid, compliant events on demand (uncovered).
    reserved_gpu_seconds: Decimal = ZERO
    reserved_capacity: Decimal = ZERO
    covered_tokens: Decimal = ZERO
    on_demand_compliant_paid_std_gpu_seconds: Decimal = ZERO
    deployment_r_refs: tuple[Decimal, ...] = ()  # tokens/s per GPU; fallback when nothing produced

    def __post_init__(self) -> None:
        c, a, b = self.calendar_gpu_seconds, self.available_gpu_seconds, self.busy_gpu_seconds
        if not ZERO <= b <= a <= c:
            raise ValueError(f"pool {self.pool}: needs 0 <= busy <= available <= calendar")
        std = self.std_gpu_seconds
        if not ZERO <= self.compliant_paid_std_gpu_seconds <= self.compliant_std_gpu_seconds <= std:
            raise ValueError(f"pool {self.pool}: needs 0 <= compliant paid <= compliant <= std")
        if not ZERO <= self.realized_revenue <= self.list_value:
            raise ValueError(f"pool {self.pool}: needs 0 <= realized revenue <= list value")
        if self.production_tokens < 0 or not 0 <= self.paid_output_tokens <= self.output_tokens:
            raise ValueError(f"pool {self.pool}: needs 0 <= paid output tokens <= output tokens")

    @classmethod
    def of_sums(cls, **fields: Any) -> PoolInputs:
        """A pool's inputs from sums taken part by part (measured hour by hour, projected
        factor by factor), each held to the sum it is a part of: busy to available,
        compliant to std, compliant paid to compliant, paid output tokens to output tokens,
        realized revenue to list value. Exact shares summed or scaled apart can land a hair
        past their whole; every input of the KPIs is built here."""
        busy, available = fields["busy_gpu_seconds"], fields["available_gpu_seconds"]
        compliant = min(fields["compliant_std_gpu_seconds"], fields["std_gpu_seconds"])
        return cls(
            **fields
            | {
                "busy_gpu_seconds": min(busy, available),
                "compliant_std_gpu_seconds": compliant,
                "compliant_paid_std_gpu_seconds": min(
                    fields["compliant_paid_std_gpu_seconds"], compliant
                ),
                "paid_output_tokens": min(fields["paid_output_tokens"], fields["output_tokens"]),
                "realized_revenue": min(fields["realized_revenue"], fields["list_value"]),
                "on_demand_compliant_paid_std_gpu_seconds": min(
                    fields.get("on_demand_compliant_paid_std_gpu_seconds", ZERO),
                    fields["compliant_paid_std_gpu_seconds"],
                ),
            }
        )

    def with_sums(self, **changes: Any) -> PoolInputs:
        """These inputs with some sums changed (a projection), held as `of_sums` holds them."""
        return self.of_sums(**{f.name: getattr(self, f.name) for f in fields(self)} | changes)


@dataclass(frozen=True, kw_only=True)
class Kpis:
    """Every figure of `GET /api/v1/kpis` for one scope and period (`from_` is the `from` key)."""

    scope: str
    from_: datetime
    to: datetime
    telemetry: Telemetry
    calendar_gpu_seconds: Decimal
    available_gpu_seconds: Decimal
    busy_gpu_seconds: Decimal
    std_gpu_seconds: Decimal
    availability: Decimal | None  # alpha = A / C
    occupancy: Decimal | None  # beta = B / A
    efficiency: Decimal | None  # eta = Σstd / B
    tef: Decimal | None
    sla_delivery: Decimal | None  # sigma
    sell_through: Decimal | None  # s
    price_realization: Decimal | None  # rho
    tfi: Decimal | None
    output_tokens: int
    paid_output_tokens: int
    tps: Decimal  # output tokens/s
    theoretical_tps: Decimal  # output-token units/s at R_ref on every installed GPU
    list_value: Decimal
    realized_revenue: Decimal
    tps_per_gpu: Decimal | None  # output tokens/s per installed GPU
    tpm: Decimal  # output tokens/min
    reserved_gpu_seconds: Decimal  # Σ gpus × t (kpis.md 3d)
    reserved_share: Decimal | None  # reserved / A
    capacity_sold: Decimal | None  # (reserved + Σ std of paid compliant uncovered) / A, ≤ 1
    reservation_utilization: Decimal | None  # covered tok / Σ cap

    def as_dict(self) -> dict[str, Any]:
        """Return the figures keyed by their response names, in declaration order."""
        return {
            ("from" if f.name == "from_" else f.name): getattr(self, f.name) for f in fields(self)
        }


@dataclass(frozen=True)
class ScopeSums:
    """Every sum a scope's KPIs are computed from, over its pools and a period."""

    seconds: Decimal  # the period's length
    calendar: Decimal  # C
    available: Decimal  # A
    busy: Decimal  # B
    std: Decimal  # Σ std(e)
    compliant: Decimal  # Σ std(e), SLA-compliant events
    compliant_paid: Decimal  # Σ std(e), compliant and paid events
    list_value: Decimal  # money
    realized: Decimal  # money
    output_tokens: int
    paid_output_tokens: int
    theoretical: Decimal  # Σ C × R_ref(pool): output-token units at R_ref, every GPU
    reserved: Decimal = ZERO  # Σ gpus × t of the reservations (kpis.md 3d)
    reserved_capacity: Decimal = ZERO  # Σ cap: output-token units
    covered: Decimal = ZERO  # covered tok: output-token units
    on_demand_sold: Decimal = ZERO  # Σ std(e), paid, compliant and not covered


def _tef(s: ScopeSums) -> Decimal | None:
    if s.calendar == 0:
        return None  # no pool in service: nothing to measure (kpis.md general rules)
    return ZERO if s.std == 0 else s.std / s.calendar  # in service, nothing produced: 0


def _tfi(s: ScopeSums) -> Decimal | None:
    # TFI = TEF * sigma * s * rho telescopes to (compliant paid std / C) * rho; this form is
    # 0 when nothing compliant was sold, even though s or rho is then null.
    if s.calendar == 0:
        return None
    if s.std == 0 or s.compliant_paid == 0:
        return ZERO
    rho = ratio_of(s.realized, s.list_value)
    return None if rho is None else s.compliant_paid / s.calendar * rho


def _capacity_sold(s: ScopeSums) -> Decimal | None:
    sold = ratio_of(s.reserved + s.on_demand_sold, s.available)
    return None if sold is None else min(sold, Decimal(1))


# Units: how a KPI is carried (JSON: ratios and rates as numbers, money as decimal strings,
# token counts as integers) and shown.
RATIO, RATE, GPU_SECONDS, TOKENS, MONEY = "ratio", "tokens/s", "GPU-seconds", "tokens", "money"
# The decimals a page shows a figure of each unit with (a ratio's: of its percent, 42.7%).
DECIMALS = {RATIO: 1, RATE: 2, GPU_SECONDS: 0, TOKENS: 0, MONEY: 2}


@dataclass(frozen=True, kw_only=True)
class Kpi:
    """One KPI, declared once: its key (GET /api/v1/kpis and /tfom, the snapshots), its name
    in words, its unit and the decimals a page shows (of a percent for a ratio), and its
    formula over a scope's sums. Where one is read: `symbol` and `chain` (TEF = α·β·η) by
    the overview's factor table and the flywheel, `title` by the TFOM report (no title: no
    row), `doc` by the API schema, `gauge` by /metrics (none: not published), `target` by
    the flywheel's goals, `band` by every page showing a band."""

    key: str
    label: str
    compute: Callable[[ScopeSums], Decimal | int | None]
    unit: str = RATIO
    decimals: int | None = None  # shown; None: its unit's (DECIMALS)
    is_nullable: bool = False  # a ratio is null over nothing, whatever this says
    symbol: str = ""
    chain: tuple[str, ...] = ()
    title: str = ""
    doc: str = ""
    gauge: str = ""
    target: Decimal | None = None
    band: BandRule | None = None

    @property
    def shown_decimals(self) -> int:
        return DECIMALS[self.unit] if self.decimals is None else self.decimals

    @property
    def nullable(self) -> bool:
        return self.is_nullable or self.unit == RATIO

    def text(self, value) -> str:
        """A figure of this KPI as a page shows it: a ratio as a percentage at its shown
        decimals (0.4484 → 44.8%), any other unit grouped at its decimals (2.3 M tok/s as
        2,300,000.00); — for nothing."""
        if value is None:
            return "—"
        if self.unit == RATIO:
            return percent_text(value, self.shown_decimals)
        return f"{Decimal(value):,.{self.shown_decimals}f}"

    @property
    def row_label(self) -> str:
        """As the overview's factor table names it: "α availability", "TEF = α·β·η"."""
        if self.chain:
            return f"{self.symbol} = {'·'.join(KPI[key].symbol for key in self.chain)}"
        return f"{self.symbol} {self.label}"


def _factor(
    key: str,
    symbol: str,
    label: str,
    target: str,
    band: Callable[[Decimal], BandRule] = target_band,
    **more: Any,
) -> Kpi:
    """A factor of the chain: a ratio with a target (kpis.md section 6), banded by its
    target unless `band` says otherwise."""
    title = f"{label[0].upper()}{label[1:]} {symbol}"
    return Kpi(key=key, symbol=symbol, label=label, title=title, target=Decimal(target),
               band=band(Decimal(target)), **more)  # fmt: skip


def _sum(name: str) -> Callable[[ScopeSums], Decimal | int]:
    return lambda s: getattr(s, name)


KPIS: tuple[Kpi, ...] = (
    Kpi(key="calendar_gpu_seconds", label="calendar GPU-seconds", unit=GPU_SECONDS, doc="C",
        compute=_sum("calendar")),
    Kpi(key="available_gpu_seconds", label="available GPU-seconds", unit=GPU_SECONDS, doc="A",
        compute=_sum("available")),
    Kpi(key="busy_gpu_seconds", label="busy GPU-seconds", unit=GPU_SECONDS, doc="B",
        compute=_sum("busy")),
    Kpi(key="std_gpu_seconds", label="standard GPU-seconds", unit=GPU_SECONDS, doc="Σ std(e)",
        compute=_sum("std")),
    _factor("availability", "α", "availability", "0.99", doc="α = A / C",
            gauge="alpha: healthy / installed GPU-seconds",
            compute=lambda s: ratio_of(s.available, s.calendar)),
    _factor("occupancy", "β", "occupancy", "0.75", doc="β = B / A",
            gauge="beta: busy / healthy GPU-seconds", band=occupancy_band,
            compute=lambda s: ratio_of(s.busy, s.available)),
    _factor("efficiency", "η", "efficiency", "0.875", doc="η = Σ std / B",
            gauge="eta: standard GPU-seconds / busy GPU-seconds",
            compute=lambda s: ratio_of(s.std, s.busy)),
    Kpi(key="tef", symbol="TEF", label="Token Efficiency Factor", title="TEF",
        chain=("availability", "occupancy", "efficiency"), doc="TEF = α β η",
        gauge="Token Efficiency Factor: standard GPU-seconds produced / calendar GPU-seconds",
        target=Decimal("0.65"), band=tef_band, compute=_tef),
    _factor("sla_delivery", "σ", "SLA delivery", "0.999", doc="σ",
            gauge="sigma: share of production delivered within SLO",
            band=lambda _target: sla_delivery_band, compute=lambda s: ratio_of(s.compliant, s.std)),
    _factor("sell_through", "s", "sell-through", "0.90", doc="s",
            gauge="s: share of SLA-compliant production that was sold",
            compute=lambda s: ratio_of(s.compliant_paid, s.compliant)),
    _factor("price_realization", "ρ", "price realization", "0.95", doc="ρ",
            gauge="rho: realized revenue / list value of paid tokens",
            compute=lambda s: ratio_of(s.realized, s.list_value)),
    Kpi(key="tfi", symbol="TFI", label="Token Factory Index", title="TFI",
        chain=("tef", "sla_delivery", "sell_through", "price_realization"),
        doc="TFI = TEF σ s ρ",
        gauge="Token Factory Index: TEF x SLA delivery x sell-through x price realization",
        band=tfi_band, compute=_tfi),
    Kpi(key="output_tokens", label="output tokens", unit=TOKENS, compute=_sum("output_tokens")),
    Kpi(key="paid_output_tokens", label="paid output tokens", unit=TOKENS,
        compute=_sum("paid_output_tokens")),
    Kpi(key="tps", label="output tokens per second", unit=RATE,
        title="Output tokens per second", doc="output tokens/s",
        gauge="output tokens per second", compute=lambda s: s.output_tokens / s.seconds),
    Kpi(key="theoretical_tps", label="theoretical tokens per second", unit=RATE,
        title="Theoretical tokens per second", doc="output-token units/s at R_ref",
        gauge="output-token units per second at R_ref on every installed GPU",
        compute=lambda s: s.theoretical / s.seconds),
    Kpi(key="list_value", label="list value", unit=MONEY, doc="money",
        compute=_sum("list_value")),
    Kpi(key="realized_revenue", label="realized revenue", unit=MONEY, doc="money",
        compute=_sum("realized")),
    # TPS over installed GPUs (C / seconds) simplifies to output tokens / C.
    Kpi(key="tps_per_gpu", label="output tokens per second per installed GPU", unit=RATE,
        is_nullable=True, compute=lambda s: ratio_of(Decimal(s.output_tokens), s.calendar)),
    Kpi(key="tpm", label="output tokens per minute", unit=RATE,
        compute=lambda s: s.output_tokens * 60 / s.seconds),
    Kpi(key="reserved_gpu_seconds", label="reserved GPU-seconds", unit=GPU_SECONDS,
        doc="Σ gpus × t of the reservations", compute=_sum("reserved")),
    Kpi(key="reserved_share", label="reserved share", title="Reserved share",
        doc="reserved GPU-seconds / A", compute=lambda s: ratio_of(s.reserved, s.available)),
    Kpi(key="capacity_sold", label="capacity sold", title="Capacity sold",
        doc="(reserved + Σ std of paid, compliant, uncovered events) / A, at most 1",
        compute=_capacity_sold),
    Kpi(key="reservation_utilization", label="reservation utilization",
        title="Reservation utilization", doc="covered tok / Σ cap of the reservations",
        compute=lambda s: ratio_of(s.covered, s.reserved_capacity)),
)  # fmt: skip
KPI: dict[str, Kpi] = {kpi.key: kpi for kpi in KPIS}
# The flywheel's default targets (kpis.md section 6): α·β·η = 0.65, the TEF target.
TARGETS: dict[str, Decimal] = {kpi.key: kpi.target for kpi in KPIS if kpi.target is not None}


def band_of(key: str, value: Decimal | float | None) -> Band | None:
    """Where a KPI sits against the benchmarks of kpis.md (None when it has no value, or
    no band)."""
    kpi = KPI.get(key)
    if value is None or kpi is None or kpi.band is None:
        return None
    return kpi.band(Decimal(str(value)))


def std_seconds(
    *, output_tokens: int, input_tokens: int, cached_tokens: int, r_ref: Decimal, w_in: Decimal
) -> Decimal:
    """Return standard GPU-seconds std = tok / R_ref of an event or of an aggregate of one deployment version."""
    if r_ref <= 0:
        raise ValueError("r_ref must be positive")
    with localcontext(KPI_CONTEXT):
        tok = production_tokens(
            output_tokens=output_tokens,
            input_tokens=input_tokens,
            cached_tokens=cached_tokens,
            w_in=w_in,
        )
        return tok / r_ref


def period_seconds(*, start: datetime, end: datetime) -> Decimal:
    """Return the length of the half-open period [start, end) in seconds, checking it."""
    return _micros_to_seconds(_period_micros(start=start, end=end))


def integrate_capacity(
    *, samples: Iterable[CapacitySample], start: datetime, end: datetime, gpu_count: int
) -> CapacityTotals:
    """Integrate one pool's capacity samples over [start, end); uncovered time counts gpu_count GPUs."""
    period_us = _period_micros(start=start, end=end)
    if gpu_count < 0:
        raise ValueError("gpu_count must be non-negative")
    # Samples are keyed by (pool, time) and a re-posted one replaces the earlier: same here.
    by_time = {sample.time: sample for sample in samples}
    ordered = sorted(by_time.values(), key=lambda sample: sample.time)
    installed_us = healthy_us = busy_us = covered_us = 0
    for index, sample in enumerate(ordered):
        begin_us = (sample.time - start) // _MICROSECOND
        # The next sample takes over even when an interval_s would reach past it.
        stop_us = (
            (ordered[index + 1].time - start) // _MICROSECOND
            if index + 1 < len(ordered)
            else period_us
        )
        if sample.interval_s is not None:
            stop_us = min(stop_us, begin_us + _interval_micros(sample.interval_s))
        # Clipping the start to 0 is what carries the last sample before the period into it.
        held_us = min(stop_us, period_us) - max(begin_us, 0)
        if held_us <= 0:
            continue
        covered_us += held_us
        installed_us += sample.installed * held_us
        healthy_us += sample.healthy * held_us
        busy_us += sample.busy * held_us
    uncovered_us = period_us - covered_us
    telemetry: Telemetry = (
        "measured" if uncovered_us == 0 else "assumed" if covered_us == 0 else "partial"
    )
    return CapacityTotals(
        calendar_gpu_seconds=_micros_to_seconds(installed_us + gpu_count * uncovered_us),
        available_gpu_seconds=_micros_to_seconds(healthy_us + gpu_count * uncovered_us),
        busy_gpu_seconds=_micros_to_seconds(busy_us + gpu_count * uncovered_us),
        covered_seconds=_micros_to_seconds(covered_us),
        telemetry=telemetry,
    )


def pool_reference_rate(*, pool: PoolInputs) -> Decimal | None:
    """Return R_ref(pool) = Σtok / Σstd, the deployments' plain mean if nothing was produced, else None."""
    with localcontext(KPI_CONTEXT):
        if pool.std_gpu_seconds > 0:
            # Production-weighted harmonic mean of the deployments' R_ref.
            return pool.production_tokens / pool.std_gpu_seconds
        if pool.deployment_r_refs:
            return sum(pool.deployment_r_refs, ZERO) / len(pool.deployment_r_refs)
        return None


def kpis_compute(
    *, scope: str, start: datetime, end: datetime, pools: Sequence[PoolInputs]
) -> Kpis:
    """Compute every KPI of a scope over [start, end), every sum running over all its pools:
    each KPI by its declared formula (KPIS) over the scope's sums."""
    period_us = _period_micros(start=start, end=end)
    slugs = [pool.pool for pool in pools]
    if len(set(slugs)) != len(slugs):
        raise ValueError("each pool may appear once in a scope")
    with localcontext(KPI_CONTEXT):
        sums = ScopeSums(
            seconds=_micros_to_seconds(period_us),
            calendar=sum((p.calendar_gpu_seconds for p in pools), ZERO),
            available=sum((p.available_gpu_seconds for p in pools), ZERO),
            busy=sum((p.busy_gpu_seconds for p in pools), ZERO),
            std=sum((p.std_gpu_seconds for p in pools), ZERO),
            compliant=sum((p.compliant_std_gpu_seconds for p in pools), ZERO),
            compliant_paid=sum((p.compliant_paid_std_gpu_seconds for p in pools), ZERO),
            list_value=sum((p.list_value for p in pools), ZERO),
            realized=sum((p.realized_revenue for p in pools), ZERO),
            output_tokens=sum(p.output_tokens for p in pools),
            paid_output_tokens=sum(p.paid_output_tokens for p in pools),
            theoretical=sum(
                (p.calendar_gpu_seconds * (pool_reference_rate(pool=p) or ZERO) for p in pools),
                ZERO,
            ),
            reserved=sum((p.reserved_gpu_seconds for p in pools), ZERO),
            reserved_capacity=sum((p.reserved_capacity for p in pools), ZERO),
            covered=sum((p.covered_tokens for p in pools), ZERO),
            on_demand_sold=sum((p.on_demand_compliant_paid_std_gpu_seconds for p in pools), ZERO),
        )
        figures: dict[str, Any] = {kpi.key: kpi.compute(sums) for kpi in KPIS}
        return Kpis(
            scope=scope,
            from_=start,
            to=end,
            telemetry=_scope_telemetry(pool.telemetry for pool in pools),
            **figures,
        )


def ratio_of(numerator: Decimal | int, denominator: Decimal | int | None) -> Decimal | None:
    """numerator / denominator in the KPI context; None when the denominator is zero or
    missing (kpis.md: a ratio over nothing is undefined, never 0). Every KPI ratio is this."""
    if not denominator:
        return None
    if numerator == 0:
        return ZERO  # plain 0, not 0E+3 from the operands' exponents
    with localcontext(KPI_CONTEXT):
        return Decimal(numerator) / Decimal(denominator)


def _scope_telemetry(telemetries: Iterable[Telemetry]) -> Telemetry:
    """Return measured if every pool was measured, assumed if every pool was assumed, else partial."""
    seen = set(telemetries)
    if seen <= {"measured"}:
        return "measured"
    if seen == {"assumed"}:
        return "assumed"
    return "partial"


def _period_micros(*, start: datetime, end: datetime) -> int:
    """Return the period's length in microseconds after checking it is aware and non-empty."""
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("period bounds must be timezone-aware")
    if end <= start:
        raise ValueError("period needs end > start")
    return (end - start) // _MICROSECOND


def _interval_micros(interval_s: int | Decimal) -> int:
    """Return an interval in whole microseconds, the resolution of sample times."""
    with localcontext(KPI_CONTEXT):
        return int((Decimal(interval_s) * _MICROS_PER_SECOND).to_integral_value())


def _micros_to_seconds(micros: int) -> Decimal:
    """Return micros / 10^6 as a Decimal, exact (and without trailing zeros) at this magnitude."""
    with localcontext(KPI_CONTEXT):
        return Decimal(micros) / _MICROS_PER_SECOND
