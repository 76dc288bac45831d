"""The cycle: measure, diagnose, learn from applied levers (see the package), propose levers."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal, localcontext

from django.db import transaction
from django.urls import reverse

from flywheel.domain.kpis import KPI_CONTEXT
from flywheel.domain.loop.baseline import measured_tfom
from flywheel.domain.loop.factors import CAPPED, FACTORS
from flywheel.domain.loop.levers import expected_moves, multiplier_blend, realized_split
from flywheel.models import Cycle, Lever, LeverApplication
from flywheel.selectors.loop.baseline import baseline_get
from flywheel.selectors.loop.cycles import last_full_week
from flywheel.selectors.loop.diagnosis import diagnosis_get, goal_status_get
from flywheel.selectors.loop.levers import goal_in_force, levers_in_force
from flywheel.selectors.loop.shapes import (
    diagnosis_json,
    goal_check_json,
    proposal_json,
    rfc3339,
)
from flywheel.selectors.measurement import kpi_read
from flywheel.selectors.tfom import tfom_json
from flywheel.services.loop.versions import lever_create
from portal import clock
from portal.errors import FieldError
from portal.events import event_raise
from portal.formatting import span_text
from portal.periods import Period, hour_floor
from portal.services import audit_record

log = logging.getLogger(__name__)

ONE = Decimal(1)

HOUR = timedelta(hours=1)


def _evaluate(
    applications: list[LeverApplication], after: dict[str, Decimal | None]
) -> dict[int, dict[str, dict]]:
    """Per application and factor: before, projected and realized (see the module
    docstring); `realized_multiplier` is what the lever's typical learns from."""
    expected = {
        a.pk: expected_moves(
            {f: Decimal(m) for f, m in a.projected.items()}, is_bounded=a.demand != "unlimited"
        )
        for a in applications
    }
    with localcontext(KPI_CONTEXT):
        moves: dict[str, dict[int, Decimal]] = {}  # factor → application id → multiplier
        for application in applications:
            for factor, (multiplier, learns) in expected[application.pk].items():
                if learns:
                    moves.setdefault(factor, {})[application.pk] = multiplier
        result: dict[int, dict[str, dict]] = {a.pk: {} for a in applications}
        for application in applications:
            for factor, (m, learns) in expected[application.pk].items():
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
                entry.update(
                    before=str(b),
                    projected=str(projected),
                    after=str(now_value),
                    projected_uplift=str(projected / b - ONE),
                    realized_uplift=str(ratio - ONE),
                    is_capped=is_capped,
                )
                if not learns:  # it follows the demand: compared, never learned from
                    entry["follows_demand"] = True
                    continue
                group = moves[factor]
                if is_capped and now_value >= ONE:
                    realized = m  # censored at the cap: nothing against the prior
                else:
                    split = realized_split(
                        realized_ratio=ratio,
                        multipliers={str(k): v for k, v in group.items()},
                    )
                    realized = split[str(application.pk)]
                entry.update(realized_multiplier=str(realized), shared_with=len(group) - 1)
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
    effective_from = hour_floor(now)
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
        pool=lever.pool,
        deployment=lever.deployment,
        gpus_withdrawn=lever.gpus_withdrawn,
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


def _proposal_raise(cycle: Cycle, *, now: datetime) -> None:
    """flywheel.proposal, to the operators: what the cycle proposes to meet the goal."""
    proposal = cycle.proposal
    levers = ", ".join(proposal["levers"]) or "none"
    judged = (
        f"judged on {span_text(cycle.period_start, cycle.period_end)} under "
        f"{proposal['demand']} demand"
    )
    summary = (
        f"The weekly cycle proposes {levers} to meet the goal ({judged})"
        if proposal["is_found"]
        else f"The weekly cycle finds no lever set in the catalogue that meets the goal ({judged})"
    )
    event_raise(
        type="flywheel.proposal",
        summary=summary,
        data={
            "cycle_id": cycle.pk,
            "period_start": rfc3339(cycle.period_start),
            "period_end": rfc3339(cycle.period_end),
            "bottleneck": cycle.bottleneck or None,
            "is_goal_met": cycle.is_goal_met,
            "demand": proposal["demand"],
            "levers": proposal["levers"],
            "cost": proposal["cost"],
            "message": proposal["message"],
        },
        link=reverse("flywheel"),
        at=now,
    )


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
    now = now or clock.now()
    if start is None or end is None:
        period = last_full_week(now=now)
        start, end = start or period.start, end or period.end
    if end <= start:
        raise FieldError("to", "must be after from")
    data = kpi_read(Period(start, end))
    goal = goal_in_force(at=now)
    try:
        baseline = baseline_get(start=start, end=end, data=data)
    except FieldError as error:
        cycle, _ = Cycle.objects.update_or_create(
            period_start=start,
            period_end=end,
            defaults={"ran_at": now, "error": error.message, "goal": goal},
        )
        log.warning("flywheel: cycle %s not measured: %s", cycle, error.message)
        return cycle
    measured = measured_tfom(baseline)
    diagnosis = diagnosis_get(start=start, end=end, data=data, baseline=baseline, at=now)
    cycle, evaluated = _cycle_store(
        start=start, end=end, goal=goal, baseline=baseline, measured=measured,
        diagnosis=diagnosis, now=now, by=by,
    )  # fmt: skip
    log.info(
        "flywheel: cycle %s: bottleneck %s, goal %s, %d application(s) measured",
        cycle,
        cycle.bottleneck or "none",
        {None: "none", True: "met", False: "unmet"}[cycle.is_goal_met],
        evaluated,
    )
    return cycle


@transaction.atomic
def _cycle_store(*, start, end, goal, baseline, measured, diagnosis, now, by) -> tuple:
    """The cycle upserted on its period with what it measured, diagnosed and proposed,
    after measuring the applied levers (the proposal uses what they just learned); a new
    proposal is raised. Returns the cycle and how many applications it measured."""
    previous = Cycle.objects.filter(period_start=start, period_end=end).first()
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
    if cycle.proposal and (previous is None or previous.proposal != cycle.proposal):
        _proposal_raise(cycle, now=now)
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
    return cycle, evaluated
