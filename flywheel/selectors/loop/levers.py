"""The levers and goal in force, and the scenario engine's view of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from operator import attrgetter

from flywheel.domain.loop.diagnosis import targets_merge
from flywheel.domain.loop.factors import FACTORS
from flywheel.domain.loop.goals import GoalSpec
from flywheel.domain.loop.levers import LeverEffect, LeverSpec
from flywheel.models import Goal, Lever, LeverApplication
from flywheel.selectors.production import deployment_shares
from portal.versions import version_in_force, versions_in_force

ZERO = Decimal(0)


def levers_in_force(*, at: datetime, include_retired: bool = False) -> list[Lever]:
    """The version of each lever in force at `at` (retired ones only when asked), by slug."""
    versions = Lever.objects.select_related("pool", "deployment__pool")
    latest = versions_in_force(versions, at=at, series=attrgetter("slug"))
    return [lever for slug, lever in sorted(latest.items()) if include_retired or lever.is_active]


def lever_spec(lever: Lever, shares: Mapping[int, Decimal] | None = None) -> LeverSpec:
    """The engine's view of a lever version; one scoped to a deployment reaches the
    deployment's share of its pool's production (`shares`, by deployment id; all of it when
    not given)."""
    pool = lever.scope_pool
    share = Decimal(1)
    if lever.deployment_id is not None and shares is not None:
        share = shares.get(lever.deployment_id, ZERO)
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
        pool=None if pool is None else pool.slug,
        share=share,
        gpus_withdrawn=lever.gpus_withdrawn,
    )


def lever_specs(levers: Iterable[Lever], *, start: datetime, end: datetime) -> dict[str, LeverSpec]:
    """The engine's view of `levers` over the period [start, end) projected (a deployment's
    share of its pool measured over it), by slug."""
    levers = list(levers)
    shares = deployment_shares(
        start=start, end=end, deployment_ids={v.deployment_id for v in levers if v.deployment_id}
    )
    return {lever.slug: lever_spec(lever, shares) for lever in levers}


def proposable_levers(specs: Iterable[LeverSpec]) -> list[LeverSpec]:
    """The levers goal seeking may propose: not applied yet, and moving some factor or
    withdrawing GPUs (one whose multipliers are all 1 is already in place here)."""
    applied = applied_lever_slugs()
    return [spec for spec in specs if spec.slug not in applied and not spec.moves_nothing]


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
