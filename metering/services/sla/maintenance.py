"""Maintenance window writes: announce, change or withdraw one before it starts, or import a
past one with the `announced_at` it had."""

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from metering.models import Deployment, MaintenanceWindow, Pool
from metering.services.sla.scope import UNSET, check_title, raise_if_any, set_scope
from portal import clock
from portal.access import acting_user
from portal.closing import span_closed_check
from portal.errors import FieldError
from portal.services import audit_object, audit_snapshot, object_delete


def _check_window(
    starts_at: datetime,
    ends_at: datetime,
    announced_at: datetime | None,
    now: datetime,
    errors: dict,
) -> None:
    """Announced now (`announced_at` None), a window starts in the future; a past one is
    recorded with the `announced_at` it had, before it started and not in the future. None
    starts in a closed month (its SLA and invoices are final)."""
    if announced_at is None:
        if starts_at <= now:
            errors.setdefault(
                "starts_at", "must be in the future: maintenance is announced in advance"
            )
    elif announced_at > now:
        errors.setdefault("announced_at", "must not be in the future")
    elif announced_at >= starts_at:
        errors.setdefault(
            "announced_at",
            "must be before starts_at: a window counts only when announced before it starts",
        )
    if ends_at <= starts_at:
        errors.setdefault("ends_at", "must be after starts_at")
    try:
        span_closed_check(start=starts_at, end=ends_at, field="starts_at")
    except FieldError as error:
        errors.setdefault(error.field, error.message)


@transaction.atomic
def maintenance_window_create(
    *,
    title: str,
    starts_at: datetime,
    ends_at: datetime,
    deployments: Iterable[Deployment] = (),
    pools: Iterable[Pool] = (),
    description: str = "",
    announced_at: datetime | None = None,
    by: User | None,
    now: datetime | None = None,
) -> MaintenanceWindow:
    """Record maintenance [starts_at, ends_at) on deployments (none named: all), told to
    tenants at `announced_at`: by default now, so it must start after now; a past window is
    imported with the `announced_at` it had (before it started, not in the future)."""
    now = now or clock.now()
    errors: dict[str, str] = {}
    title = check_title(title, errors)
    _check_window(starts_at, ends_at, announced_at, now, errors)
    raise_if_any(errors)
    window = MaintenanceWindow.objects.create(
        title=title,
        description=description.strip(),
        starts_at=starts_at,
        ends_at=ends_at,
        announced_at=announced_at or now,
        created_by=acting_user(by),
    )
    set_scope(window, deployments=deployments, pools=pools)
    audit_object(obj=window, actor=by, action="create", object_type="maintenance_window")
    return window


def _refuse_started(window: MaintenanceWindow, now: datetime) -> None:
    if window.starts_at <= now:
        raise ValidationError(
            {"starts_at": "this maintenance has started: it can no longer change"}
        )


@transaction.atomic
def maintenance_window_edit(
    *,
    window: MaintenanceWindow,
    by: User | None,
    now: datetime | None = None,
    title: str = UNSET,
    description: str = UNSET,
    starts_at: datetime = UNSET,
    ends_at: datetime = UNSET,
    deployments: Iterable[Deployment] = UNSET,
    pools: Iterable[Pool] = UNSET,
    announced_at: datetime | None = UNSET,
) -> MaintenanceWindow:
    """Change a window that has not started yet; it is re-announced, now unless
    `announced_at` says when tenants were told of the change."""
    now = now or clock.now()
    window = MaintenanceWindow.objects.select_for_update().get(pk=window.pk)
    _refuse_started(window, now)
    before = audit_snapshot(window)
    errors: dict[str, str] = {}
    if title is not UNSET:
        window.title = check_title(title, errors)
    if description is not UNSET:
        window.description = (description or "").strip()
    if starts_at is not UNSET:
        window.starts_at = starts_at
    if ends_at is not UNSET:
        window.ends_at = ends_at
    announced_at = None if announced_at is UNSET else announced_at
    _check_window(window.starts_at, window.ends_at, announced_at, now, errors)
    raise_if_any(errors)
    window.announced_at = announced_at or now
    window.save()
    set_scope(window, deployments=deployments, pools=pools)
    audit_object(
        obj=window, actor=by, action="update", object_type="maintenance_window", before=before
    )
    return window


@transaction.atomic
def maintenance_window_cancel(
    *, window: MaintenanceWindow, by: User | None, now: datetime | None = None
) -> None:
    """Withdraw a window that has not started yet."""
    now = now or clock.now()
    window = MaintenanceWindow.objects.select_for_update().get(pk=window.pk)
    _refuse_started(window, now)
    object_delete(obj=window, actor=by, object_type="maintenance_window")
