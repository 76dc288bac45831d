"""The public status page (no login): status per model, daily uptime bars, history."""

import math
from fractions import Fraction

from django.shortcuts import render
from django.views.decorators.http import require_safe

from metering.models import IncidentImpact
from metering.sla import (
    IMPACT_RANK,
    STATUS_DAYS,
    incident_history,
    maintenance_list,
    model_names,
    peak_impact,
    status_overview,
)
from portal import clock

STATUS_LABELS = {
    "operational": "Operational",
    "maintenance": "Under maintenance",
    **{impact.value: impact.label for impact in IncidentImpact},
}
OVERALL_LABELS = {
    "operational": "All systems operational",
    "maintenance": "Maintenance in progress",
    IncidentImpact.DEGRADED: "Degraded performance",
    IncidentImpact.PARTIAL_OUTAGE: "Partial outage",
    IncidentImpact.MAJOR_OUTAGE: "Major outage",
}


def _pct(value: Fraction | None) -> str:
    """A ratio as a percentage with two decimals, rounded down: never rosier than it is."""
    if value is None:
        return "—"
    hundredths = math.floor(value * 10_000)
    return f"{hundredths // 100}.{hundredths % 100:02d}%"


def _bar(day) -> dict:
    if day.uptime is None:
        css, text = "maint", "maintenance all day"
    elif day.uptime == 1:
        css = "degraded" if day.worst_impact == IncidentImpact.DEGRADED else "ok"
        css = "maint" if css == "ok" and day.has_maintenance else css
        text = f"{_pct(day.uptime)} uptime"
    else:
        css = "minor" if day.uptime >= Fraction(99, 100) else "major"
        text = f"{_pct(day.uptime)} uptime"
    notes = [text, *day.incidents]
    if day.has_maintenance and day.uptime is not None:
        notes.append("maintenance")
    return {"css": css, "title": f"{day.day:%Y-%m-%d}: " + "; ".join(notes)}


def _status_rows(models) -> list[dict]:
    return [
        {
            "name": m.model.name,
            "slug": m.model.slug,
            "status": m.status,
            "status_label": STATUS_LABELS[m.status],
            "uptime": _pct(m.uptime),
            "bars": [_bar(day) for day in m.days],
            "incident_days": sum(1 for day in m.days if day.incidents),
        }
        for m in models
    ]


@require_safe
def status_page(request):
    """The public status page: current status per served model, 90 days of daily uptime,
    incident history and upcoming maintenance. No login; tenants are never named."""
    now = clock.now()
    models = status_overview(now=now)
    history = incident_history(now=now)
    worst = max(
        (m.status for m in models if m.status in IMPACT_RANK), default="", key=IMPACT_RANK.get
    )
    overall = worst or (
        "maintenance" if any(m.status == "maintenance" for m in models) else "operational"
    )
    return render(
        request,
        "metering/status.html",
        {
            "title": "Status",
            "now": now,
            "models": _status_rows(models),
            "overall": overall,
            "overall_label": OVERALL_LABELS[overall],
            "days": STATUS_DAYS,
            "history": [
                {
                    "incident": i,
                    "impact": peak_impact(i),
                    "impact_label": IncidentImpact(peak_impact(i)).label,
                    "models": model_names(i),
                    "updates": list(reversed(i.updates.all())),
                    "some_customers": bool(i.tenants.all()),
                }
                for i in history
            ],
            "maintenance": maintenance_list(upcoming_at=now)[:20],
        },
    )
