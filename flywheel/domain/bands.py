"""Benchmark bands of kpis.md and the flywheel's default targets (section 6), in words."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

# Section 6 defaults: α·β·η = 0.65, the TEF target.
TARGETS = {
    "availability": Decimal("0.99"),
    "occupancy": Decimal("0.75"),
    "efficiency": Decimal("0.875"),
    "sla_delivery": Decimal("0.999"),
    "sell_through": Decimal("0.90"),
    "price_realization": Decimal("0.95"),
    "tef": Decimal("0.65"),
}


@dataclass(frozen=True)
class Band:
    level: str  # below | typical | good | target: the CSS badge and the word shown
    label: str  # the band's meaning in words


def band_of(key: str, value: Decimal | float | None) -> Band | None:
    """Where a KPI sits against the benchmarks of kpis.md (None when it has no value)."""
    if value is None:
        return None
    v = Decimal(str(value))
    if key == "tef":
        if v >= Decimal("0.65"):
            return Band("target", "at the 65% target")
        if v >= Decimal("0.40"):
            return Band("good", "good (≥ 40%; typical centres 20–35%)")
        if v >= Decimal("0.20"):
            return Band("typical", "typical centre (20–35%)")
        return Band("below", "below typical centres (< 20%)")
    if key == "tfi":
        if v >= Decimal("0.35"):
            return Band("good", "excellent (35–45%)")
        return Band("below", "below the excellent band (35–45%)")
    if key == "sla_delivery":
        if v >= Decimal("0.999"):
            return Band("good", "excellent (≥ 99.9%)")
        return Band("below", "below 99.9%: SLO misses cost revenue")
    if key == "occupancy" and v < Decimal("0.15"):
        return Band("below", "below the 15–75% seen in distributed inference")
    target = TARGETS.get(key)
    if target is None:
        return None
    if v >= target:
        return Band("target", f"at or above the {target:.1%} target")
    if key == "occupancy":
        return Band("typical", f"within the 15–75% range; target {target:.0%}")
    return Band("below", f"below the {target:.1%} target")
