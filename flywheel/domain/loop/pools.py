"""Spreading projected factory factors over the pools, and each pool's sums that follow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT, ZERO, PoolInputs, ratio_of
from flywheel.domain.loop.baseline import Baseline
from flywheel.domain.loop.factors import CAPPED, FACTORS, ONE
from flywheel.domain.tfom import Tfom


def _move(
    weights: Sequence[Decimal],
    ratios: Sequence[Decimal | None],
    level: Decimal | None,
    capped: bool,
    steps: Sequence[Decimal | None],
) -> list[Decimal]:
    """Pool ratios whose weighted mean is `level` (None: the ratios as they are), each then
    multiplied by its pool's step (None: none; capped at 1 where the ratio is)."""
    moved = _spread(weights, ratios, level, capped)
    with localcontext(KPI_CONTEXT):
        return [
            r if step is None else (min(r * step, ONE) if capped else r * step)
            for r, step in zip(moved, steps, strict=True)
        ]


def _spread(
    weights: Sequence[Decimal],
    ratios: Sequence[Decimal | None],
    level: Decimal | None,
    capped: bool,
) -> list[Decimal]:
    """Pool ratios whose weighted mean is `level` (None: the ratios as they are). A ratio
    nothing was measured under counts as 0 (no pool to learn it from)."""
    filled = [ZERO if r is None else r for r in ratios]
    total = sum(weights, ZERO)
    if level is None or total == 0:
        return filled
    with localcontext(KPI_CONTEXT):
        current = sum((w * r for w, r in zip(weights, filled, strict=True)), ZERO) / total
        if level == current:
            return filled
        if capped and level > current:
            # Shrink every pool's gap to 1 in the same proportion: stays in [0, 1].
            keep = (ONE - level) / (ONE - current)
            return [ONE - (ONE - r) * keep for r in filled]
        if current == 0:
            return [level for _ in filled]
        scale = level / current
        return [r * scale for r in filled]


def project_pools(
    baseline: Baseline,
    moved: Mapping[str, Decimal | None],
    measured: Tfom,
    scoped: Mapping[str, Mapping[str, Decimal]] | None = None,
) -> list[PoolInputs]:
    """Each pool's sums with the `moved` factors at their level and every other factor at
    its measured factory value, then the `scoped` multipliers (pool → factor → m) applied
    to those pools' own ratios (see the module docstring)."""
    pools = [item.pool for item in baseline.pools]
    scoped = scoped or {}

    def steps(factor: str) -> list[Decimal | None]:
        return [scoped.get(p.pool, {}).get(factor) for p in pools]

    def link(factor: str, base: list[Decimal], numerator: str, denominator: str) -> list[Decimal]:
        """The pools' projected `numerator` sums: `factor` (numerator / denominator) moved to
        its level, capped at 1 where the factor is (CAPPED), times each pool's step."""
        return _step(
            pools,
            base,
            numerator,
            denominator,
            levels[factor],
            capped=factor in CAPPED,
            steps=steps(factor),
        )

    levels: dict[str, Decimal | None] = {}
    is_upstream_moved = False
    for factor in FACTORS:
        if factor in moved:
            levels[factor] = moved[factor]
            is_upstream_moved = True
        elif is_upstream_moved:
            # Its weights moved: spread the measured factory value over them again.
            levels[factor] = getattr(measured, factor)
        else:
            levels[factor] = None  # nothing before it moved: every pool keeps its sums
    with localcontext(KPI_CONTEXT):
        calendar = [p.calendar_gpu_seconds for p in pools]
        alpha = _move(
            calendar,
            [ratio_of(p.available_gpu_seconds, p.calendar_gpu_seconds) for p in pools],
            levels["availability"],
            capped=True,
            steps=steps("availability"),
        )
        available = [
            _keep(p.available_gpu_seconds, c * a, ratio_of(p.available_gpu_seconds, c), a)
            for p, c, a in zip(pools, calendar, alpha, strict=True)
        ]
        busy = link("occupancy", available, "busy_gpu_seconds", "available_gpu_seconds")
        std = link("efficiency", busy, "std_gpu_seconds", "busy_gpu_seconds")
        compliant = link("sla_delivery", std, "compliant_std_gpu_seconds", "std_gpu_seconds")
        paid = link(
            "sell_through", compliant, "compliant_paid_std_gpu_seconds", "compliant_std_gpu_seconds"
        )
        # List value per compliant paid std GPU-second: the pool's own, else the factory's.
        factory_price = ratio_of(
            sum((p.list_value for p in pools), ZERO),
            sum((p.compliant_paid_std_gpu_seconds for p in pools), ZERO),
        )
        list_value = []
        for p, sold in zip(pools, paid, strict=True):
            if sold == p.compliant_paid_std_gpu_seconds:
                list_value.append(p.list_value)
            else:
                price = ratio_of(p.list_value, p.compliant_paid_std_gpu_seconds) or factory_price
                list_value.append(sold * price if price is not None else ZERO)
        realized = link("price_realization", list_value, "realized_revenue", "list_value")
        return [
            _pool_inputs(
                p, available[i], busy[i], std[i], compliant[i], paid[i], list_value[i], realized[i]
            )
            for i, p in enumerate(pools)
        ]


def _step(
    pools: Sequence[PoolInputs],
    base: Sequence[Decimal],
    numerator: str,
    denominator: str,
    level: Decimal | None,
    capped: bool,
    steps: Sequence[Decimal | None],
) -> list[Decimal]:
    """Each pool's projected `numerator` sum: its projected `base` (the projected
    `denominator` sum) times the pool's ratio numerator / denominator moved to `level`,
    then multiplied by the pool's own step."""
    ratios = _move(
        base,
        [ratio_of(getattr(p, numerator), getattr(p, denominator)) for p in pools],
        level,
        capped,
        steps,
    )
    return [
        _same(getattr(p, numerator), getattr(p, denominator), b, r, b * r)
        for p, b, r in zip(pools, base, ratios, strict=True)
    ]


def _keep(
    measured: Decimal, projected: Decimal, ratio: Decimal | None, new_ratio: Decimal
) -> Decimal:
    """The measured sum when its ratio did not move (exact identity), else the projection."""
    return measured if ratio is not None and ratio == new_ratio else projected


def _same(
    measured: Decimal,
    measured_base: Decimal,
    base: Decimal,
    new_ratio: Decimal,
    projected: Decimal,
) -> Decimal:
    """`measured` when neither its base sum nor its ratio moved, else `projected`."""
    if base == measured_base and ratio_of(measured, measured_base) == new_ratio:
        return measured
    if base == measured_base and measured_base == 0:
        return measured
    return projected


def _scale_int(value: int, numerator: Decimal, denominator: Decimal) -> int:
    if numerator == denominator:
        return value
    if denominator == 0:
        return 0
    with localcontext(KPI_CONTEXT):
        return int((value * numerator / denominator).to_integral_value())


def _pool_inputs(
    pool: PoolInputs,
    available: Decimal,
    busy: Decimal,
    std: Decimal,
    compliant: Decimal,
    paid: Decimal,
    list_value: Decimal,
    realized: Decimal,
) -> PoolInputs:
    with localcontext(KPI_CONTEXT):
        if std == pool.std_gpu_seconds:
            production = pool.production_tokens
        elif pool.std_gpu_seconds > 0:
            production = pool.production_tokens * std / pool.std_gpu_seconds
        else:
            rates = pool.deployment_r_refs
            production = std * (sum(rates, ZERO) / len(rates)) if rates else ZERO
        if pool.std_gpu_seconds > 0:
            output = _scale_int(pool.output_tokens, std, pool.std_gpu_seconds)
        else:
            output = int(production.to_integral_value())
        if pool.compliant_paid_std_gpu_seconds > 0:
            paid_output = _scale_int(
                pool.paid_output_tokens, paid, pool.compliant_paid_std_gpu_seconds
            )
        elif std > 0:
            paid_output = int((output * paid / std).to_integral_value())
        else:
            paid_output = 0
    return pool.with_sums(
        available_gpu_seconds=available,
        busy_gpu_seconds=busy,
        std_gpu_seconds=std,
        production_tokens=production,
        compliant_std_gpu_seconds=compliant,
        compliant_paid_std_gpu_seconds=paid,
        output_tokens=output,
        paid_output_tokens=paid_output,
        list_value=list_value,
        realized_revenue=realized,
    )


def pools_withdraw(
    pools: Sequence[PoolInputs],
    withdrawn: Mapping[str, int],
    seconds: Decimal,
    *,
    keeps_busy: bool,
) -> list[PoolInputs]:
    """Each pool with `withdrawn[pool]` GPUs out of service over the period's `seconds`:
    its calendar GPU-seconds fall by theirs (never below none) and its available ones in
    proportion (they had the pool's availability). `keeps_busy` (a bounded demand): the
    busy time stays while the rest can hold it, else it shrinks to them with what it
    produced and sold; otherwise busy time and sales fall in proportion too (the
    withdrawn GPUs had the pool's occupancy)."""
    result = []
    for pool in pools:
        count = withdrawn.get(pool.pool, 0)
        if not count or pool.calendar_gpu_seconds == 0:
            result.append(pool)
            continue
        with localcontext(KPI_CONTEXT):
            calendar = max(ZERO, pool.calendar_gpu_seconds - count * seconds)
            keep = calendar / pool.calendar_gpu_seconds
            available = pool.available_gpu_seconds * keep
            if keeps_busy:
                busy = pool.busy_gpu_seconds
                factor = ONE if busy <= available else available / busy
            else:
                factor = keep
        fixed = {"calendar_gpu_seconds": calendar, "available_gpu_seconds": available}
        if factor == ONE:  # keywords, not **fixed: mypy checks each against its field
            result.append(
                replace(pool, calendar_gpu_seconds=calendar, available_gpu_seconds=available)
            )
        else:
            result.append(_scaled(pool, factor, **fixed))
    return result


def demand_serve(
    measured: Sequence[PoolInputs], projected: Sequence[PoolInputs], scale: Decimal
) -> list[PoolInputs]:
    """Each projected pool producing its demand, the measured production × `scale`, up to
    its capacity: what its available GPU-seconds produce all busy at the projected
    efficiency (A' × η'). Busy GPU-seconds are what serving it takes (served / η'), and
    what the busy time sold follows in proportion (the projected σ, s, ρ and prices).
    A projected pool that produced nothing has nothing to scale from and stays."""
    result = []
    for before, pool in zip(measured, projected, strict=True):
        if pool.std_gpu_seconds == 0:
            result.append(pool)
            continue
        with localcontext(KPI_CONTEXT):
            demand = before.std_gpu_seconds * scale
            efficiency = pool.std_gpu_seconds / pool.busy_gpu_seconds
            served = min(demand, pool.available_gpu_seconds * efficiency)
            if served == pool.std_gpu_seconds:
                result.append(pool)
                continue
            result.append(_scaled(pool, served / pool.std_gpu_seconds))
    return result


def _scaled(pool: PoolInputs, factor: Decimal, **fixed: Decimal) -> PoolInputs:
    """The pool's busy time and everything it produced and sold × `factor` (ratios from
    busy on unchanged), with the `fixed` sums set (busy held to available: `with_sums`)."""
    with localcontext(KPI_CONTEXT):
        sums = {
            name: getattr(pool, name) * factor
            for name in (
                "busy_gpu_seconds",
                "std_gpu_seconds",
                "production_tokens",
                "compliant_std_gpu_seconds",
                "compliant_paid_std_gpu_seconds",
                "list_value",
                "realized_revenue",
            )
        }
        output = int((pool.output_tokens * factor).to_integral_value())
        paid_output = int((pool.paid_output_tokens * factor).to_integral_value())
    return pool.with_sums(output_tokens=output, paid_output_tokens=paid_output, **sums | fixed)


@dataclass(frozen=True, kw_only=True)
class PoolCapacity:
    """One pool's GPUs, measured and projected (time-weighted averages over the period):
    installed, busy, headroom (available and idle) and released (no longer needed to
    serve the demand at the pool's measured occupancy, still installed)."""

    pool: str
    installed: Decimal
    projected_installed: Decimal
    busy: Decimal
    projected_busy: Decimal
    headroom: Decimal
    projected_headroom: Decimal
    released: Decimal
    withdrawn: int


def pool_capacity(
    *,
    measured: PoolInputs,
    projected: PoolInputs,
    seconds: Decimal,
    withdrawn: int = 0,
    is_bounded: bool = True,
) -> PoolCapacity:
    """The GPUs of one pool before and after a projection over `seconds`. Released GPUs:
    the installed GPUs beyond those the projected busy time needs at the measured
    occupancy (installed × B' / B), none under an unbounded demand (it uses them all)."""
    with localcontext(KPI_CONTEXT):
        installed = measured.calendar_gpu_seconds / seconds
        projected_installed = projected.calendar_gpu_seconds / seconds
        released = ZERO
        if is_bounded and measured.busy_gpu_seconds > 0:
            needed = installed * projected.busy_gpu_seconds / measured.busy_gpu_seconds
            released = max(ZERO, projected_installed - needed)
        return PoolCapacity(
            pool=measured.pool,
            installed=installed,
            projected_installed=projected_installed,
            busy=measured.busy_gpu_seconds / seconds,
            projected_busy=projected.busy_gpu_seconds / seconds,
            headroom=(measured.available_gpu_seconds - measured.busy_gpu_seconds) / seconds,
            projected_headroom=(projected.available_gpu_seconds - projected.busy_gpu_seconds)
            / seconds,
            released=released,
            withdrawn=withdrawn,
        )
