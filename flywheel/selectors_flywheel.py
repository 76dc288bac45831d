"""Reads of the flywheel: the measured baseline of a period, the levers and goal in force,
the diagnosis (with `flywheel.evidence`) and the scenarios built on them by the pure engines
(`flywheel.diagnosis`, `flywheel.scenarios`), and the JSON shapes of the flywheel API.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext

from django.conf import settings
from django.core.cache import cache
from django.db.models import QuerySet

from portal.periods import Period

from .diagnosis import Diagnosis, Evidence, diagnose, targets_merge
from .evidence import evidence_get
from .kpis import KPI_CONTEXT
from .measurement import FactoryData
from .models import Cycle, Goal, Lever, LeverApplication
from .scenarios import (
    FACTORS,
    Baseline,
    FlywheelError,
    GoalCheck,
    GoalSpec,
    LeverEffect,
    LeverSpec,
    Projection,
    Proposal,
    cheapest_lever_set,
    goal_check,
    measured_tfom,
    project,
)
from .services.costs import cost_models_in_force, factory_costs_in_force
from .services.tfom import TfomError, _engine_cost_model, _measured_energy, tfom_json
from .tfom import DEFAULT_BASELINE_TEF, FactoryCosts, PoolTfomInputs

ZERO = Decimal(0)


def _ratio(numerator, denominator) -> Decimal | None:
    if not denominator:
        return None
    with localcontext(KPI_CONTEXT):
        return Decimal(numerator) / Decimal(denominator)


# ---------------------------------------------------------------- baseline


def baseline_get(
    *,
    start: datetime,
    end: datetime,
    data: FactoryData | None = None,
    baseline_tef: Decimal = DEFAULT_BASELINE_TEF,
) -> Baseline:
    """The factory's measured period as the scenario engine needs it: each pool's KPI sums
    with its cost model in force at `start` and its DCGM energy, the factory costs, minimum
    shortfalls and SLA credits (the same inputs as `tfom_measure`). Raises TfomError naming
    the pool when one has no cost model in force."""
    data = data if data is not None else FactoryData(start=start, end=end)
    ids = sorted(data.pools)
    cost_models = cost_models_in_force(at=start, pool_ids=ids)
    missing = [data.pools[i].slug for i in ids if i not in cost_models]
    if missing:
        raise TfomError(
            "cost_model",
            f"pool {', '.join(missing)} has no cost model in force at "
            f"{start.astimezone(UTC):%Y-%m-%d %H:%M} UTC: add one (POST /api/v1/cost-models)",
        )
    energy = _measured_energy(pool_ids=ids, start=start, end=end)
    pools = []
    for pool_id in ids:
        pool = data.pool_inputs(pool_id, start, end)
        kwh, covered = energy.get(pool_id, (None, None))
        coverage = None
        if covered is not None and pool.calendar_gpu_seconds > 0:
            coverage = min(Decimal(1), _ratio(covered, pool.calendar_gpu_seconds))
        pools.append(
            PoolTfomInputs(
                pool=pool,
                cost_model=_engine_cost_model(cost_models[pool_id]),
                measured_gpu_energy_kwh=kwh,
                measured_energy_coverage=coverage,
            )
        )
    shortfall, credits = data.revenue_adjustments(start=start, end=end)
    recorded = factory_costs_in_force(at=start)
    return Baseline(
        start=start,
        end=end,
        pools=tuple(pools),
        factory_costs=FactoryCosts(
            staff_per_month=recorded.staff_per_month if recorded else ZERO,
            sga_per_month=recorded.sga_per_month if recorded else ZERO,
        ),
        minimum_shortfall=shortfall,
        sla_credits=credits,
        baseline_tef=baseline_tef,
    )


# ---------------------------------------------------------------- levers and goals


def levers_in_force(*, at: datetime, include_retired: bool = False) -> list[Lever]:
    """The version of each lever in force at `at` (retired ones only when asked), by slug."""
    latest: dict[str, Lever] = {}
    for lever in Lever.objects.filter(effective_from__lte=at).order_by("slug", "effective_from"):
        latest[lever.slug] = lever
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


def applied_lever_slugs() -> set[str]:
    """Levers with an application on record: already in service, never proposed again."""
    return set(LeverApplication.objects.values_list("lever__slug", flat=True))


def goal_in_force(*, at: datetime) -> Goal | None:
    return Goal.objects.filter(effective_from__lte=at).order_by("-effective_from").first()


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


# ---------------------------------------------------------------- diagnosis


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
    (default `end`) over the kpis.md defaults. Raises TfomError when a pool has no cost
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
        applied = applied_lever_slugs()
        proposal = cheapest_lever_set(
            baseline=baseline,
            goal=spec,
            levers=[lever_spec(v) for v in levers_in_force(at=now) if v.slug not in applied],
            measured=measured,
        )
    return GoalStatus(goal=goal, check=check, proposal=proposal)


def cycle_list() -> QuerySet[Cycle]:
    return Cycle.objects.select_related("goal").prefetch_related("evaluations__lever")


def application_list() -> QuerySet[LeverApplication]:
    return LeverApplication.objects.select_related("lever", "evaluated_by", "updated_lever")


def last_full_week(*, now: datetime) -> Period:
    """The 7 whole UTC days before today: a cycle's default period."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return Period(today - timedelta(days=7), today)


# ---------------------------------------------------------------- JSON shapes


CENT = Decimal("0.01")


def _money(value: Decimal | None) -> str | None:
    return None if value is None else str(value.quantize(CENT))


def _number(value) -> float | None:
    return None if value is None else float(value)


def _cell(value, unit: str):
    if value is None:
        return None
    if unit == "money":
        return _money(value)
    if unit in ("tokens", "count"):
        return int(value)
    if isinstance(value, Decimal):
        return float(value)
    return value


def evidence_json(evidence: Evidence | None) -> dict | None:
    if evidence is None:
        return None
    units = {c.key: c.unit for c in evidence.columns}
    return {
        "summary": evidence.summary,
        "columns": [{"key": c.key, "label": c.label, "unit": c.unit} for c in evidence.columns],
        "rows": [
            {key: _cell(value, units.get(key, "")) for key, value in row.items()}
            for row in evidence.rows
        ],
    }


def diagnosis_json(diagnosis: Diagnosis) -> list[dict]:
    """The ranked factors: value, target, monthly gains at target, evidence."""
    return [
        {
            "rank": index + 1,
            "factor": f.factor,
            "symbol": f.symbol,
            "label": f.label,
            "value": _number(f.value),
            "target": _number(f.target),
            "is_at_target": f.is_at_target,
            "ebitda_gain_per_month": _money(f.ebitda_gain_per_month),
            "revenue_gain_per_month": _money(f.revenue_gain_per_month),
            "energy_cost_change_per_month": _money(f.energy_cost_change_per_month),
            "projected_tfi": _number(f.projected_tfi),
            "evidence": evidence_json(f.evidence),
        }
        for index, f in enumerate(diagnosis.factors)
    ]


def goal_check_json(check: GoalCheck) -> list[dict]:
    return [
        {
            "key": c.key,
            "label": c.label,
            "required": _money(c.required) if c.key == "ebitda_per_month" else _number(c.required),
            "actual": _money(c.actual) if c.key == "ebitda_per_month" else _number(c.actual),
            "is_met": c.is_met,
        }
        for c in check.criteria
    ]


def projection_summary(projection: Projection) -> dict:
    """The headline figures of a projection, per month where money."""
    t = projection.tfom
    return {
        "tef": _number(t.tef),
        "tfi": _number(t.tfi),
        "gross_margin": _number(t.gross_margin),
        "revenue_per_month": _money(projection.per_month(t.revenue)),
        "ebitda_per_month": _money(projection.per_month(t.ebitda)),
        "energy_cost_per_month": _money(projection.per_month(t.energy_cost)),
        "opex_per_month": _money(projection.per_month(t.opex)),
    }


def proposal_json(proposal: Proposal) -> dict:
    return {
        "is_found": proposal.is_found,
        "levers": list(proposal.levers),
        "cost": _money(proposal.cost),
        "message": proposal.message,
        "subsets_checked": proposal.subsets_checked,
        "is_exhaustive": proposal.is_exhaustive,
        "projected": projection_summary(proposal.projection) if proposal.projection else None,
    }


def diagnosis_response(diagnosis: Diagnosis, *, rating_errors: dict | None = None) -> dict:
    """GET /api/v1/flywheel/diagnosis: the period, measured figures, targets, the
    bottleneck and the ranked factors with their evidence."""
    bottleneck = diagnosis.bottleneck
    return {
        "from": _rfc3339(diagnosis.start),
        "to": _rfc3339(diagnosis.end),
        "currency": settings.FACTORY_CURRENCY,
        "bottleneck": bottleneck.factor if bottleneck else None,
        "ebitda_per_month": _money(diagnosis.ebitda_per_month),
        "targets": {factor: float(value) for factor, value in diagnosis.targets.items()},
        "factors": diagnosis_json(diagnosis),
        "measured": tfom_json(diagnosis.measured),
        "rating_errors": rating_errors or {},
    }


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------- scenarios

BASELINE_TTL = 3600  # seconds a page's measured period is kept for its slider moves


def baseline_remember(baseline: Baseline) -> str:
    """Keep a measured period for an hour under a random key (the flywheel page passes it
    with each scenario, so moving a slider does not measure the period again)."""
    key = secrets.token_urlsafe(16)
    cache.set(f"flywheel:baseline:{key}", baseline, BASELINE_TTL)
    return key


BASELINE_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")


def baseline_recall(*, key: str, start: datetime, end: datetime) -> Baseline | None:
    if not BASELINE_KEY.fullmatch(key or ""):  # a key we issued, or nothing to look up
        return None
    baseline = cache.get(f"flywheel:baseline:{key}")
    if isinstance(baseline, Baseline) and baseline.start == start and baseline.end == end:
        return baseline
    return None


def scenario_get(
    *,
    start: datetime,
    end: datetime,
    lever_slugs: list[str],
    targets: dict[str, Decimal],
    estimate: str = "typical",
    goal: GoalSpec | None = None,
    baseline_key: str = "",
    now: datetime,
) -> dict:
    """POST /api/v1/flywheel/scenarios: the projection of [start, end) with the levers in
    force at `now` named by `lever_slugs` and the factor `targets`, its low-high range, the
    goal check (typical multipliers) and, when unmet, the cheapest lever set that meets it.
    Raises TfomError for a pool without a cost model, FlywheelError for an unknown lever."""
    baseline = baseline_recall(key=baseline_key, start=start, end=end)
    if baseline is None:
        baseline = baseline_get(start=start, end=end)
    measured = measured_tfom(baseline)
    catalogue = {lever.slug: lever for lever in levers_in_force(at=now)}
    unknown = [slug for slug in lever_slugs if slug not in catalogue]
    if unknown:
        raise FlywheelError("levers", f"no active lever {', '.join(unknown)} in the catalogue")
    chosen = [lever_spec(catalogue[slug]) for slug in dict.fromkeys(lever_slugs)]
    projections = {
        name: project(
            baseline=baseline, levers=chosen, targets=targets, estimate=name, measured=measured
        )
        for name in {"low", "typical", "high", estimate}
    }
    projection = projections[estimate]
    typical = projections["typical"]
    goal_in = goal if goal is not None else goal_spec(goal_in_force(at=now))
    check = (
        None
        if goal_in.is_empty
        else goal_check(goal=goal_in, tfom=typical.tfom, start=start, end=end)
    )
    proposal = None
    if check is not None and not check.is_met:
        applied = applied_lever_slugs()
        proposal = cheapest_lever_set(
            baseline=baseline,
            goal=goal_in,
            levers=[lever_spec(v) for slug, v in catalogue.items() if slug not in applied],
            targets=targets,
            measured=measured,
        )
    return {
        "from": _rfc3339(start),
        "to": _rfc3339(end),
        "currency": settings.FACTORY_CURRENCY,
        "estimate": estimate,
        "levers": [lever.slug for lever in chosen],
        "targets": {factor: float(value) for factor, value in targets.items()},
        "factors": {
            factor: {
                "measured": _number(getattr(measured, factor)),
                "projected": _number(getattr(projection.tfom, factor)),
            }
            for factor in FACTORS
        },
        "measured": {**projection_summary(_identity(baseline, measured)), **_kpi_extra(measured)},
        "projected": {**projection_summary(projection), **_kpi_extra(projection.tfom)},
        "range": {
            name: projection_summary(projections[name]) for name in ("low", "typical", "high")
        },
        "lever_costs": {
            "one_time": _money(projection.one_time_cost),
            "monthly": _money(projection.monthly_cost),
            "total": _money(projection.cost),
        },
        "figures": tfom_json(projection.tfom),
        "goal": (
            None if check is None else {"is_met": check.is_met, "criteria": goal_check_json(check)}
        ),
        "proposal": proposal_json(proposal) if proposal is not None else None,
    }


def _identity(baseline: Baseline, measured) -> Projection:
    return Projection(start=baseline.start, end=baseline.end, measured=measured, tfom=measured)


def _kpi_extra(tfom) -> dict:
    return {
        "availability": _number(tfom.availability),
        "occupancy": _number(tfom.occupancy),
        "efficiency": _number(tfom.efficiency),
        "sla_delivery": _number(tfom.sla_delivery),
        "sell_through": _number(tfom.sell_through),
        "price_realization": _number(tfom.price_realization),
    }
