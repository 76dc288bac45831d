"""The simulator's scenario: a measured period projected with levers and factor targets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings

from flywheel.domain.loop.baseline import Baseline, measured_tfom
from flywheel.domain.loop.demand import MEASURED, Demand, month_basis
from flywheel.domain.loop.factors import FACTORS
from flywheel.domain.loop.goals import GoalSpec, cheapest_lever_set, goal_check
from flywheel.domain.loop.growth import growth_series
from flywheel.domain.loop.projection import Projection, project
from flywheel.selectors.loop.baseline import baseline_get, baseline_recall, uncosted_json
from flywheel.selectors.loop.levers import (
    goal_in_force,
    goal_spec,
    lever_specs,
    levers_in_force,
    proposable_levers,
)
from flywheel.selectors.loop.shapes import (
    capacity_json,
    goal_check_json,
    money_json,
    number_json,
    projection_summary,
    proposal_json,
    rfc3339,
    series_json,
)
from flywheel.selectors.tfom import tfom_json
from portal.errors import FieldError


def scenario_get(
    *,
    start: datetime,
    end: datetime,
    lever_slugs: list[str],
    targets: dict[str, Decimal],
    estimate: str = "typical",
    goal: GoalSpec | None = None,
    baseline_key: str = "",
    demand: Demand = MEASURED,
    now: datetime,
) -> dict:
    """POST /api/v1/flywheel/scenarios: the projection of [start, end) under `demand` with
    the levers in force at `now` named by `lever_slugs` and the factor `targets`, its
    low-high range, each pool's GPUs (headroom, released, withdrawn), a growth demand's
    12 months, the goal check (typical multipliers; growth: month 12) and, when unmet, the
    cheapest lever set that meets it under the same demand. A pool in service without a
    cost model is left out and named (`uncosted`). Raises FieldError when no pool has one,
    or for an unknown lever."""
    baseline = baseline_recall(key=baseline_key, start=start, end=end)
    if baseline is None:
        baseline = baseline_get(start=start, end=end)
    measured = measured_tfom(baseline)
    catalogue = lever_specs(levers_in_force(at=now), start=start, end=end)
    unknown = [slug for slug in lever_slugs if slug not in catalogue]
    if unknown:
        raise FieldError("levers", f"no active lever {', '.join(unknown)} in the catalogue")
    chosen = [catalogue[slug] for slug in dict.fromkeys(lever_slugs)]
    projections = {
        name: project(
            baseline=baseline,
            levers=chosen,
            targets=targets,
            estimate=name,
            measured=measured,
            demand=demand,
        )
        for name in {"low", "typical", "high", estimate}
    }
    goal_in = goal if goal is not None else goal_spec(goal_in_force(at=now))
    check, proposal = _goal(
        goal_in, typical=projections["typical"], baseline=baseline, measured=measured,
        catalogue=catalogue, targets=targets, demand=demand, start=start, end=end,
    )  # fmt: skip
    series = None
    if demand.kind == "growth":
        series = growth_series(
            baseline=baseline,
            demand=demand,
            levers=chosen,
            targets=targets,
            estimate=estimate,
            measured=measured,
        )
    return Scenario(
        start=start, end=end, demand=demand, estimate=estimate, levers=chosen, targets=targets, baseline=baseline,
        measured=measured, projections=projections, check=check, proposal=proposal,
        series=series,
    ).as_json()  # fmt: skip


def _goal(goal: GoalSpec, *, typical: Projection, baseline, measured, catalogue, targets,
          demand, start, end):  # fmt: skip
    """The goal checked on the typical projection of [start, end) (None without a goal)
    and, when unmet, the cheapest lever set that meets it under the same demand."""
    if goal.is_empty:
        return None, None
    check = goal_check(goal=goal, tfom=typical.tfom, start=start, end=end)
    if check.is_met:
        return check, None
    proposal = cheapest_lever_set(
        baseline=baseline,
        goal=goal,
        levers=proposable_levers(catalogue.values()),
        targets=targets,
        measured=measured,
        demand=demand,
    )
    return check, proposal


@dataclass(frozen=True)
class Scenario:
    """A projected scenario and what it is checked against, as POST /api/v1/flywheel/
    scenarios answers it."""

    start: datetime
    end: datetime
    demand: Demand
    estimate: str
    levers: list
    targets: dict[str, Decimal]
    baseline: Baseline
    measured: Any
    projections: dict[str, Projection]  # low, typical, high and the estimate asked for
    check: Any  # the goal check (None without a goal)
    proposal: Any  # the cheapest lever set meeting an unmet goal
    series: Any  # a growth demand's 12 months

    def as_json(self) -> dict:
        baseline, measured, start, end = self.baseline, self.measured, self.start, self.end
        projection = self.projections[self.estimate]
        return {
            "from": rfc3339(start),
            "to": rfc3339(end),
            "currency": settings.FACTORY_CURRENCY,
            **self.demand.as_json(),
            "demand_label": self.demand.label,
            # Money "per month": the period's own figure when it is a calendar month
            # (TFOM's), else the period's over months(P); a growth demand's is its month 12.
            "month_basis": month_basis(start=start, end=end),
            "estimate": self.estimate,
            "levers": [lever.slug for lever in self.levers],
            "targets": {factor: float(value) for factor, value in self.targets.items()},
            "factors": {
                factor: {
                    "measured": number_json(getattr(measured, factor)),
                    "projected": number_json(getattr(projection.tfom, factor)),
                }
                for factor in FACTORS
            },
            "measured": {
                **projection_summary(_identity(baseline, measured)),
                **_kpi_extra(measured),
            },
            "projected": {**projection_summary(projection), **_kpi_extra(projection.tfom)},
            "range": {
                name: projection_summary(self.projections[name])
                for name in ("low", "typical", "high")
            },
            "lever_costs": {
                "one_time": money_json(projection.one_time_cost),
                "monthly": money_json(projection.monthly_cost),
                "total": money_json(projection.cost),
            },
            "figures": tfom_json(projection.tfom),
            "pools": capacity_json(projection),
            "series": None if self.series is None else series_json(self.series),
            "goal": None
            if self.check is None
            else {"is_met": self.check.is_met, "criteria": goal_check_json(self.check)},
            "proposal": proposal_json(self.proposal) if self.proposal is not None else None,
            "uncosted": uncosted_json(pools=baseline.uncosted, start=start),
        }


def _identity(baseline: Baseline, measured) -> Projection:
    return Projection(start=baseline.start, end=baseline.end, measured=measured, tfom=measured)


def _kpi_extra(tfom) -> dict:
    return {
        "availability": number_json(tfom.availability),
        "occupancy": number_json(tfom.occupancy),
        "efficiency": number_json(tfom.efficiency),
        "sla_delivery": number_json(tfom.sla_delivery),
        "sell_through": number_json(tfom.sell_through),
        "price_realization": number_json(tfom.price_realization),
    }
