"""The diagnosis of a period, and the goal in force checked against it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from flywheel.domain.loop.baseline import Baseline, measured_tfom
from flywheel.domain.loop.diagnosis import Diagnosis, diagnose
from flywheel.domain.loop.goals import GoalCheck, Proposal, cheapest_lever_set, goal_check
from flywheel.models import Goal
from flywheel.selectors.loop.baseline import baseline_get
from flywheel.selectors.loop.evidence import evidence_get
from flywheel.selectors.loop.levers import (
    goal_in_force,
    goal_spec,
    goal_targets,
    levers_in_force,
    proposable_levers,
)
from flywheel.selectors.measurement import FactoryData


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
    data = data if data is not None else FactoryData(start=start, end=end)
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
    proposal: Proposal | None  # only when the goal is not met


def goal_status_get(*, baseline: Baseline, now: datetime, measured=None) -> GoalStatus:
    """Check the goal in force at `now` against the measured period; when unmet, the
    cheapest set of the levers in force and not yet applied that meets it (typical
    multipliers), or why none does."""
    goal = goal_in_force(at=now)
    if goal is None:
        return GoalStatus(goal=None, check=None, proposal=None)
    measured = measured if measured is not None else measured_tfom(baseline)
    spec = goal_spec(goal)
    check = goal_check(goal=spec, tfom=measured, start=baseline.start, end=baseline.end)
    proposal = None
    if not check.is_met:
        proposal = cheapest_lever_set(
            baseline=baseline,
            goal=spec,
            levers=proposable_levers(levers_in_force(at=now)),
            measured=measured,
        )
    return GoalStatus(goal=goal, check=check, proposal=proposal)
