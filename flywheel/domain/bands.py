"""Benchmark bands of kpis.md, in words: the rules a KPI's declaration names for its band
(flywheel.domain.kpis, `Kpi.band`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

BandRule = Callable[[Decimal], "Band"]


@dataclass(frozen=True)
class Band:
    level: str  # below | typical | good | target: the CSS badge and the word shown
    label: str  # the band's meaning in words


def tef_band(v: Decimal) -> Band:
    if v >= Decimal("0.65"):
        return Band("target", "at the 65% target")
    if v >= Decimal("0.40"):
        return Band("good", "good (≥ 40%), below the 65% target")
    if v >= Decimal("0.20"):
        return Band("typical", "typical centre (20–35%; good ≥ 40%, target 65%)")
    return Band("below", "below typical centres (< 20%)")


def tfi_band(v: Decimal) -> Band:
    if v >= Decimal("0.35"):
        return Band("good", "excellent (35–45%)")
    return Band("below", "below the excellent band (35–45%)")


def sla_delivery_band(v: Decimal) -> Band:
    if v >= Decimal("0.999"):
        return Band("good", "excellent (≥ 99.9%)")
    return Band("below", "below 99.9%: SLO misses cost revenue")


def target_band(target: Decimal) -> BandRule:
    """At or above the flywheel's default target, else below it."""

    def band(v: Decimal) -> Band:
        if v >= target:
            return Band("target", f"at or above the {target:.1%} target")
        return Band("below", f"below the {target:.1%} target")

    return band


def occupancy_band(target: Decimal) -> BandRule:
    """Below the 15–75% seen in distributed inference, within it, or at the target."""

    def band(v: Decimal) -> Band:
        if v < Decimal("0.15"):
            return Band("below", "below the 15–75% seen in distributed inference")
        if v >= target:
            return Band("target", f"at or above the {target:.1%} target")
        return Band("typical", f"within the 15–75% range; target {target:.0%}")

    return band
