"""Maintenance windows: announce one, cancel one not yet started, see them all."""

from datetime import timedelta

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from metering.models import MaintenanceWindow
from metering.services.incidents import maintenance_window_cancel, maintenance_window_create
from metering.sla import STATUS_DAYS, deployment_slugs, maintenance_list, model_names
from metering.views_incidents.forms import MaintenanceForm, _service_errors
from portal import clock
from portal.decorators import role_required
from portal.models import Role
from portal.periods import Period


@role_required(Role.OPERATOR)
def maintenance(request):
    """Maintenance windows: announce one (it must start in the future), cancel one not yet
    started, see upcoming and recent ones."""
    form = MaintenanceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            window = maintenance_window_create(**form.cleaned_data, by=request.user)
        except ValidationError as exc:
            _service_errors(form, exc)
        else:
            messages.success(request, f"Maintenance “{window.title}” announced.")
            return redirect("maintenance")
    now = clock.now()
    windows = maintenance_list(
        period=Period(now - timedelta(days=STATUS_DAYS), now + timedelta(days=366))
    )
    return render(
        request,
        "metering/incidents_maintenance.html",
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
