"""The flywheel page: diagnosis ranked with evidence, the scenario simulator (sliders and
lever checkboxes recomputed through POST /api/v1/flywheel/scenarios), goal status, the
lever catalogue, and the cycle history with projected against realized uplift.

Operators also write here: mark a lever applied, add a lever or goal version, run a cycle.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

import plotly.graph_objects as go
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from portal.access import Capability, user_may
from portal.charts import base_layout, figure_json
from portal.decorators import role_required
from portal.models import Role
from portal.periods import PRESETS, Period, period_from_preset
from portal.templatetags.portal import ratio_pct, tokens

from .measurement import FactoryData
from .models import Goal, Lever
from .scenarios import (
    CAPPED,
    FACTORS,
    LABELS,
    SYMBOLS,
    measured_tfom,
    per_month,
)
from .selectors_flywheel import (
    application_list,
    baseline_get,
    baseline_remember,
    cycle_list,
    diagnosis_get,
    goal_in_force,
    goal_status_get,
    lever_spec,
    levers_in_force,
)
from .services.flywheel import FlywheelError, cycle_run, goal_create, lever_apply, lever_create
from .services.tfom import TfomError

HISTORY = 12  # cycles shown
HOUR = timedelta(hours=1)
BOTTLENECK_COLOUR = "#d9480f"
FACTOR_COLOUR = "#1f6feb"
MEASURED_COLOUR = "#868e96"


def _whole(value) -> str:
    return "—" if value is None else f"{Decimal(value):,.0f}"


def _cell(value, unit: str) -> dict:
    """A table cell: text shown, the exact figure on hover, right-aligned when numeric."""
    if value is None or value == "":
        return {"text": "—", "title": "", "is_num": unit != "text"}
    if unit == "ratio":
        return {"text": ratio_pct(value), "title": f"{Decimal(value):.6f}", "is_num": True}
    if unit == "tokens":
        return {"text": tokens(value), "title": f"{int(value):,}", "is_num": True}
    if unit in ("gpu_hours", "minutes", "rate", "money"):
        return {"text": _whole(value), "title": f"{Decimal(value):,.2f}", "is_num": True}
    if unit == "count":
        return {"text": f"{int(value):,}", "title": "", "is_num": True}
    return {"text": str(value), "title": "", "is_num": False}


def _evidence_table(evidence) -> dict | None:
    if evidence is None:
        return None
    return {
        "summary": evidence.summary,
        "columns": [{"label": c.label, "is_num": c.unit != "text"} for c in evidence.columns],
        "rows": [
            [_cell(row.get(c.key), c.unit) for c in evidence.columns] for row in evidence.rows
        ],
    }


def diagnosis_chart(factors, *, currency: str) -> go.Figure:
    """Monthly EBITDA each factor gains alone at its target, ranked (bottleneck first)."""
    labels = [f"{f.symbol} {f.label}" for f in factors]
    gains = [float(f.ebitda_gain_per_month) for f in factors]
    colours = [
        BOTTLENECK_COLOUR if i == 0 and gains[0] > 0 else FACTOR_COLOUR for i in range(len(factors))
    ]
    layout = base_layout(x_title=f"EBITDA gained per month at the target ({currency})", y_title="")
    layout["yaxis"] = {"autorange": "reversed", "automargin": True}
    layout["showlegend"] = False
    layout["margin"] = {"l": 150, "r": 30, "t": 20, "b": 60}
    fig = go.Figure(layout=layout)
    fig.add_bar(
        y=labels,
        x=gains,
        orientation="h",
        marker_color=colours,
        text=[f"{g:,.0f}" for g in gains],
        textposition="auto",
        hovertemplate="%{y}: %{x:,.0f} " + currency + " per month<extra></extra>",
    )
    return fig


def factors_chart(measured) -> go.Figure:
    """The six factors, measured against projected (the simulator redraws the second)."""
    labels = [f"{SYMBOLS[f]} {LABELS[f]}" for f in FACTORS]
    values = [
        None if getattr(measured, f) is None else float(getattr(measured, f)) * 100 for f in FACTORS
    ]
    layout = base_layout(y_title="Percent", x_title="")
    layout["barmode"] = "group"
    layout["margin"] = {"l": 60, "r": 10, "t": 20, "b": 110}
    fig = go.Figure(layout=layout)
    fig.add_bar(x=labels, y=values, name="measured", marker_color=MEASURED_COLOUR)
    fig.add_bar(x=labels, y=values, name="projected", marker_color=FACTOR_COLOUR)
    return fig


def realized_chart(rows: list[dict]) -> go.Figure:
    """Projected against realized uplift per lever and factor, in percent."""
    x = [f"{r['lever']} · {SYMBOLS.get(r['factor'], r['factor'])}" for r in rows]
    layout = base_layout(y_title="Uplift of the factor (%)", x_title="Lever · factor")
    layout["barmode"] = "group"
    fig = go.Figure(layout=layout)
    fig.add_bar(
        x=x,
        y=[r["projected_uplift"] * 100 for r in rows],
        name="projected",
        marker_color=MEASURED_COLOUR,
    )
    fig.add_bar(
        x=x, y=[r["realized_uplift"] * 100 for r in rows], name="realized", marker_color="#2b8a3e"
    )
    return fig


def _page_period(request, now: datetime) -> tuple[Period, str]:
    """The period picked, ending no later than the current hour (no future hours)."""
    period, preset = period_from_preset(request.GET, now=now)
    hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    end = min(period.end, hour) if hour > period.start else period.end
    return Period(period.start, end), preset


def _lever_rows(levers: list[Lever], applications) -> list[dict]:
    by_slug = {}
    for application in applications:
        by_slug.setdefault(application.lever.slug, application)
    rows = []
    for lever in levers:
        spec = lever_spec(lever)
        rows.append(
            {
                "lever": lever,
                "effects": [
                    {
                        "factor": e.factor,
                        "symbol": SYMBOLS[e.factor],
                        "label": LABELS[e.factor],
                        "low": e.low,
                        "typical": e.typical,
                        "high": e.high,
                    }
                    for e in spec.effects
                ],
                "cost": spec.cost,
                "application": by_slug.get(lever.slug),
            }
        )
    return rows


def _realized_rows(applications) -> list[dict]:
    rows = []
    for application in applications:
        if application.evaluated_by_id is None:
            continue
        for factor, entry in application.realized.items():
            if "realized_uplift" not in entry:
                continue
            rows.append(
                {
                    "application": application,
                    "lever": application.lever.slug,
                    "factor": factor,
                    "symbol": SYMBOLS.get(factor, factor),
                    "before": float(entry["before"]),
                    "projected": float(entry["projected"]),
                    "after": float(entry["after"]),
                    "projected_uplift": float(entry["projected_uplift"]),
                    "realized_uplift": float(entry["realized_uplift"]),
                    "prior_typical": entry.get("prior_typical"),
                    "updated_typical": entry.get("updated_typical"),
                    "is_capped": entry.get("is_capped"),
                    "cycle": application.evaluated_by,
                }
            )
    return rows


def _cycle_rows(cycles) -> list[dict]:
    rows = []
    for cycle in cycles:
        figures = cycle.figures or {}
        ebitda = figures.get("ebitda")
        proposal = cycle.proposal or {}
        rows.append(
            {
                "cycle": cycle,
                "tef": figures.get("tef"),
                "tfi": figures.get("tfi"),
                "ebitda_per_month": (
                    None
                    if ebitda is None
                    else per_month(Decimal(ebitda), start=cycle.period_start, end=cycle.period_end)
                ),
                "bottleneck": (
                    f"{SYMBOLS[cycle.bottleneck]} {LABELS[cycle.bottleneck]}"
                    if cycle.bottleneck in SYMBOLS
                    else ""
                ),
                "proposal_cost": Decimal(proposal["cost"]) if proposal.get("cost") else None,
            }
        )
    return rows


def _pct(value: Decimal | None) -> str:
    return "0.0" if value is None else f"{float(value) * 100:.1f}"


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
    return number / 100 if percent else number


def _free_hour(model, now: datetime, **key) -> datetime:
    """The current whole hour, or the next one free for a new version."""
    moment = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while model.objects.filter(effective_from=moment, **key).exists():
        moment += HOUR
    return moment


def _post(request, now: datetime) -> tuple[dict, str]:
    """Handle an operator's form; returns (field errors, form name)."""
    action = request.POST.get("action", "")
    errors: dict[str, str] = {}
    try:
        if action == "apply":
            applied = parse_datetime(request.POST.get("applied_at", ""))
            if applied is None:
                errors["applied_at"] = "give the date and time (UTC) it went into service"
                return errors, action
            if applied.tzinfo is None:
                applied = applied.replace(tzinfo=UTC)
            application = lever_apply(
                slug=request.POST.get("lever", ""),
                applied_at=applied,
                note=request.POST.get("note", "")[:200],
                by=request.user,
            )
            messages.success(
                request,
                f"{application.lever.name} recorded as applied on {applied:%Y-%m-%d %H:%M} UTC: "
                "the first cycle measuring a period after it will compare realized with projected.",
            )
        elif action == "cycle":
            cycle = cycle_run(by=request.user)
            messages.success(
                request,
                f"Cycle over {cycle.period_start:%Y-%m-%d} – {cycle.period_end:%Y-%m-%d} recorded.",
            )
        elif action == "goal":
            margin = _number(
                request.POST.get("min_gross_margin"), "min_gross_margin", errors, percent=True
            )
            ebitda = _number(
                request.POST.get("min_ebitda_per_month"), "min_ebitda_per_month", errors
            )
            tfi = _number(request.POST.get("min_tfi"), "min_tfi", errors, percent=True)
            if errors:
                return errors, action
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
            messages.success(
                request, f"New goal in force from {goal.effective_from:%Y-%m-%d %H:00} UTC."
            )
        elif action == "lever":
            slug = request.POST.get("slug", "")
            current = next(
                (v for v in levers_in_force(at=now, include_retired=True) if v.slug == slug), None
            )
            if current is None:
                errors["slug"] = "unknown lever"
                return errors, action
            effects = {}
            for factor in current.effects:
                effects[factor] = {
                    key: request.POST.get(f"{factor}.{key}", "")
                    for key in ("low", "typical", "high")
                }
            one_time = _number(request.POST.get("one_time_cost"), "one_time_cost", errors)
            monthly = _number(request.POST.get("monthly_cost"), "monthly_cost", errors)
            if errors:
                return errors, action
            lever = lever_create(
                slug=slug,
                name=current.name,
                description=current.description,
                effects=effects,
                one_time_cost=one_time if one_time is not None else current.one_time_cost,
                monthly_cost=monthly if monthly is not None else current.monthly_cost,
                effective_from=_free_hour(Lever, now, slug=slug),
                observations=current.observations,
                by=request.user,
            )
            messages.success(
                request,
                f"{lever.name}: new version in force from {lever.effective_from:%Y-%m-%d %H:00} UTC.",
            )
        else:
            errors["action"] = "unknown action"
    except FlywheelError as error:
        errors[error.field] = error.message
    return errors, action


@role_required(Role.OPERATOR, Role.FINANCE)
def flywheel(request):
    """Measure → diagnose → adjust → check the goal, on one page (kpis.md section 6)."""
    now = timezone.now()
    form_errors: dict = {}
    form_name = ""
    if request.method == "POST":
        if not user_may(request.user, Capability.WRITE_FACTORY):
            raise PermissionDenied("Your role may not change the flywheel.")
        form_errors, form_name = _post(request, now)
        if not form_errors:
            return HttpResponseRedirect(request.get_full_path())
    period, preset = _page_period(request, now)
    context = {
        "title": "Flywheel",
        "period": period,
        "preset": preset,
        "presets": PRESETS,
        "form_errors": form_errors,
        "form_name": form_name,
        "may_write": user_may(request.user, Capability.WRITE_FACTORY),
        "factors": [{"key": f, "symbol": SYMBOLS[f], "label": LABELS[f]} for f in FACTORS],
    }
    applications = list(application_list())
    levers = levers_in_force(at=now)
    context["levers"] = _lever_rows(levers, applications)
    cycles = list(cycle_list()[:HISTORY])
    context["cycle_rows"] = _cycle_rows(cycles)
    realized = _realized_rows(applications)
    context["realized"] = realized
    context["realized_chart"] = figure_json(realized_chart(realized)) if realized else None
    context["pending"] = [a for a in applications if a.evaluated_by_id is None]
    goal = goal_in_force(at=now)
    context["goal"] = goal
    data = FactoryData(start=period.start, end=period.end)
    try:
        baseline = baseline_get(start=period.start, end=period.end, data=data)
    except TfomError as error:
        context["error"] = error.message
        return render(
            request, "flywheel/flywheel.html", context, status=400 if form_errors else 200
        )
    measured = measured_tfom(baseline)
    diagnosis = diagnosis_get(
        start=period.start, end=period.end, data=data, baseline=baseline, at=now
    )
    status = goal_status_get(baseline=baseline, now=now, measured=measured)
    currency = settings.FACTORY_CURRENCY
    gains = [f.ebitda_gain_per_month for f in diagnosis.factors]
    context.update(
        measured=measured,
        diagnosis=diagnosis,
        rating_errors=data.rating_errors,
        ebitda_per_month=diagnosis.ebitda_per_month,
        revenue_per_month=per_month(measured.revenue, start=period.start, end=period.end),
        diagnosis_rows=[
            {"factor": f, "evidence": _evidence_table(f.evidence), "rank": i + 1}
            for i, f in enumerate(diagnosis.factors)
        ],
        diagnosis_chart=(
            figure_json(diagnosis_chart(diagnosis.factors, currency=currency))
            if any(g > 0 for g in gains)
            else None
        ),
        factors_chart=(
            figure_json(factors_chart(measured))
            if any(getattr(measured, f) is not None for f in FACTORS)
            else None
        ),
        sim_factors=[
            {
                "key": f,
                "symbol": SYMBOLS[f],
                "label": LABELS[f],
                "measured": _pct(getattr(measured, f)),
                "target": _pct(diagnosis.targets[f]),
                "max": "100"
                if f in CAPPED
                else _pct(max(Decimal("1.5"), (getattr(measured, f) or 0) * Decimal("1.5"))),
            }
            for f in FACTORS
        ],
        goal_check=status.check,
        proposal=status.proposal,
        simulator=json.dumps(
            {
                "from": period.start.isoformat(),
                "to": period.end.isoformat(),
                "baseline": baseline_remember(baseline),
                "currency": currency,
                "factors": [
                    {
                        "key": f,
                        "symbol": SYMBOLS[f],
                        "label": LABELS[f],
                        "measured": None
                        if getattr(measured, f) is None
                        else float(getattr(measured, f)),
                        "target": float(diagnosis.targets[f]),
                        "max": 1.0
                        if f in CAPPED
                        else max(1.5, float(getattr(measured, f) or 0) * 1.5),
                    }
                    for f in FACTORS
                ],
            }
        ),
    )
    return render(request, "flywheel/flywheel.html", context, status=400 if form_errors else 200)
