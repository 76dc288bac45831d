"""The flywheel page: its period, diagnosis, simulator, goal, levers and cycle history."""

from __future__ import annotations

import json
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import render

from flywheel.charts.loop import diagnosis_chart, factors_chart, realized_chart
from flywheel.domain.loop.baseline import measured_tfom
from flywheel.domain.loop.demand import MEASURED, UNLIMITED, month_basis, per_month
from flywheel.domain.loop.factors import CAPPED, FACTORS, LABELS, SYMBOLS
from flywheel.domain.loop.projection import project
from flywheel.forms import flywheel_form_post
from flywheel.models import Lever
from flywheel.selectors.kpis import empty_reason_of
from flywheel.selectors.loop.baseline import baseline_get, baseline_remember
from flywheel.selectors.loop.cycles import application_list, cycle_list, cycle_waiting
from flywheel.selectors.loop.diagnosis import diagnosis_get, goal_status_get
from flywheel.selectors.loop.levers import goal_in_force, lever_spec, levers_in_force
from flywheel.selectors.measurement import FACTORY, kpi_read
from metering.selectors.usage import window_resolve
from portal import clock
from portal.access import Capability, user_may
from portal.charts import figure_json
from portal.clock import parse_instant
from portal.decorators import role_required
from portal.errors import FieldError
from portal.formatting import span_text
from portal.forms import UTC_EXAMPLE
from portal.models import Role
from portal.templatetags.portal import ratio_pct, tokens

HISTORY = 12  # cycles shown


def _pct(value: Decimal | None) -> str:
    return "0.0" if value is None else f"{float(value) * 100:.1f}"


@role_required(Role.OPERATOR, Role.FINANCE, Role.INVESTOR)
def flywheel(request):
    """Measure → diagnose → adjust → check the goal, on one page (kpis.md section 6):
    operators change it, finance runs scenarios too, investors read it."""
    now = clock.now()
    form_errors: dict = {}
    form_name = ""
    if request.method == "POST":
        if not user_may(request.user, Capability.WRITE_FACTORY):
            raise PermissionDenied("Your role may not change the flywheel.")
        form_errors, form_name, follow = flywheel_form_post(request, now)
        if not form_errors:
            query = request.GET.copy()
            query.update(follow)
            return HttpResponseRedirect(f"{request.path}?{query.urlencode()}".rstrip("?"))
    window = window_resolve(request.GET, default="last_30_days", now=now)
    period = window.period
    # "per month": the period's own figure when it is a calendar month, as TFOM's.
    calendar = month_basis(start=period.start, end=period.end) == "calendar month"
    context = {
        "title": "Flywheel",
        "per_month_label": "per month" if calendar else "per 30.4-day month",
        "period": period,
        "window": window,
        "form_errors": form_errors,
        "form_name": form_name,
        "posted": request.POST if form_errors else {},  # the user's input, kept on an error
        "may_write": user_may(request.user, Capability.WRITE_FACTORY),
        "utc_example": UTC_EXAMPLE,  # a lever's "Applied (UTC)" as the incident forms take it
        "may_simulate": user_may(request.user, Capability.RUN_SCENARIOS),
        "factors": [{"key": f, "symbol": SYMBOLS[f], "label": LABELS[f]} for f in FACTORS],
        **_loop_history(now),
        "cycle_waiting": _cycle_waiting(request.GET.get("queued", "")),
    }
    if empty_reason := empty_reason_of(window=window, scope=FACTORY):
        context["empty_reason"] = empty_reason  # not enough data: no bottleneck, no loss
    else:
        try:
            context |= _measured(period, now=now, per_month_label=context["per_month_label"])
        except FieldError as error:
            context["error"] = error.message
        else:
            context["cycle_beside"] = _cycle_beside(context, latest=cycle_list().first())
    return render(
        request, "flywheel/loop/flywheel.html", context, status=400 if form_errors else 200
    )


def _cycle_waiting(queued: str) -> str | None:
    """The period of the cycle this page queued (`?queued=` the moment it did) while the
    cycle job has not run it, named as the cycle rows name theirs: the history says so and
    follows it (ui.md, Long work)."""
    try:
        period = cycle_waiting(queued_at=parse_instant(queued)) if queued else None
    except ValueError:
        return None
    return span_text(period.start, period.end) if period is not None else None


def _cycle_beside(context: dict, *, latest) -> dict | None:
    """The latest weekly cycle's proposal when it differs from the one the goal box makes
    for this page's period under the measured demand, with why: each judged its own period
    (the cycle its last 7 whole days), whose figures, and maybe goal, differ."""
    if latest is None or latest.error or not latest.proposal:
        return None
    here = next((p for p in context["proposals"] if p.demand.kind == MEASURED.kind), None)
    # No proposal here: the goal is met for this period, no lever needed.
    mine = (here.is_found, list(here.levers)) if here is not None else (True, [])
    theirs = latest.proposal
    if mine == (theirs["is_found"], theirs["levers"]):
        return None
    period, figures = context["period"], latest.figures or {}
    ebitda = figures.get("ebitda")
    cycle_ebitda = (
        "—"
        if ebitda is None
        else _whole(per_month(Decimal(ebitda), start=latest.period_start, end=latest.period_end))
    )
    reasons = []
    if (latest.period_start, latest.period_end) != (period.start, period.end):
        reasons.append(
            f"the cycle judged {span_text(latest.period_start, latest.period_end)} (its 7 "
            f"whole days: TFI {ratio_pct(figures.get('tfi'))}, EBITDA {cycle_ebitda} "
            f"{context['per_month_label']}), this page its own period "
            f"({context['window'].label}: {span_text(period.start, period.end)}; TFI "
            f"{ratio_pct(context['measured'].tfi)}, EBITDA "
            f"{_whole(context['ebitda_per_month'])}): a period further from the goal needs "
            "more levers, or none meets it"
        )
    goal = context["goal"]
    if latest.goal_id != (goal.pk if goal else None):
        reasons.append("the cycle checked the goal in force when it ran, since replaced")
    why = "; and ".join(reasons) or "the levers in force changed since the cycle ran"
    span = span_text(latest.period_start, latest.period_end)
    return {"cycle": latest, "span": span, "proposal": theirs, "why": why}


def _loop_history(now) -> dict:
    """The levers in force, the cycles run, what applied levers realized, the goal."""
    applications = list(application_list())
    realized = _realized_rows(applications)
    return {
        "levers": _lever_rows(levers_in_force(at=now), applications),
        "cycle_rows": _cycle_rows(list(cycle_list()[:HISTORY])),
        "realized": realized,
        "realized_chart": figure_json(realized_chart(realized)) if realized else None,
        "pending": [a for a in applications if a.evaluated_by_id is None],
        "goal": goal_in_force(at=now),
    }


def _measured(period, *, now, per_month_label: str) -> dict:
    """The period measured, diagnosed and checked against the goal, with its charts and
    the simulator's starting point; FieldError when its baseline cannot be costed."""
    data = kpi_read(period)
    baseline = baseline_get(start=period.start, end=period.end, data=data)
    measured = measured_tfom(baseline)
    diagnosis = diagnosis_get(
        start=period.start, end=period.end, data=data, baseline=baseline, at=now
    )
    status = goal_status_get(
        baseline=baseline, now=now, measured=measured, demands=(MEASURED, UNLIMITED)
    )
    currency = settings.FACTORY_CURRENCY
    gains = [f.ebitda_gain_per_month for f in diagnosis.factors]
    bounds = _factor_bounds(measured, diagnosis)
    return {
        "measured": measured,
        "diagnosis": diagnosis,
        "rating_errors": data.rating_errors,
        "ebitda_per_month": diagnosis.ebitda_per_month,
        "revenue_per_month": per_month(measured.revenue, start=period.start, end=period.end),
        "diagnosis_rows": [
            {"factor": f, "evidence": _evidence_table(f.evidence), "rank": i + 1}
            for i, f in enumerate(diagnosis.factors)
        ],
        "diagnosis_chart": figure_json(
            diagnosis_chart(diagnosis.factors, currency=currency, per_month=per_month_label)
        )
        if any(g > 0 for g in gains)
        else None,
        "factors_chart": figure_json(factors_chart(measured))
        if any(getattr(measured, f) is not None for f in FACTORS)
        else None,
        "sim_factors": [
            {
                **b,
                "measured": _pct(b["measured"]),
                "target": _pct(b["target"]),
                "max": "100" if b["max"] == 1 else _pct(b["max"]),
            }
            for b in bounds
        ],
        "goal_check": status.check,
        "proposals": status.proposals,
        "capacity": project(baseline=baseline, measured=measured).capacity,
        "simulator": _simulator_json(period, baseline, bounds, per_month_label),
    }


def _simulator_json(period, baseline, bounds: list[dict], per_month_label: str) -> str:
    """The simulator's starting point: the period, its baseline, each factor's slider."""
    return json.dumps(
        {
            "from": period.start.isoformat(),
            "to": period.end.isoformat(),
            "baseline": baseline_remember(baseline),
            "currency": settings.FACTORY_CURRENCY,
            "perMonth": per_month_label,
            "factors": [
                {
                    **b,
                    "measured": None if b["measured"] is None else float(b["measured"]),
                    "target": float(b["target"]),
                    "max": float(b["max"]),
                }
                for b in bounds
            ],
        }
    )


def _factor_bounds(measured, diagnosis) -> list[dict]:
    """Each factor's slider: measured, target and the most it may be moved to (100% for a
    capped factor, else 1.5 × the measured value, at least 150%)."""
    return [
        {
            "key": f,
            "symbol": SYMBOLS[f],
            "label": LABELS[f],
            "measured": getattr(measured, f),
            "target": diagnosis.targets[f],
            "max": Decimal(1)
            if f in CAPPED
            else max(Decimal("1.5"), (getattr(measured, f) or 0) * Decimal("1.5")),
        }
        for f in FACTORS
    ]


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
                "moves_nothing": spec.moves_nothing,
                "scope": (
                    f"deployment {lever.deployment.slug}"
                    if lever.deployment_id
                    else f"pool {lever.pool.slug}"
                    if lever.pool_id
                    else ""
                ),
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
                    "follows_demand": entry.get("follows_demand", False),
                    "cycle": application.evaluated_by,
                    "span": span_text(  # as the cycle rows name the week
                        application.evaluated_by.period_start, application.evaluated_by.period_end
                    ),
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
                "span": span_text(cycle.period_start, cycle.period_end),
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
