"""Diagnosis: which factor holds the factory back most, in money (kpis.md section 6, step 2).

For each factor f of α, β, η, σ, s, ρ: the monthly EBITDA gained if f alone rose to its
target, the others fixed at their measured factory values, projected under unlimited
demand (revenue scales with TFI; energy follows the projected A and B through the energy
formula): the opportunity if demand follows. Beside it, the same target under the measured
demand. A factor at or above its target gains nothing. Factors are
ranked by that gain (ties in the chain's order); the first with a positive gain is the
bottleneck. Evidence (tables built from the data by the selectors) travels with each factor.

Pure: imports no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from flywheel.domain.kpis import TARGETS, ZERO
from flywheel.domain.loop.baseline import Baseline, measured_tfom
from flywheel.domain.loop.demand import MEASURED, UNLIMITED, per_month
from flywheel.domain.loop.factors import FACTORS, LABELS, SYMBOLS
from flywheel.domain.loop.projection import Projection, project
from flywheel.domain.tfom import Tfom

# kpis.md section 6 defaults (α·β·η = 0.65, the TEF target), from flywheel/bands.py; a goal
# may override any of them.
DEFAULT_TARGETS: dict[str, Decimal] = {factor: TARGETS[factor] for factor in FACTORS}


@dataclass(frozen=True, kw_only=True)
class EvidenceColumn:
    key: str
    label: str
    # gpu_hours | tokens | money | ratio | count | minutes | rate | text: how to show it
    unit: str = "text"


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What in the data explains a factor: a one-line summary and a table."""

    factor: str
    summary: str
    columns: tuple[EvidenceColumn, ...] = ()
    rows: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class FactorDiagnosis:
    """One factor: where it stands, what reaching its target is worth, and why it is low."""

    factor: str
    value: Decimal | None
    target: Decimal
    projection: Projection | None  # None when at target or not measurable
    ebitda_gain_per_month: Decimal  # money per month, 0 at or above target (if demand follows)
    revenue_gain_per_month: Decimal
    energy_cost_change_per_month: Decimal
    # The same target under the measured demand: the energy η saves serving the same
    # tokens, nothing for β (or what idle power α adds), as much as the opportunity for
    # σ, s and ρ (they sell what is already made).
    measured_demand_gain_per_month: Decimal = ZERO
    evidence: Evidence | None = None

    @property
    def symbol(self) -> str:
        return SYMBOLS[self.factor]

    @property
    def label(self) -> str:
        return LABELS[self.factor]

    @property
    def is_at_target(self) -> bool:
        return self.value is not None and self.value >= self.target

    @property
    def projected_tfi(self) -> Decimal | None:
        return self.projection.tfom.tfi if self.projection else None


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """Every factor ranked by the monthly EBITDA its target is worth."""

    start: datetime
    end: datetime
    measured: Tfom
    ebitda_per_month: Decimal
    factors: tuple[FactorDiagnosis, ...]  # ranked, largest gain first
    targets: Mapping[str, Decimal] = field(default_factory=dict)
    uncosted: tuple[str, ...] = ()  # pools left out for want of a cost model (Baseline)

    @property
    def bottleneck(self) -> FactorDiagnosis | None:
        """The first-ranked factor when reaching its target gains anything."""
        first = self.factors[0] if self.factors else None
        return first if first is not None and first.ebitda_gain_per_month > 0 else None

    def factor(self, name: str) -> FactorDiagnosis:
        return next(f for f in self.factors if f.factor == name)


def targets_merge(overrides: Mapping[str, Decimal] | None = None) -> dict[str, Decimal]:
    """The default targets with `overrides` (factor → target) applied."""
    merged = dict(DEFAULT_TARGETS)
    for factor, value in (overrides or {}).items():
        if factor not in FACTORS:
            raise ValueError(f"unknown factor {factor!r}")
        merged[factor] = value
    return merged


def diagnose(
    *,
    baseline: Baseline,
    targets: Mapping[str, Decimal] | None = None,
    evidence: Mapping[str, Evidence] | None = None,
    measured: Tfom | None = None,
) -> Diagnosis:
    """Rank α, β, η, σ, s, ρ by the monthly EBITDA each gains alone at its target if demand
    follows (the opportunity), each with its gain under the measured demand beside it."""
    goals = targets_merge(targets)
    evidence = evidence or {}
    measured = measured if measured is not None else measured_tfom(baseline)
    start, end = baseline.start, baseline.end
    results = []
    for factor in FACTORS:
        value = getattr(measured, factor)
        target = goals[factor]
        projection = None
        gain = revenue = energy = under_measured = ZERO
        if value is not None and value < target:
            projection = project(
                baseline=baseline, targets={factor: target}, measured=measured, demand=UNLIMITED
            )
            gain = projection.ebitda_gain_per_month
            revenue = projection.per_month(projection.tfom.revenue - measured.revenue)
            energy = projection.per_month(projection.tfom.energy_cost - measured.energy_cost)
            under_measured = project(
                baseline=baseline, targets={factor: target}, measured=measured, demand=MEASURED
            ).ebitda_gain_per_month
        results.append(
            FactorDiagnosis(
                factor=factor,
                value=value,
                target=target,
                projection=projection,
                ebitda_gain_per_month=gain,
                revenue_gain_per_month=revenue,
                energy_cost_change_per_month=energy,
                measured_demand_gain_per_month=under_measured,
                evidence=evidence.get(factor),
            )
        )
    order = {factor: index for index, factor in enumerate(FACTORS)}
    ranked = sorted(results, key=lambda r: (-r.ebitda_gain_per_month, order[r.factor]))
    return Diagnosis(
        start=start,
        end=end,
        measured=measured,
        ebitda_per_month=per_month(measured.ebitda, start=start, end=end),
        factors=tuple(ranked),
        targets=goals,
        uncosted=baseline.uncosted,
    )
