"""The levers and goal in force, and the scenario engine's view of them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from operator import attrgetter

from flywheel.domain.loop.diagnosis import targets_merge
from flywheel.domain.loop.factors import FACTORS
from flywheel.domain.loop.goals import GoalSpec
from flywheel.domain.loop.levers import LeverEffect, LeverSpec
from flywheel.models import Goal, Lever, LeverApplication
from portal.versions import version_in_force, versions_in_force


def levers_in_force(*, at: datetime, include_retired: bool = False) -> list[Lever]:
    """The version of each lever in force at `at` (retired ones only when asked), by slug."""
    latest = versions_in_force(Lever.objects.all(), at=at, series=attrgetter("slug"))
    return [lever for slug, lever in sorted(latest.items()) if include_retired or lever.is_active]


def lever_spec(lever: Lever) -> LeverSpec:
    """The engine's view of a lever version."""
    return LeverSpec(
        slug=lever.slug,
        name=lever.name,
        effects=tuple(
            LeverEffect(
                factor=factor,
                low=Decimal(str(values["low"])),
                typical=Decimal(str(values["typical"])),
                high=Decimal(str(values["high"])),
            )
            for factor, values in sorted(lever.effects.items(), key=lambda kv: FACTORS.index(kv[0]))
        ),
        one_time_cost=lever.one_time_cost,
        monthly_cost=lever.monthly_cost,
    )


def proposable_levers(levers: Iterable[Lever]) -> list[LeverSpec]:
    """The levers goal seeking may propose: not applied yet, and moving some factor (one
    whose multipliers are all 1 is already in place here)."""
    applied = applied_lever_slugs()
    specs = [lever_spec(v) for v in levers if v.slug not in applied]
    return [spec for spec in specs if not spec.moves_nothing]


def applied_lever_slugs() -> set[str]:
    """Levers with an application on record: already in service, never proposed again."""
    return set(LeverApplication.objects.values_list("lever__slug", flat=True))


def goal_in_force(*, at: datetime) -> Goal | None:
    return version_in_force(Goal.objects.all(), at=at)


def goal_spec(goal: Goal | None) -> GoalSpec:
    if goal is None:
        return GoalSpec()
    return GoalSpec(
        min_gross_margin=goal.min_gross_margin,
        min_ebitda_per_month=goal.min_ebitda_per_month,
        min_tfi=goal.min_tfi,
    )


def goal_targets(goal: Goal | None) -> dict[str, Decimal]:
    """The factor targets of the diagnosis: the defaults with the goal's overrides."""
    overrides = {} if goal is None else goal.factor_targets or {}
    return targets_merge({factor: Decimal(str(value)) for factor, value in overrides.items()})
