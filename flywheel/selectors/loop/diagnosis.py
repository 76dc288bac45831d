"""The diagnosis of a period, and the goal in force checked against it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from flywheel.domain.loop.baseline import Baseline, measured_tfom
from flywheel.domain.loop.demand import MEASURED, Demand
from flywheel.domain.loop.diagnosis import Diagnosis, diagnose
from flywheel.domain.loop.goals import GoalCheck, Proposal, cheapest_lever_set, goal_check
from flywheel.models import Goal
from flywheel.selectors.loop.baseline import baseline_get
from flywheel.selectors.loop.evidence import evidence_get
from flywheel.selectors.loop.levers import (
    goal_in_force,
    goal_spec,
    goal_targets,
    lever_specs,
    levers_in_force,
    proposable_levers,
)
from flywheel.selectors.measurement import FactoryData, kpi_read
from portal.periods import Period


def diagnosis_get(
    *,
    start: datetime,
    end: datetime,
    targets: dict[str, Decimal] | None = None,
    data: FactoryData | None = None,
    baseline: Baseline | None = None,
    at: datetime | None = None,
) -> Diagnosis:
    """The ranked diagnosis of [start, end) with its evidence (`baseline` and `data`, when
    given, are that period measured). Targets: `targets` over the goal in force at `at`
    (default `end`) over the kpis.md defaults. Raises FieldError when a pool has no cost
    model."""
    data = data if data is not None else kpi_read(Period(start, end))
    baseline = baseline if baseline is not None else baseline_get(start=start, end=end, data=data)
    merged = goal_targets(goal_in_force(at=at or end)) | (targets or {})
    return diagnose(
        baseline=baseline,
        targets=merged,
        evidence=evidence_get(baseline=baseline, start=start, end=end, data=data),
        measured=measured_tfom(baseline),
    )


@dataclass(frozen=True)
class GoalStatus:
    """The goal in force checked against a period, and what would meet it."""

    goal: Goal | None
    check: GoalCheck | None  # None: no goal in force
    # Only when the goal is not met: the cheapest lever set under each demand asked for,
    # the first under the measured demand (the proposal).
    proposals: tuple[Proposal, ...] = ()

    @property
    def proposal(self) -> Proposal | None:
        return self.proposals[0] if self.proposals else None


def goal_status_get(
    *,
    baseline: Baseline,
    now: datetime,
    measured=None,
    demands: tuple[Demand, ...] = (MEASURED,),
) -> GoalStatus:
    """Check the goal in force at `now` against the measured period; when unmet, the
    cheapest set of the levers in force and not yet applied that meets it (typical
    multipliers) under each of `demands`, or why none does."""
    goal = goal_in_force(at=now)
    if goal is None:
        return GoalStatus(goal=None, check=None)
    measured = measured if measured is not None else measured_tfom(baseline)
    spec = goal_spec(goal)
    check = goal_check(goal=spec, tfom=measured, start=baseline.start, end=baseline.end)
    if check.is_met:
        return GoalStatus(goal=goal, check=check)
    specs = lever_specs(levers_in_force(at=now), start=baseline.start, end=baseline.end)
    levers = proposable_levers(specs.values())
    proposals = tuple(
        cheapest_lever_set(
            baseline=baseline, goal=spec, levers=levers, measured=measured, demand=demand
        )
        for demand in demands
    )
    return GoalStatus(goal=goal, check=check, proposals=proposals)
