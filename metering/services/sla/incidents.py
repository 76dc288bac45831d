"""Incident writes: open one, post its public updates, correct its record."""

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db import transaction

from metering.models import (
    Deployment,
    Incident,
    IncidentImpact,
    IncidentSeverity,
    IncidentStatus,
    IncidentUpdate,
    Pool,
)
from metering.services.sla.events import incident_event_raise
from metering.services.sla.scope import UNSET, check_title, raise_if_any, set_scope
from portal import clock
from portal.access import acting_user
from portal.closing import span_closed_check
from portal.errors import FieldError
from portal.models import Tenant
from portal.services import audit_object, audit_record, audit_snapshot

# Clocks disagree a little: a time this far ahead of the server's is still "now".
CLOCK_TOLERANCE = timedelta(minutes=5)

STATUS_ORDER = list(IncidentStatus.values)


def _not_future(field: str, value: datetime, now: datetime, errors: dict) -> None:
    if value > now + CLOCK_TOLERANCE:
        errors.setdefault(field, "must not be in the future")


def _not_in_closed_month(field: str, start: datetime, end: datetime | None, errors: dict) -> None:
    """An incident over [start, end) (end None: still open) may not overlap a closed month."""
    try:
        span_closed_check(start=start, end=end, field=field)
    except FieldError as error:
        errors.setdefault(error.field, error.message)


def _check_choice(field: str, value: str, choices: type, errors: dict) -> None:
    if value not in choices.values:
        errors.setdefault(field, f"must be one of {', '.join(choices.values)}")


@transaction.atomic
def incident_create(
    *,
    title: str,
    severity: str,
    impact: str,
    started_at: datetime,
    resolved_at: datetime | None = None,
    status: str = IncidentStatus.INVESTIGATING,
    deployments: Iterable[Deployment] = (),
    pools: Iterable[Pool] = (),
    tenants: Iterable[Tenant] = (),
    message: str = "",
    cause: str = "",
    remediation: str = "",
    by: User | None,
    now: datetime | None = None,
) -> Incident:
    """Open an incident with its first public update (at `started_at`, carrying `message`).
    Giving `resolved_at` records a past incident: it is resolved by a second update then."""
    now = now or clock.now()
    title, status, resolved_at = _create_checked(
        title=title, severity=severity, impact=impact, status=status, started_at=started_at,
        resolved_at=resolved_at, now=now,
    )  # fmt: skip
    incident = Incident.objects.create(
        title=title,
        severity=severity,
        impact=impact,
        status=status,
        started_at=started_at,
        resolved_at=resolved_at,
        cause=cause.strip(),
        remediation=remediation.strip(),
        created_by=acting_user(by),
    )
    set_scope(incident, deployments=deployments, pools=pools, tenants=tenants)
    _opening_updates(incident, status=status, message=message)
    audit_object(obj=incident, actor=by, action="create", object_type="incident")
    incident_event_raise(
        incident=incident, message=message.strip(), at=resolved_at or started_at, now=now
    )
    return incident


def _create_checked(*, title, severity, impact, status, started_at, resolved_at, now):
    """A new incident's fields checked (every error named, then raised together): its
    title, status and resolution time, a past incident's resolved."""
    errors: dict[str, str] = {}
    title = check_title(title, errors)
    _check_choice("severity", severity, IncidentSeverity, errors)
    _check_choice("impact", impact, IncidentImpact, errors)
    _check_choice("status", status, IncidentStatus, errors)
    _not_future("started_at", started_at, now, errors)
    _not_in_closed_month("started_at", started_at, resolved_at, errors)
    if resolved_at is not None:
        _not_future("resolved_at", resolved_at, now, errors)
        if resolved_at < started_at:
            errors.setdefault("resolved_at", "must not precede started_at")
        status = IncidentStatus.RESOLVED
    elif status == IncidentStatus.RESOLVED:
        resolved_at = max(now, started_at)
    raise_if_any(errors)
    return title, status, resolved_at


def _opening_updates(incident: Incident, *, status: str, message: str) -> None:
    """The opening update holds from the start (the incident was under way before it was
    posted); a past incident recorded as resolved gets its resolution as a second update."""
    IncidentUpdate.objects.create(
        incident=incident,
        time=incident.started_at,
        status=IncidentStatus.INVESTIGATING if status == IncidentStatus.RESOLVED else status,
        message=message.strip(),
        created_by=incident.created_by,
    )
    if incident.resolved_at is not None:
        IncidentUpdate.objects.create(
            incident=incident,
            time=incident.resolved_at,
            status=IncidentStatus.RESOLVED,
            created_by=incident.created_by,
        )


def _update_check(incident: Incident, *, status: str, impact: str, time, now) -> None:
    """An update's status, impact and time checked against the incident and its latest
    update: never before them, status only forward, no impact once resolved."""
    errors: dict[str, str] = {}
    _check_choice("status", status, IncidentStatus, errors)
    if impact:
        _check_choice("impact", impact, IncidentImpact, errors)
    _not_future("time", time, now, errors)
    if time < incident.started_at:
        errors.setdefault("time", "must not precede the incident's start")
    latest = incident.updates.order_by("-time", "-id").first()
    if latest is not None and time < latest.time:
        errors.setdefault(
            "time", f"must not precede the latest update ({latest.time:%Y-%m-%d %H:%M:%S} UTC)"
        )
    if status in STATUS_ORDER and STATUS_ORDER.index(status) < STATUS_ORDER.index(incident.status):
        errors.setdefault(
            "status",
            f"cannot go back from {incident.status} to {status} "
            "(investigating → identified → monitoring → resolved)",
        )
    if impact and incident.status == IncidentStatus.RESOLVED:
        errors.setdefault("impact", "the incident is resolved: its impact no longer changes")
    raise_if_any(errors)


@transaction.atomic
def incident_update_add(
    *,
    incident: Incident,
    status: str,
    message: str = "",
    impact: str = "",
    time: datetime | None = None,
    by: User | None,
    now: datetime | None = None,
) -> IncidentUpdate:
    """Post a public update: the status from `time` (default now) on, and the impact too when
    given. Status only moves forward; the update that resolves sets `resolved_at`."""
    now = now or clock.now()
    time = time or now
    incident = Incident.objects.select_for_update().get(pk=incident.pk)
    _update_check(incident, status=status, impact=impact, time=time, now=now)
    before = audit_snapshot(incident)
    update = IncidentUpdate.objects.create(
        incident=incident,
        time=time,
        status=status,
        impact=impact,
        message=message.strip(),
        created_by=acting_user(by),
    )
    if status != incident.status:
        incident.status = status
        if status == IncidentStatus.RESOLVED:
            incident.resolved_at = time
        incident.save(update_fields=["status", "resolved_at", "updated_at"])
    audit_record(
        actor=by,
        action="update",
        object_type="incident",
        object_id=incident.pk,
        before=before,
        after={
            **audit_snapshot(incident),
            "update": {"time": time.isoformat(), "status": status, "impact": impact},
        },
    )
    incident_event_raise(incident=incident, message=update.message, at=time, now=now)
    return update


@transaction.atomic
def incident_edit(
    *,
    incident: Incident,
    by: User | None,
    now: datetime | None = None,
    title: str = UNSET,
    severity: str = UNSET,
    impact: str = UNSET,
    started_at: datetime = UNSET,
    resolved_at: datetime | None = UNSET,
    deployments: Iterable[Deployment] = UNSET,
    pools: Iterable[Pool] = UNSET,
    tenants: Iterable[Tenant] = UNSET,
    cause: str = UNSET,
    remediation: str = UNSET,
) -> Incident:
    """Correct an incident's record; fields not passed stay. `impact` is the opening impact
    (an impact that changes later is an update). `resolved_at` may be corrected only once
    resolved: an incident is resolved by posting an update."""
    now = now or clock.now()
    incident = Incident.objects.select_for_update().get(pk=incident.pk)
    before = audit_snapshot(incident)
    errors: dict[str, str] = {}
    if title is not UNSET:
        incident.title = check_title(title, errors)
    if severity is not UNSET:
        _check_choice("severity", severity, IncidentSeverity, errors)
        incident.severity = severity
    if impact is not UNSET:
        _check_choice("impact", impact, IncidentImpact, errors)
        incident.impact = impact
    if started_at is not UNSET:
        _start_move(incident, started_at, now=now, errors=errors)
    if resolved_at is not UNSET:
        _resolution_correct(incident, resolved_at, now=now, errors=errors)
    if incident.resolved_at is not None and incident.resolved_at < incident.started_at:
        errors.setdefault("resolved_at", "must not precede started_at")
    for field, value in (("cause", cause), ("remediation", remediation)):
        if value is not UNSET:
            setattr(incident, field, (value or "").strip())
    # Its impact and scope are figures of every month it spans: none of them closed
    # (cause, remediation, title and updates' messages stay editable).
    changed = {"impact": impact != before.get("impact")} if impact is not UNSET else {}
    for field, value in (("deployments", deployments), ("pools", pools), ("tenants", tenants)):
        if value is not UNSET:
            now_ids = set(getattr(incident, field).values_list("pk", flat=True))
            changed[field] = {item.pk for item in value} != now_ids
    for field, is_changed in changed.items():
        if is_changed:
            _not_in_closed_month(field, incident.started_at, incident.resolved_at, errors)
    raise_if_any(errors)
    incident.save()
    set_scope(incident, deployments=deployments, pools=pools, tenants=tenants)
    if audit_snapshot(incident) != before:  # a correction that changes nothing is not one
        audit_object(obj=incident, actor=by, action="update", object_type="incident", before=before)
    return incident


def _start_move(incident: Incident, started_at: datetime, *, now, errors: dict) -> None:
    """A corrected start: not in the future nor moved across a closed month, not after the
    second update; the opening update moves with it."""
    _not_future("started_at", started_at, now, errors)
    if started_at != incident.started_at:
        _not_in_closed_month("started_at", started_at, incident.resolved_at, errors)
    first, *later = incident.updates.order_by("time", "id")
    if later and started_at > later[0].time:
        errors.setdefault(
            "started_at",
            f"must not be after the second update ({later[0].time:%Y-%m-%d %H:%M:%S} UTC)",
        )
    elif first.time == incident.started_at:
        first.time = started_at  # the opening update moves with the start
        first.save(update_fields=["time"])
    incident.started_at = started_at


def _resolution_correct(
    incident: Incident, resolved_at: datetime | None, *, now, errors: dict
) -> None:
    """A corrected resolution time, of a resolved incident only (an open one is resolved
    by an update); what moves, the span between the two ends, touches no closed month."""
    if incident.resolved_at is None and resolved_at is not None:
        errors.setdefault(
            "resolved_at",
            'resolve an open incident by posting an update with status "resolved"',
        )
    elif resolved_at is None and incident.resolved_at is not None:
        errors.setdefault("resolved_at", "a resolved incident stays resolved")
    elif resolved_at is not None and resolved_at != incident.resolved_at:
        _not_future("resolved_at", resolved_at, now, errors)
        moved = sorted((resolved_at, incident.resolved_at))
        _not_in_closed_month("resolved_at", moved[0], moved[1], errors)
        _move_resolution(incident, resolved_at, errors)
        incident.resolved_at = resolved_at


def _move_resolution(incident: Incident, resolved_at: datetime, errors: dict) -> None:
    """The update that resolved the incident moves with a corrected `resolved_at`."""
    updates = list(incident.updates.order_by("time", "id"))
    index = next((i for i, u in enumerate(updates) if u.status == IncidentStatus.RESOLVED), None)
    if index is None:
        return
    if index and resolved_at < updates[index - 1].time:
        errors.setdefault(
            "resolved_at",
            f"must not precede the update before the resolution "
            f"({updates[index - 1].time:%Y-%m-%d %H:%M:%S} UTC)",
        )
        return
    updates[index].time = resolved_at
    updates[index].save(update_fields=["time"])
