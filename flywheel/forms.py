"""The operators' forms of the flywheel page (Django forms): mark a lever applied, queue a
cycle, add a goal or lever version. Each writes through the service the API calls (a cycle
through the job the API queues), so a refused value reads as the API's message."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django import forms
from django.contrib import messages

from flywheel.models import Goal, Lever
from flywheel.selectors.loop.cycles import last_full_week
from flywheel.selectors.loop.levers import goal_in_force, levers_in_force
from flywheel.services.loop.applications import lever_apply
from flywheel.services.loop.versions import goal_create, lever_create
from flywheel.tasks import cycle_queue
from portal.errors import FieldError
from portal.formatting import rfc3339, span_text
from portal.forms import UTC_EXAMPLE, MoneyFormField, utc_datetime_field
from portal.periods import hour_floor

HOUR = timedelta(hours=1)


class NumberField(forms.DecimalField):
    """A number as typed (thousands separators allowed), refused as the API refuses one."""

    default_error_messages = {"invalid": "A valid number is required."}  # DRF's wording

    def to_python(self, value):
        return super().to_python(value.replace(",", "") if isinstance(value, str) else value)


class PercentField(NumberField):
    """A percentage as shown on the page (55 means 55%), cleaned to the fraction the API
    and the services take."""

    RANGE = "a percentage from 0 to 100 (55 means 55%%)"  # %% : Django formats it

    def __init__(self, **kwargs) -> None:
        messages = {"min_value": self.RANGE, "max_value": self.RANGE}
        super().__init__(min_value=0, max_value=100, error_messages=messages, **kwargs)

    def clean(self, value):
        number = super().clean(value)
        return number / 100 if number is not None else None


class ApplyForm(forms.Form):
    lever = forms.CharField()
    applied_at = utc_datetime_field(
        "Applied (UTC)",
        required=True,
        error_messages={
            "required": f"give the date and time (UTC) it went into service, e.g. {UTC_EXAMPLE}",
            "invalid": f"give the date and time (UTC) it went into service, e.g. {UTC_EXAMPLE}",
        },
    )
    note = forms.CharField(required=False, max_length=200)
    demand = forms.ChoiceField(
        required=False, choices=[("measured", "measured"), ("unlimited", "unlimited")]
    )


class GoalForm(forms.Form):
    min_gross_margin = PercentField(required=False)
    min_ebitda_per_month = MoneyFormField(required=False, signed=True)
    min_tfi = PercentField(required=False)
    note = forms.CharField(required=False, max_length=200)


class LeverVersionForm(forms.Form):
    """A lever's new multipliers (`<factor>.<low|typical|high>`, one field each for the
    factors the lever moves) and costs; the rest is kept as in force."""

    one_time_cost = MoneyFormField(required=False)
    monthly_cost = MoneyFormField(required=False)

    def __init__(self, *args, factors: Iterable[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for factor in factors:
            for key in ("low", "typical", "high"):
                self.fields[f"{factor}.{key}"] = forms.CharField(required=False)


def _free_hour(model, now: datetime, **key) -> datetime:
    """The current whole hour, or the next one free for a new version."""
    moment = hour_floor(now)
    while model.objects.filter(effective_from=moment, **key).exists():
        moment += HOUR
    return moment


def flywheel_form_post(request, now: datetime) -> tuple[dict, str, dict]:
    """Handle an operator's form; returns (field errors, form name, the query parameters
    the page is shown with next)."""
    action = request.POST.get("action", "")
    handler = HANDLERS.get(action)
    if handler is None:
        return {"action": "unknown action"}, action, {}
    errors: dict[str, str] = {}
    follow: dict[str, str] = {}
    try:
        follow = handler(request, now, errors) or {}
    except FieldError as error:
        errors[error.field] = error.message
    return errors, action, follow


def _valid(form: forms.Form, errors: dict) -> dict | None:
    """The form's cleaned data, or None with its first message per field in `errors`."""
    if form.is_valid():
        return form.cleaned_data
    errors.update({field: messages[0] for field, messages in form.errors.items()})
    return None


def _apply(request, now: datetime, errors: dict) -> None:
    """Mark a lever applied from a date and time (UTC when no zone is given)."""
    data = _valid(ApplyForm(request.POST), errors)
    if data is None:
        return
    application = lever_apply(
        slug=data["lever"],
        applied_at=data["applied_at"],
        note=data["note"],
        demand=data["demand"] or "measured",
        by=request.user,
    )
    messages.success(
        request,
        f"{application.lever.name} recorded as applied on "
        f"{data['applied_at']:%Y-%m-%d %H:%M} UTC: the first cycle measuring a period after "
        "it will compare realized with projected.",
    )


def _cycle(request, now: datetime, errors: dict) -> dict:
    """Queue a cycle over the last whole week (the cycle job runs it); the page then
    follows it (`?queued=`) until it is in the history."""
    period = last_full_week(now=now)
    cycle_queue(start=period.start, end=period.end)
    messages.success(
        request,
        f"Cycle over {span_text(period.start, period.end)} queued: the cycle job runs it, and "
        "the history below shows it once it has.",
    )
    return {"queued": rfc3339(now)}


def _goal(request, now: datetime, errors: dict) -> None:
    """A new goal version from the next free hour, keeping the factor targets in force."""
    data = _valid(GoalForm(request.POST), errors)
    if data is None:
        return
    current = goal_in_force(at=now)
    goal = goal_create(
        effective_from=_free_hour(Goal, now),
        min_gross_margin=data["min_gross_margin"],
        min_ebitda_per_month=data["min_ebitda_per_month"],
        min_tfi=data["min_tfi"],
        factor_targets=current.factor_targets if current is not None else {},
        note=data["note"],
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
    data = _valid(LeverVersionForm(request.POST, factors=current.effects), errors)
    if data is None:
        return
    effects = {
        factor: {key: data[f"{factor}.{key}"] for key in ("low", "typical", "high")}
        for factor in current.effects
    }
    one_time, monthly = data["one_time_cost"], data["monthly_cost"]
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
