"""Maintenance window writes: announce, change or withdraw one before it starts."""

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from metering.models import Deployment, MaintenanceWindow, Pool
from metering.services.sla.scope import UNSET, check_title, raise_if_any, set_scope
from portal import clock
from portal.services import audit_record, audit_snapshot


def _check_window(starts_at: datetime, ends_at: datetime, now: datetime, errors: dict) -> None:
    if starts_at <= now:
        errors.setdefault("starts_at", "must be in the future: maintenance is announced in advance")
    if ends_at <= starts_at:
        errors.setdefault("ends_at", "must be after starts_at")


@transaction.atomic
def maintenance_window_create(
    *,
    title: str,
    starts_at: datetime,
    ends_at: datetime,
    deployments: Iterable[Deployment] = (),
    pools: Iterable[Pool] = (),
    description: str = "",
    by: User | None,
    now: datetime | None = None,
) -> MaintenanceWindow:
    """Announce maintenance [starts_at, ends_at) on deployments (none named: all); it must
    start after now (`now` is the announcement time)."""
    now = now or clock.now()
    errors: dict[str, str] = {}
    title = check_title(title, errors)
    _check_window(starts_at, ends_at, now, errors)
    raise_if_any(errors)
    window = MaintenanceWindow.objects.create(
        title=title,
        description=description.strip(),
        starts_at=starts_at,
        ends_at=ends_at,
        announced_at=now,
        created_by=by if by is not None and by.is_authenticated else None,
    )
    set_scope(window, deployments=deployments, pools=pools)
    audit_record(
        actor=by,
        action="create",
        object_type="maintenance_window",
        object_id=str(window.pk),
        after=audit_snapshot(window),
    )
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
) -> MaintenanceWindow:
    """Change a window that has not started yet (it is re-announced now)."""
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
    _check_window(window.starts_at, window.ends_at, now, errors)
    raise_if_any(errors)
    window.announced_at = now
    window.save()
    set_scope(window, deployments=deployments, pools=pools)
    audit_record(
        actor=by,
        action="update",
        object_type="maintenance_window",
        object_id=str(window.pk),
        before=before,
        after=audit_snapshot(window),
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
    before = audit_snapshot(window)
    pk = window.pk
    window.delete()
    audit_record(
        actor=by,
        action="delete",
        object_type="maintenance_window",
        object_id=str(pk),
        before=before,
    )
