"""Spreading projected factory factors over the pools, and each pool's sums that follow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT, ZERO, PoolInputs, ratio_of
from flywheel.domain.loop.baseline import Baseline
from flywheel.domain.loop.factors import FACTORS, ONE
from flywheel.domain.tfom import Tfom


def _move(
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
    baseline: Baseline, moved: Mapping[str, Decimal | None], measured: Tfom
) -> list[PoolInputs]:
    """Each pool's sums with the `moved` factors at their level and every other factor at
    its measured factory value (see the module docstring)."""
    pools = [item.pool for item in baseline.pools]
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
        )
        available = [
            _keep(p.available_gpu_seconds, c * a, ratio_of(p.available_gpu_seconds, c), a)
            for p, c, a in zip(pools, calendar, alpha, strict=True)
        ]
        busy = _step(
            pools,
            available,
            "busy_gpu_seconds",
            "available_gpu_seconds",
            levels["occupancy"],
            capped=True,
        )
        std = _step(
            pools, busy, "std_gpu_seconds", "busy_gpu_seconds", levels["efficiency"], capped=False
        )
        compliant = _step(
            pools,
            std,
            "compliant_std_gpu_seconds",
            "std_gpu_seconds",
            levels["sla_delivery"],
            capped=True,
        )
        paid = _step(
            pools,
            compliant,
            "compliant_paid_std_gpu_seconds",
            "compliant_std_gpu_seconds",
            levels["sell_through"],
            capped=True,
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
        realized = _step(
            pools,
            list_value,
            "realized_revenue",
            "list_value",
            levels["price_realization"],
            capped=True,
        )
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
) -> list[Decimal]:
    """Each pool's projected `numerator` sum: its projected `base` (the projected
    `denominator` sum) times the pool's ratio numerator / denominator moved to `level`."""
    ratios = _move(
        base,
        [ratio_of(getattr(p, numerator), getattr(p, denominator)) for p in pools],
        level,
        capped,
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
    busy = min(busy, available)
    compliant = min(compliant, std)
    paid = min(paid, compliant)
    return replace(
        pool,
        available_gpu_seconds=available,
        busy_gpu_seconds=busy,
        std_gpu_seconds=std,
        production_tokens=production,
        compliant_std_gpu_seconds=compliant,
        compliant_paid_std_gpu_seconds=paid,
        output_tokens=output,
        paid_output_tokens=min(paid_output, output),
        list_value=list_value,
        realized_revenue=min(realized, list_value),
    )
