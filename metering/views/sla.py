"""The operator's incident board (htmx) and an incident's page with its postmortem."""

import math
from datetime import timedelta
from fractions import Fraction

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from metering.filters import IncidentFilterSet
from metering.forms import (
    IncidentEditForm,
    IncidentForm,
    IncidentUpdateForm,
    MaintenanceForm,
    service_errors_to_form,
)
from metering.models import Incident, IncidentImpact, IncidentStatus, MaintenanceWindow
from metering.selectors.sla.incidents import (
    IMPACT_RANK,
    current_impact,
    deployment_slugs,
    model_names,
    peak_impact,
)
from metering.selectors.sla.lists import (
    incident_list,
    incident_visible_tenants,
    maintenance_list,
)
from metering.selectors.sla.status import STATUS_DAYS, incident_history, status_overview
from metering.services.sla.incidents import (
    STATUS_ORDER,
    incident_create,
    incident_edit,
    incident_update_add,
)
from metering.services.sla.maintenance import maintenance_window_cancel, maintenance_window_create
from portal import clock
from portal.access import tenant_list, user_role, user_tenant
from portal.decorators import role_required
from portal.exports import export_query, list_csv
from portal.models import Role
from portal.periods import Period

RECENT_DAYS = 14


def _is_htmx(request) -> bool:
    return request.headers.get("HX-Request") == "true"


def _card(incident, *, form=None, prefix=None):
    """What a board card shows of an incident."""
    prefix = prefix or f"u{incident.pk}"
    if form is None:
        position = STATUS_ORDER.index(incident.status)
        form = IncidentUpdateForm(
            prefix=prefix,
            initial={"status": STATUS_ORDER[min(position + 1, len(STATUS_ORDER) - 1)]},
        )
    # open: what is going on now; resolved: the worst it got
    impact = current_impact(incident) if incident.is_open else peak_impact(incident)
    return {
        "incident": incident,
        "impact": impact,
        "impact_label": IncidentImpact(impact).label,
        "models": model_names(incident),
        "deployments": sorted(deployment_slugs(incident)),
        "tenants": [t.slug for t in incident.tenants.all()],
        "updates": list(reversed(incident.updates.all())),
        "form": form,
    }


def _board_context(request, *, form=None, created=None) -> dict:
    now = clock.now()
    open_incidents = incident_list(user=request.user, filters={"status": "open"})
    recent = incident_list(
        user=request.user,
        filters={"status": IncidentStatus.RESOLVED},
        period=Period(now - timedelta(days=RECENT_DAYS), now + timedelta(seconds=1)),
    )
    return {
        "title": "Incidents",
        "form": form or IncidentForm(),
        "created": created,
        "cards": [_card(i) for i in open_incidents],
        "recent": [
            {"incident": i, "models": model_names(i), "impact": peak_impact(i)} for i in recent[:20]
        ],
        "recent_days": RECENT_DAYS,
        "maintenance": maintenance_list(upcoming_at=now)[:10],
        "now": now,
    }


HISTORY_PAGE_SIZE = 25
HISTORY_CSV_HEADER = [
    "id", "title", "severity", "status", "worst_impact", "deployments", "tenants", "started_at",
    "resolved_at",
]  # fmt: skip


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def incident_history_page(request):
    """Every incident the user may see, newest first, filtered by status, worst impact,
    deployment, tenant (operators and finance) and month, 25 a page, each with its
    timeline (members see those that touched their tenant), and a CSV of every one the
    filters select. The filters are the API's (IncidentFilterSet); a refused value shows
    next to its field."""
    is_member = user_role(request.user) is Role.TENANT
    filters = IncidentFilterSet(request.GET, user=request.user)
    is_valid = filters.is_valid()
    incidents = (
        incident_list(user=request.user, filters=request.GET)
        if is_valid
        else Incident.objects.none()
    )
    if is_valid and request.GET.get("format") == "csv":
        history = (_history_row(incident, request.user) for incident in incidents)
        return list_csv(
            name="incidents",
            header=HISTORY_CSV_HEADER,
            rows=(_history_csv(row) for row in history),
        )
    page = Paginator(incidents, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [_history_row(incident, request.user) for incident in page]
    return render(
        request,
        "metering/sla/incident_history.html",
        {
            "title": "Incident history",
            "form": filters.form,
            "rows": rows,
            "page": page,
            "is_member": is_member,
            "tenant": request.GET.get("tenant", ""),
            "tenants": [] if is_member else tenant_list(user=request.user).order_by("name"),
            "is_operator": user_role(request.user) is Role.OPERATOR,
            "csv_query": export_query(request),
        },
        status=200 if is_valid else 400,
    )


def _history_csv(row: dict) -> tuple:
    """A history row as its CSV writes it (HISTORY_CSV_HEADER)."""
    i = row["incident"]
    resolved = i.resolved_at.isoformat() if i.resolved_at else ""
    return (i.pk, i.title, i.severity, i.status, row["impact"].value, " ".join(row["deployments"]),
            " ".join(row["tenants"]), i.started_at.isoformat(), resolved)  # fmt: skip


def _history_row(incident: Incident, user) -> dict:
    """An incident as the history shows it: its worst impact, what it named, its timeline."""
    return {
        "incident": incident,
        "impact": peak_impact(incident),
        "models": model_names(incident),
        "deployments": sorted(deployment_slugs(incident)),
        "tenants": incident_visible_tenants(incident=incident, user=user),
        "updates": list(incident.updates.all()),
    }


@role_required(Role.OPERATOR)
def incidents(request):
    """The operator's board: open incidents updated in place, a quick create form, recently
    resolved ones and upcoming maintenance. POST creates an incident."""
    form, created = None, None
    if request.method == "POST":
        form = IncidentForm(request.POST)
        if form.is_valid():
            data = dict(form.cleaned_data)
            data["started_at"] = data["started_at"] or clock.now()
            try:
                created = incident_create(**data, by=request.user)
            except ValidationError as exc:
                service_errors_to_form(form, exc)
            else:
                form = None
                if not _is_htmx(request):
                    messages.success(request, f"Incident #{created.pk} opened.")
                    return redirect("incidents")
    context = _board_context(request, form=form, created=created)
    if _is_htmx(request):
        return render(request, "metering/sla/_incident_board.html", context)
    return render(request, "metering/sla/incidents.html", context)


def _incident_or_404(request, pk: int):
    return get_object_or_404(incident_list(user=request.user), pk=pk)


@require_POST
@role_required(Role.OPERATOR)
def incident_update(request, pk: int):
    """Post a public update from a board card; the card comes back (htmx) in its new state."""
    incident = _incident_or_404(request, pk)
    prefix = f"u{pk}"
    form = IncidentUpdateForm(request.POST, prefix=prefix)
    posted = False
    if form.is_valid():
        try:
            incident_update_add(incident=incident, **form.cleaned_data, by=request.user)
        except ValidationError as exc:
            service_errors_to_form(form, exc)
        else:
            posted = True
    if not _is_htmx(request):
        if posted:
            messages.success(request, f"Update posted to incident #{pk}.")
        return redirect("incidents")
    incident = _incident_or_404(request, pk)
    card = _card(incident, form=None if posted else form, prefix=prefix)
    return render(request, "metering/sla/_incident_card.html", {**card, "posted": posted})


def _record(incident) -> dict:
    """An incident's record as the edit form shows it (times to the second)."""
    return {
        "title": incident.title,
        "severity": incident.severity,
        "impact": incident.impact,
        "deployments": set(incident.deployments.all()),
        "pools": set(incident.pools.all()),
        "tenants": set(incident.tenants.all()),
        "started_at": incident.started_at.replace(microsecond=0),
        "resolved_at": incident.resolved_at and incident.resolved_at.replace(microsecond=0),
        "cause": incident.cause,
        "remediation": incident.remediation,
    }


@role_required(Role.OPERATOR)
def incident_detail(request, pk: int):
    """An incident's page: its whole timeline, and its record and postmortem to correct.
    Only what the operator changed is saved (times are shown to the second)."""
    incident = _incident_or_404(request, pk)
    record = _record(incident)
    if request.method == "POST":
        form = IncidentEditForm(request.POST)
        if incident.resolved_at is None:
            form.fields["resolved_at"].disabled = True
        if form.is_valid():
            changes = {
                name: value
                for name, value in form.cleaned_data.items()
                if (set(value) if name in ("deployments", "pools", "tenants") else value)
                != record[name]
            }
            try:
                incident_edit(incident=incident, **changes, by=request.user)
            except ValidationError as exc:
                service_errors_to_form(form, exc)
            else:
                messages.success(request, f"Incident #{pk} saved.")
                return redirect("incident-page", pk=pk)
    else:
        form = IncidentEditForm(initial=record)
    if incident.resolved_at is None:
        form.fields["resolved_at"].disabled = True
        form.fields["resolved_at"].help_text = 'Set by an update with status "Resolved".'
    return render(
        request,
        "metering/sla/incident_detail.html",
        {"title": f"Incident #{pk}", "edit_form": form, **_card(incident)},
    )


@role_required(Role.OPERATOR)
def maintenance(request):
    """Maintenance windows: announce one (it must start in the future), cancel one not yet
    started, see upcoming and recent ones."""
    form = MaintenanceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            window = maintenance_window_create(**form.cleaned_data, by=request.user)
        except ValidationError as exc:
            service_errors_to_form(form, exc)
        else:
            messages.success(request, f"Maintenance “{window.title}” announced.")
            return redirect("maintenance")
    now = clock.now()
    windows = maintenance_list(
        period=Period(now - timedelta(days=STATUS_DAYS), now + timedelta(days=366))
    )
    return render(
        request,
        "metering/sla/incidents_maintenance.html",
        {
            "title": "Maintenance windows",
            "form": form,
            "now": now,
            "windows": [
                {
                    "window": w,
                    "models": model_names(w),
                    "deployments": sorted(deployment_slugs(w)),
                    "state": "done"
                    if w.ends_at <= now
                    else "active"
                    if w.starts_at <= now
                    else "upcoming",
                }
                for w in reversed(windows)
            ],
        },
    )


@require_POST
@role_required(Role.OPERATOR)
def maintenance_cancel(request, pk: int):
    window = get_object_or_404(MaintenanceWindow, pk=pk)
    try:
        maintenance_window_cancel(window=window, by=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Maintenance “{window.title}” cancelled.")
    return redirect("maintenance")


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
    if not day.has_data:
        return {"css": "nodata", "title": f"{day.day:%Y-%m-%d}: no data (not in service)"}
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
    # A signed-in member also sees the incidents that named its tenant.
    own = user_tenant(request.user) if user_role(request.user) is Role.TENANT else None
    models = status_overview(now=now, tenant=own)
    history = incident_history(now=now, tenant=own)
    worst = max(
        (m.status for m in models if m.status in IMPACT_RANK), default="", key=IMPACT_RANK.get
    )
    overall = worst or (
        "maintenance" if any(m.status == "maintenance" for m in models) else "operational"
    )
    return render(
        request,
        "metering/sla/status.html",
        {
            "title": "Status",
            "now": now,
            "tenant": own,
            "models": _status_rows(models),
            "overall": overall,
            "overall_label": OVERALL_LABELS[overall],
            "days": STATUS_DAYS,
            "history": [
                {
                    "incident": i,
                    "impact": peak_impact(i).value,
                    "impact_label": peak_impact(i).label,
                    "models": model_names(i),
                    "updates": list(reversed(i.updates.all())),
                }
                for i in history
            ],
            "maintenance": maintenance_list(upcoming_at=now)[:20],
        },
    )
