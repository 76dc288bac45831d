"""The flywheel page: its period, diagnosis, simulator, goal, levers and cycle history."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import render

from flywheel.measurement import FactoryData
from flywheel.scenarios import CAPPED, FACTORS, LABELS, SYMBOLS, measured_tfom, per_month
from flywheel.selectors_flywheel import (
    application_list,
    baseline_get,
    baseline_remember,
    cycle_list,
    diagnosis_get,
    goal_in_force,
    goal_status_get,
    levers_in_force,
)
from flywheel.services.tfom import TfomError
from flywheel.views_flywheel.charts import diagnosis_chart, factors_chart, realized_chart
from flywheel.views_flywheel.forms import _post
from flywheel.views_flywheel.tables import _cycle_rows, _evidence_table, _lever_rows, _realized_rows
from portal import clock
from portal.access import Capability, user_may
from portal.charts import figure_json
from portal.decorators import role_required
from portal.models import Role
from portal.periods import PRESETS, Period, period_from_preset

HISTORY = 12  # cycles shown


def _page_period(request, now: datetime) -> tuple[Period, str]:
    """The period picked, ending no later than the current hour (no future hours)."""
    period, preset = period_from_preset(request.GET, now=now)
    hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    end = min(period.end, hour) if hour > period.start else period.end
    return Period(period.start, end), preset


def _pct(value: Decimal | None) -> str:
    return "0.0" if value is None else f"{float(value) * 100:.1f}"


@role_required(Role.OPERATOR, Role.FINANCE)
def flywheel(request):
    """Measure → diagnose → adjust → check the goal, on one page (kpis.md section 6)."""
    now = clock.now()
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
