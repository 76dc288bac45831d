"""Goals: checking a TFOM against a goal, and seeking the cheapest lever set that meets it."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from flywheel.domain.kpis import ZERO
from flywheel.domain.loop.baseline import Baseline, measured_tfom
from flywheel.domain.loop.demand import MEASURED, Demand, per_month
from flywheel.domain.loop.levers import LeverSpec
from flywheel.domain.loop.projection import Projection, project
from flywheel.domain.tfom import Tfom

SEARCH_LIMIT = 4096  # lever subsets tried at most when seeking the cheapest set


@dataclass(frozen=True, kw_only=True)
class GoalSpec:
    """What the factory aims for; a criterion left None is not checked."""

    min_gross_margin: Decimal | None = None  # ratio
    min_ebitda_per_month: Decimal | None = None  # money per month
    min_tfi: Decimal | None = None  # ratio

    @property
    def is_empty(self) -> bool:
        return (
            self.min_gross_margin is None
            and self.min_ebitda_per_month is None
            and (self.min_tfi is None)
        )


@dataclass(frozen=True, kw_only=True)
class Criterion:
    key: str  # gross_margin | ebitda_per_month | tfi
    label: str
    required: Decimal
    actual: Decimal | None
    is_met: bool


@dataclass(frozen=True, kw_only=True)
class GoalCheck:
    criteria: tuple[Criterion, ...]

    @property
    def is_met(self) -> bool:
        return all(c.is_met for c in self.criteria)


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """The cheapest lever set that meets a goal, or why there is none."""

    is_found: bool
    levers: tuple[str, ...]
    cost: Decimal  # one-time + 12 × monthly
    projection: Projection | None
    subsets_checked: int
    is_exhaustive: bool  # False: the search stopped at its limit before trying every set
    message: str
    demand: Demand = MEASURED  # the demand every set was projected under


def goal_check(*, goal: GoalSpec, tfom: Tfom, start: datetime, end: datetime) -> GoalCheck:
    """Compare a (measured or projected) TFOM with each criterion the goal sets."""
    wanted = (
        ("gross_margin", "gross margin", goal.min_gross_margin, lambda: tfom.gross_margin),
        (
            "ebitda_per_month",
            "EBITDA per month",
            goal.min_ebitda_per_month,
            lambda: per_month(tfom.ebitda, start=start, end=end),
        ),
        ("tfi", "TFI", goal.min_tfi, lambda: tfom.tfi),
    )
    criteria = []
    for key, label, required, actual_of in wanted:
        if required is None:
            continue
        actual = actual_of()
        criteria.append(
            Criterion(
                key=key,
                label=label,
                required=required,
                actual=actual,
                is_met=actual is not None and actual >= required,
            )
        )
    return GoalCheck(criteria=tuple(criteria))


def cheapest_lever_set(
    *,
    baseline: Baseline,
    goal: GoalSpec,
    levers: Sequence[LeverSpec],
    targets: Mapping[str, Decimal] | None = None,
    measured: Tfom | None = None,
    demand: Demand = MEASURED,
    limit: int = SEARCH_LIMIT,
) -> Proposal:
    """The lever set of least cost (one-time + 12 × monthly; ties: fewer levers, then slugs)
    whose projection at typical multipliers under `demand` (growth: its month 12) meets
    `goal`, or a message saying none does.

    Best-first search: levers sorted by cost, subsets grown only with costlier levers, so
    subsets leave the heap in order of cost and the first one that meets the goal is the
    cheapest. At most `limit` subsets are projected."""
    if goal.is_empty:
        return _not_found(checked=0, is_exhaustive=True, message="no goal is set", demand=demand)
    measured = measured if measured is not None else measured_tfom(baseline)
    ordered = sorted(levers, key=lambda lever: (lever.cost, lever.slug))
    if len({lever.slug for lever in ordered}) != len(ordered):
        raise ValueError("each lever may appear once")
    heap: list[tuple[Decimal, int, tuple[str, ...], tuple[int, ...]]] = [(ZERO, 0, (), ())]
    checked = 0
    while heap:
        if checked >= limit:
            return _not_found(
                checked=checked,
                is_exhaustive=False,
                message=f"no lever set met the goal within the first {limit:,} sets tried "
                "(cheapest first); narrow the catalogue or relax the goal",
                demand=demand,
            )
        cost, _, slugs, indices = heapq.heappop(heap)
        chosen = [ordered[i] for i in indices]
        projection = project(
            baseline=baseline, levers=chosen, targets=targets, measured=measured, demand=demand
        )
        checked += 1
        if goal_check(
            goal=goal, tfom=projection.tfom, start=baseline.start, end=baseline.end
        ).is_met:
            names = ", ".join(slugs) if slugs else "no lever"
            return Proposal(
                is_found=True,
                levers=slugs,
                cost=cost,
                projection=projection,
                subsets_checked=checked,
                is_exhaustive=True,
                message=f"cheapest set meeting the goal: {names}",
                demand=demand,
            )
        for j in range((indices[-1] + 1) if indices else 0, len(ordered)):
            grown = (*indices, j)
            heapq.heappush(
                heap,
                (
                    cost + ordered[j].cost,
                    len(grown),
                    tuple(sorted(ordered[i].slug for i in grown)),
                    grown,
                ),
            )
    return _not_found(
        checked=checked,
        is_exhaustive=True,
        message="no set of the available levers meets the goal, even all of them together",
        demand=demand,
    )


def _not_found(*, checked: int, is_exhaustive: bool, message: str, demand: Demand) -> Proposal:
    """A proposal of no lever set, after `checked` subsets were projected."""
    return Proposal(
        is_found=False,
        levers=(),
        cost=ZERO,
        projection=None,
        subsets_checked=checked,
        is_exhaustive=is_exhaustive,
        message=message,
        demand=demand,
    )
