"""Writes of the flywheel: lever and goal versions (effective-dated, create-only once in
force), lever applications, and the cycle (measure → diagnose → learn from applied levers
→ check the goal → propose levers), upserted on its period. Every write leaves an audit
entry.

How a lever's typical multiplier learns (kpis.md section 6, step 4). When a lever is
marked applied, the factors measured over the 7 days before it and the version's typical
multipliers are recorded. The first cycle whose measured period starts at or after the
application compares each factor it moves: realized ratio R = after / before, projected
ratio = min(1, before × m) / before (σ, s, ρ, α, β capped at 1). Levers evaluated in the
same cycle on the same factor share R in proportion to their projected log-uplifts
(`scenarios.realized_split`). A projection capped at 1 that the factor reached tells
nothing against the prior, so it confirms m. The lever then gets a new version whose
typical multiplier is the running mean of the published prior (weighing as one
observation) and every realized multiplier: typical' = (typical × (1 + n) + realized) /
(2 + n), n the observations so far (`scenarios.multiplier_blend`); low and high widen to
keep low ≤ typical ≤ high.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.services import audit_record, audit_snapshot

from ..kpis import KPI_CONTEXT
from ..measurement import FactoryData
from ..models import Cycle, Goal, Lever, LeverApplication
from ..scenarios import (
    CAPPED,
    FACTORS,
    FlywheelError,
    measured_tfom,
    multiplier_blend,
    realized_split,
)
from ..selectors_flywheel import (
    baseline_get,
    diagnosis_get,
    diagnosis_json,
    goal_check_json,
    goal_in_force,
    goal_status_get,
    last_full_week,
    levers_in_force,
    proposal_json,
)
from .tfom import TfomError, tfom_json

log = logging.getLogger(__name__)
ONE = Decimal(1)
HOUR = timedelta(hours=1)
BASELINE_DAYS = 7  # an application's "before": the 7 days up to it
ESTIMATE_KEYS = ("low", "typical", "high")


def _hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _check_whole_hour(moment: datetime) -> None:
    if moment.minute or moment.second or moment.microsecond:
        raise FlywheelError("effective_from", "must be a whole UTC hour (minutes and seconds 0)")


def _check_currency(currency: str) -> None:
    if currency != settings.FACTORY_CURRENCY:
        raise FlywheelError(
            "currency",
            f"levers and goals are kept in the factory currency {settings.FACTORY_CURRENCY}",
        )


def _decimal(value, field: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        raise FlywheelError(field, "must be a number") from None
    if not number.is_finite():
        raise FlywheelError(field, "must be a finite number")
    return number


def effects_clean(effects) -> dict[str, dict[str, str]]:
    """Validate a lever's effects: {factor: {"low", "typical", "high"}}, multipliers with
    0 < low ≤ typical ≤ high; returned with the numbers as plain decimal strings."""
    if not isinstance(effects, dict) or not effects:
        raise FlywheelError("effects", "name at least one factor and its multipliers")
    cleaned = {}
    for factor, values in effects.items():
        if factor not in FACTORS:
            raise FlywheelError(
                f"effects.{factor}", f"unknown factor; use one of {', '.join(FACTORS)}"
            )
        if not isinstance(values, dict) or set(values) != set(ESTIMATE_KEYS):
            raise FlywheelError(f"effects.{factor}", "give exactly low, typical and high")
        numbers = {key: _decimal(values[key], f"effects.{factor}.{key}") for key in ESTIMATE_KEYS}
        if not 0 < numbers["low"] <= numbers["typical"] <= numbers["high"]:
            raise FlywheelError(f"effects.{factor}", "multipliers need 0 < low ≤ typical ≤ high")
        cleaned[factor] = {key: format(numbers[key].normalize(), "f") for key in ESTIMATE_KEYS}
    return dict(sorted(cleaned.items(), key=lambda kv: FACTORS.index(kv[0])))


@transaction.atomic
def lever_create(
    *,
    slug: str,
    name: str,
    description: str,
    effects: dict,
    one_time_cost: Decimal,
    monthly_cost: Decimal,
    effective_from: datetime,
    is_active: bool = True,
    source: str = Lever.Source.OPERATOR,
    observations: int = 0,
    currency: str | None = None,
    by=None,
) -> Lever:
    """Add a lever version (a new lever, a change, or a retirement with is_active False);
    another version of the slug at the same instant is a conflict."""
    currency = currency or settings.FACTORY_CURRENCY
    _check_currency(currency)
    _check_whole_hour(effective_from)
    if one_time_cost < 0:
        raise FlywheelError("one_time_cost", "must not be negative")
    if monthly_cost < 0:
        raise FlywheelError("monthly_cost", "must not be negative")
    if not description.strip():
        raise FlywheelError(
            "description", "say how the lever works and where its multipliers come from"
        )
    cleaned = effects_clean(effects)
    message = f"lever {slug} already has a version from that instant"
    if Lever.objects.filter(slug=slug, effective_from=effective_from).exists():
        raise FlywheelError("effective_from", message)
    try:
        with transaction.atomic():
            lever = Lever.objects.create(
                slug=slug,
                name=name,
                description=description,
                effects=cleaned,
                one_time_cost=one_time_cost,
                monthly_cost=monthly_cost,
                currency=currency,
                is_active=is_active,
                source=source,
                observations=observations,
                effective_from=effective_from,
                created_by=by if by is not None and by.is_authenticated else None,
            )
    except IntegrityError:
        raise FlywheelError("effective_from", message) from None
    audit_record(
        actor=by,
        action="lever.create",
        object_type="lever",
        object_id=lever.pk,
        after=audit_snapshot(lever),
    )
    return lever


@transaction.atomic
def goal_create(
    *,
    effective_from: datetime,
    min_gross_margin: Decimal | None = None,
    min_ebitda_per_month: Decimal | None = None,
    min_tfi: Decimal | None = None,
    factor_targets: dict | None = None,
    note: str = "",
    currency: str | None = None,
    by=None,
) -> Goal:
    """Add a goal version; at least one criterion; ratios in [0, 1]; factor targets in
    [0, 1] (η: positive)."""
    currency = currency or settings.FACTORY_CURRENCY
    _check_currency(currency)
    _check_whole_hour(effective_from)
    if min_gross_margin is None and min_ebitda_per_month is None and min_tfi is None:
        raise FlywheelError(
            "min_gross_margin", "set at least one of gross margin, EBITDA per month or TFI"
        )
    if min_gross_margin is not None and min_gross_margin > 1:
        raise FlywheelError("min_gross_margin", "a ratio at most 1 (0.55 = 55%)")
    if min_tfi is not None and not 0 <= min_tfi <= 1:
        raise FlywheelError("min_tfi", "a ratio between 0 and 1 (0.35 = 35%)")
    targets = {}
    for factor, value in (factor_targets or {}).items():
        if factor not in FACTORS:
            raise FlywheelError(f"factor_targets.{factor}", "unknown factor")
        number = _decimal(value, f"factor_targets.{factor}")
        if number <= 0 or (factor in CAPPED and number > 1):
            raise FlywheelError(
                f"factor_targets.{factor}",
                "must be in (0, 1]" if factor in CAPPED else "must be positive",
            )
        targets[factor] = format(number.normalize(), "f")
    message = "a goal already starts at that instant"
    if Goal.objects.filter(effective_from=effective_from).exists():
        raise FlywheelError("effective_from", message)
    try:
        with transaction.atomic():
            goal = Goal.objects.create(
                min_gross_margin=min_gross_margin,
                min_ebitda_per_month=min_ebitda_per_month,
                min_tfi=min_tfi,
                factor_targets=targets,
                note=note,
                currency=currency,
                effective_from=effective_from,
                created_by=by if by is not None and by.is_authenticated else None,
            )
    except IntegrityError:
        raise FlywheelError("effective_from", message) from None
    audit_record(
        actor=by,
        action="goal.create",
        object_type="goal",
        object_id=goal.pk,
        after=audit_snapshot(goal),
    )
    return goal


@transaction.atomic
def version_delete(*, version: Lever | Goal, by=None) -> None:
    """Delete a lever or goal version before it takes effect (a mistake caught in time);
    one in force is never changed: add a new version instead."""
    locked = type(version).objects.select_for_update().get(pk=version.pk)
    if locked.effective_from <= timezone.now():
        raise FlywheelError(
            "effective_from", "in force: add a new version instead of deleting this one"
        )
    object_type = "lever" if isinstance(locked, Lever) else "goal"
    before, pk = audit_snapshot(locked), locked.pk
    locked.delete()
    audit_record(
        actor=by,
        action=f"{object_type}.delete",
        object_type=object_type,
        object_id=pk,
        before=before,
    )


def _factor_strings(kpis) -> dict[str, str]:
    return {f: str(getattr(kpis, f)) for f in FACTORS if getattr(kpis, f) is not None}


def lever_apply(
    *,
    slug: str,
    applied_at: datetime,
    note: str = "",
    now: datetime | None = None,
    data: FactoryData | None = None,
    by=None,
) -> LeverApplication:
    """Record that lever `slug` went into service at `applied_at` (not in the future),
    with the factors measured over the 7 days before it and the typical multipliers of the
    version in force then: what the next cycle will compare against."""
    now = now or timezone.now()
    if applied_at.tzinfo is None:
        raise FlywheelError("applied_at", "must include a time zone")
    if applied_at > now:
        raise FlywheelError("applied_at", "must not be in the future: record it once done")
    # The version in force then; one added to the catalogue since is taken as it is now.
    lever = next((v for v in levers_in_force(at=applied_at) if v.slug == slug), None) or next(
        (v for v in levers_in_force(at=now) if v.slug == slug), None
    )
    if lever is None:
        raise FlywheelError("lever", f"no active lever {slug!r} in the catalogue")
    if LeverApplication.objects.filter(lever__slug=slug).exists():
        raise FlywheelError("lever", f"lever {slug} is already recorded as applied")
    end = _hour_floor(applied_at)
    start = end - timedelta(days=BASELINE_DAYS)
    data = data if data is not None else FactoryData(start=start, end=end)
    before = data.kpis(scope="factory", start=start, end=end)
    with transaction.atomic():
        application = LeverApplication.objects.create(
            lever=lever,
            applied_at=applied_at,
            note=note,
            baseline_start=start,
            baseline_end=end,
            baseline_factors=_factor_strings(before),
            projected={factor: values["typical"] for factor, values in lever.effects.items()},
            created_by=by if by is not None and by.is_authenticated else None,
        )
        audit_record(
            actor=by,
            action="lever.apply",
            object_type="lever_application",
            object_id=application.pk,
            after=audit_snapshot(application),
        )
    return application


@transaction.atomic
def lever_application_delete(*, application: LeverApplication, by=None) -> None:
    """Withdraw an application recorded by mistake, before a cycle has measured it."""
    locked = LeverApplication.objects.select_for_update().get(pk=application.pk)
    if locked.evaluated_by_id is not None:
        raise FlywheelError("evaluated_by", "already measured by a cycle: it stays on record")
    before, pk = audit_snapshot(locked), locked.pk
    locked.delete()
    audit_record(
        actor=by,
        action="lever.unapply",
        object_type="lever_application",
        object_id=pk,
        before=before,
    )


# ---------------------------------------------------------------- the cycle


def _evaluate(
    applications: list[LeverApplication], after: dict[str, Decimal | None]
) -> dict[int, dict[str, dict]]:
    """Per application and factor: before, projected and realized (see the module
    docstring); `realized_multiplier` is what the lever's typical learns from."""
    with localcontext(KPI_CONTEXT):
        moves: dict[str, dict[int, Decimal]] = {}  # factor → application id → multiplier
        for application in applications:
            for factor, multiplier in application.projected.items():
                moves.setdefault(factor, {})[application.pk] = Decimal(multiplier)
        result: dict[int, dict[str, dict]] = {a.pk: {} for a in applications}
        for application in applications:
            for factor, text in application.projected.items():
                m = Decimal(text)
                before = application.baseline_factors.get(factor)
                now_value = after.get(factor)
                entry: dict = {"projected_multiplier": str(m)}
                result[application.pk][factor] = entry
                if before is None or now_value is None or Decimal(before) <= 0 or now_value <= 0:
                    entry["note"] = "not measurable: no production before or after"
                    continue
                b = Decimal(before)
                projected = b * m
                is_capped = factor in CAPPED and projected > ONE
                if is_capped:
                    projected = ONE
                ratio = now_value / b
                group = moves[factor]
                if is_capped and now_value >= ONE:
                    realized = m  # censored at the cap: nothing against the prior
                else:
                    split = realized_split(
                        realized_ratio=ratio,
                        multipliers={str(k): v for k, v in group.items()},
                    )
                    realized = split[str(application.pk)]
                entry.update(
                    before=str(b),
                    projected=str(projected),
                    after=str(now_value),
                    projected_uplift=str(projected / b - ONE),
                    realized_uplift=str(ratio - ONE),
                    realized_multiplier=str(realized),
                    is_capped=is_capped,
                    shared_with=len(group) - 1,
                )
        return result


def _learned_version(lever: Lever, realized: dict[str, dict], now: datetime, by) -> Lever | None:
    """A new version of `lever` whose typical multipliers blend in what was realized."""
    effects = {factor: dict(values) for factor, values in lever.effects.items()}
    changed = False
    for factor, entry in realized.items():
        if "realized_multiplier" not in entry or factor not in effects:
            continue
        values = effects[factor]
        prior = Decimal(values["typical"])
        updated = multiplier_blend(
            prior=prior,
            realized=Decimal(entry["realized_multiplier"]),
            observations=lever.observations,
        ).quantize(Decimal("0.0001"))
        updated = Decimal(format(updated.normalize(), "f"))
        entry["prior_typical"] = str(prior)
        entry["updated_typical"] = str(updated)
        values["typical"] = str(updated)
        values["low"] = str(min(Decimal(values["low"]), updated))
        values["high"] = str(max(Decimal(values["high"]), updated))
        changed = True
    if not changed:
        return None
    effective_from = _hour_floor(now)
    while Lever.objects.filter(slug=lever.slug, effective_from=effective_from).exists():
        effective_from += HOUR
    return lever_create(
        slug=lever.slug,
        name=lever.name,
        description=lever.description,
        effects=effects,
        one_time_cost=lever.one_time_cost,
        monthly_cost=lever.monthly_cost,
        effective_from=effective_from,
        is_active=lever.is_active,
        source=Lever.Source.LEARNED,
        observations=lever.observations + 1,
        currency=lever.currency,
        by=by,
    )


def _applications_evaluate(*, cycle: Cycle, measured, now: datetime, by=None) -> int:
    """Measure every application the cycle's period comes wholly after, once; blend what
    was realized into each lever's typical multiplier. Returns how many were evaluated."""
    pending = list(
        LeverApplication.objects.select_for_update()
        .select_related("lever")
        .filter(evaluated_by__isnull=True, applied_at__lte=cycle.period_start)
        .order_by("applied_at", "id")
    )
    if not pending:
        return 0
    after = {factor: getattr(measured, factor) for factor in FACTORS}
    realized = _evaluate(pending, after)
    in_force = {lever.slug: lever for lever in levers_in_force(at=now, include_retired=True)}
    for application in pending:
        lever = in_force.get(application.lever.slug, application.lever)
        learned = _learned_version(lever, realized[application.pk], now, by)
        if learned is not None:
            in_force[lever.slug] = learned
        application.realized = realized[application.pk]
        application.evaluated_by = cycle
        application.updated_lever = learned
        application.save(update_fields=["realized", "evaluated_by", "updated_lever"])
    return len(pending)


def cycle_run(
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    now: datetime | None = None,
    by=None,
) -> Cycle:
    """One turn of the flywheel over [start, end) (default: the 7 whole UTC days before
    today): measure, diagnose with evidence, measure applied levers and update their
    multipliers, check the goal in force and, when unmet, propose the cheapest lever set.
    Upserted on the period: running it twice rewrites the same cycle, and an application
    is measured once."""
    now = now or timezone.now()
    if start is None or end is None:
        period = last_full_week(now=now)
        start, end = start or period.start, end or period.end
    if end <= start:
        raise FlywheelError("to", "must be after from")
    data = FactoryData(start=start, end=end)
    goal = goal_in_force(at=now)
    try:
        baseline = baseline_get(start=start, end=end, data=data)
    except TfomError as error:
        cycle, _ = Cycle.objects.update_or_create(
            period_start=start,
            period_end=end,
            defaults={"ran_at": now, "error": error.message, "goal": goal},
        )
        log.warning("flywheel: cycle %s not measured: %s", cycle, error.message)
        return cycle
    measured = measured_tfom(baseline)
    diagnosis = diagnosis_get(start=start, end=end, data=data, baseline=baseline, at=now)
    with transaction.atomic():
        cycle, _ = Cycle.objects.update_or_create(
            period_start=start,
            period_end=end,
            defaults={"ran_at": now, "error": "", "goal": goal},
        )
        evaluated = _applications_evaluate(cycle=cycle, measured=measured, now=now, by=by)
        # After the evaluation: the proposal uses what the levers just learned.
        status = goal_status_get(baseline=baseline, now=now, measured=measured)
        cycle.figures = tfom_json(measured)
        cycle.diagnosis = diagnosis_json(diagnosis)
        cycle.bottleneck = diagnosis.bottleneck.factor if diagnosis.bottleneck else ""
        cycle.goal_check = goal_check_json(status.check) if status.check else []
        cycle.is_goal_met = status.check.is_met if status.check else None
        cycle.proposal = proposal_json(status.proposal) if status.proposal else None
        cycle.save()
        audit_record(
            actor=by,
            action="flywheel.cycle",
            object_type="cycle",
            object_id=cycle.pk,
            after={
                "period_start": start.isoformat(),
                "period_end": end.isoformat(),
                "bottleneck": cycle.bottleneck,
                "is_goal_met": cycle.is_goal_met,
                "applications_measured": evaluated,
            },
        )
    log.info(
        "flywheel: cycle %s: bottleneck %s, goal %s, %d application(s) measured",
        cycle,
        cycle.bottleneck or "none",
        {None: "none", True: "met", False: "unmet"}[cycle.is_goal_met],
        evaluated,
    )
    return cycle
