"""The operators' forms: mark a lever applied, run a cycle, add a goal or lever version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.utils.dateparse import parse_datetime

from flywheel.models import Goal, Lever
from flywheel.selectors.loop.levers import goal_in_force, levers_in_force
from flywheel.services.loop.applications import lever_apply
from flywheel.services.loop.cycles import cycle_run
from flywheel.services.loop.versions import goal_create, lever_create
from portal.errors import FieldError
from portal.periods import hour_floor

HOUR = timedelta(hours=1)


def _number(value: str, field: str, errors: dict, *, percent: bool = False) -> Decimal | None:
    value = (value or "").strip().replace(",", "")
    if not value:
        return None
    try:
        number = Decimal(value)
    except InvalidOperation:
        errors[field] = "must be a number"
        return None
    if not number.is_finite():
        errors[field] = "must be a number"
        return None
    if percent and not 0 <= number <= 100:
        errors[field] = "a percentage from 0 to 100 (55 means 55%)"
        return None
    return number / 100 if percent else number


def _free_hour(model, now: datetime, **key) -> datetime:
    """The current whole hour, or the next one free for a new version."""
    moment = hour_floor(now)
    while model.objects.filter(effective_from=moment, **key).exists():
        moment += HOUR
    return moment


def flywheel_form_post(request, now: datetime) -> tuple[dict, str]:
    """Handle an operator's form; returns (field errors, form name)."""
    action = request.POST.get("action", "")
    handler = HANDLERS.get(action)
    if handler is None:
        return {"action": "unknown action"}, action
    errors: dict[str, str] = {}
    try:
        handler(request, now, errors)
    except FieldError as error:
        errors[error.field] = error.message
    return errors, action


def _apply(request, now: datetime, errors: dict) -> None:
    """Mark a lever applied from a date and time (UTC when no zone is given)."""
    applied = parse_datetime(request.POST.get("applied_at", ""))
    if applied is None:
        errors["applied_at"] = "give the date and time (UTC) it went into service"
        return
    if applied.tzinfo is None:
        applied = applied.replace(tzinfo=UTC)
    application = lever_apply(
        slug=request.POST.get("lever", ""),
        applied_at=applied,
        note=request.POST.get("note", "")[:200],
        demand=request.POST.get("demand") or "measured",
        by=request.user,
    )
    messages.success(
        request,
        f"{application.lever.name} recorded as applied on {applied:%Y-%m-%d %H:%M} UTC: "
        "the first cycle measuring a period after it will compare realized with projected.",
    )


def _cycle(request, now: datetime, errors: dict) -> None:
    """Run a cycle over the last whole week."""
    cycle = cycle_run(by=request.user)
    messages.success(
        request,
        f"Cycle over {cycle.period_start:%Y-%m-%d} – {cycle.period_end:%Y-%m-%d} recorded.",
    )


def _goal(request, now: datetime, errors: dict) -> None:
    """A new goal version from the next free hour, keeping the factor targets in force."""
    margin = _number(request.POST.get("min_gross_margin"), "min_gross_margin", errors, percent=True)
    ebitda = _number(request.POST.get("min_ebitda_per_month"), "min_ebitda_per_month", errors)
    tfi = _number(request.POST.get("min_tfi"), "min_tfi", errors, percent=True)
    if errors:
        return
    current = goal_in_force(at=now)
    goal = goal_create(
        effective_from=_free_hour(Goal, now),
        min_gross_margin=margin,
        min_ebitda_per_month=ebitda,
        min_tfi=tfi,
        factor_targets=current.factor_targets if current is not None else {},
        note=request.POST.get("note", "")[:200],
        by=request.user,
    )
    messages.success(request, f"New goal in force from {goal.effective_from:%Y-%m-%d %H:00} UTC.")


def _lever_version(request, now: datetime, errors: dict) -> None:
    """A new version of a lever from the next free hour: its multipliers and costs, the
    rest as in force."""
    slug = request.POST.get("slug", "")
    current = next(
        (v for v in levers_in_force(at=now, include_retired=True) if v.slug == slug), None
    )
    if current is None:
        errors["slug"] = "unknown lever"
        return
    effects = {
        factor: {key: request.POST.get(f"{factor}.{key}", "") for key in ("low", "typical", "high")}
        for factor in current.effects
    }
    one_time = _number(request.POST.get("one_time_cost"), "one_time_cost", errors)
    monthly = _number(request.POST.get("monthly_cost"), "monthly_cost", errors)
    if errors:
        return
    lever = lever_create(
        slug=slug,
        name=current.name,
        description=current.description,
        effects=effects,
        one_time_cost=one_time if one_time is not None else current.one_time_cost,
        monthly_cost=monthly if monthly is not None else current.monthly_cost,
        effective_from=_free_hour(Lever, now, slug=slug),
        observations=current.observations,
        pool=current.pool,
        deployment=current.deployment,
        gpus_withdrawn=current.gpus_withdrawn,
        by=request.user,
    )
    messages.success(
        request,
        f"{lever.name}: new version in force from {lever.effective_from:%Y-%m-%d %H:00} UTC.",
    )


HANDLERS = {"apply": _apply, "cycle": _cycle, "goal": _goal, "lever": _lever_version}
