"""Reservations (kpis.md 3d) and the service tiers' multipliers: every write, each asking the
rate stage to rate the tenant's usage again from the first hour it changes (billing's queue,
billing.services.rating), so closed months are never rewritten: a reservation may not start,
rise or end inside one.

The rules: a reservation starts on a whole UTC hour not before the end of the last closed
month (400 naming `starts_at`); its GPUs rise from a whole hour not in the past (a new
version) and never fall (409 naming `gpus`); a term reservation cannot be cancelled before
its end (409 naming `ends_at`); a `none` one ends at its cancellation, not in the past; the
GPUs reserved on a pool at any instant never exceed its `gpu_count` (409 naming `gpus`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Model

from billing.domain.reservations import (
    NONE,
    TERMS,
    ReservationConflict,
    is_whole_hour,
    pool_peak,
    term_end,
)
from billing.models import RatedChange, Reservation, ReservationGpus, ServiceTierMultiplier
from billing.selectors.reservations import terms_of
from billing.services.rating import rating_queue
from metering.domain.usage.fields import SERVICE_TIERS, STANDARD
from portal import clock
from portal.closing import version_closed_check
from portal.errors import FieldError
from portal.models import Tenant
from portal.periods import hour_floor
from portal.pipeline import log_append
from portal.services import audit_object, audit_record
from portal.versions import effective_from_check, version_create


def _pool_check(*, reservation: Reservation, changed) -> None:
    """The GPUs reserved on the reservation's pool (every reservation on its deployments,
    this one as `changed` terms) never exceed the pool's `gpu_count`: 409 naming `gpus`."""
    pool = reservation.deployment.pool
    others = (
        Reservation.objects.select_for_update()
        .filter(deployment__pool=pool)
        .exclude(pk=reservation.pk)
        .select_related("deployment")
        .prefetch_related("gpus")
    )
    terms = [terms_of(other) for other in others] + [changed]
    peak, when = pool_peak(terms, start=changed.starts_at, end=changed.ends_at)
    if peak > pool.gpu_count:
        raise ReservationConflict(
            "gpus",
            f"{pool.slug} has {pool.gpu_count} GPUs: reservations would hold {peak} of them "
            f"from {when:%Y-%m-%d %H:%M} UTC",
        )


HOUR = timedelta(hours=1)


def _changed_from(*, tenant: Tenant, start: datetime) -> None:
    """A tenant's reservations changed from `start` on: its usage is rated again from there,
    and the hours from there to now are named in billing's change log, so the days measured
    since are measured again (their reserved GPU-seconds and capacity come from the
    reservations, not only from rated usage). In the caller's transaction."""
    rating_queue(tenant=tenant, start=start)
    end = hour_floor(clock.now()) + HOUR
    if start < end:
        change = RatedChange(tenant_id=tenant.pk, start=hour_floor(start), end=end)
        log_append(RatedChange, [change], log="billing.rated")


@transaction.atomic
def reservation_create(
    *,
    tenant: Tenant,
    deployment: Model,  # a metering Deployment
    gpus: int,
    hourly_rate: Decimal,
    term: str,
    starts_at: datetime,
    by=None,
) -> Reservation:
    """Reserve `gpus` GPUs of the deployment's pool for the tenant from `starts_at` (a whole
    UTC hour, not before the end of the last closed month) at `hourly_rate` per GPU-hour,
    for `term` (a term ends that many months later; `none`, when cancelled)."""
    if term not in TERMS:
        raise FieldError("term", f"must be one of {', '.join(TERMS)}")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus <= 0:
        raise FieldError("gpus", "must be a positive whole number of GPUs")
    if hourly_rate < 0:
        raise FieldError("hourly_rate", "must not be negative")
    starts_at = starts_at.astimezone(UTC)
    if not is_whole_hour(starts_at):
        raise FieldError("starts_at", "must be a whole UTC hour (minutes and seconds 0)")
    version_closed_check(moment=starts_at, field="starts_at")
    reservation = Reservation(
        tenant=tenant,
        deployment=deployment,
        hourly_rate=hourly_rate,
        currency=settings.FACTORY_CURRENCY,
        term=term,
        starts_at=starts_at,
        ends_at=term_end(starts_at, term),
    )
    first = ReservationGpus(reservation=reservation, effective_from=starts_at, gpus=gpus)
    _pool_check(reservation=reservation, changed=terms_of(reservation, gpus=[first]))
    reservation.save()
    first.reservation = reservation
    first.save()
    audit_object(obj=reservation, actor=by, action="reservation.create", object_type="reservation")
    _changed_from(tenant=tenant, start=starts_at)
    return reservation


@transaction.atomic
def reservation_raise(
    *, reservation: Reservation, gpus: int, effective_from: datetime, by=None
) -> ReservationGpus:
    """The reservation's GPUs from `effective_from` (a whole UTC hour, not in the past, before
    its end) on: more than it holds then (a fall is a 409 naming `gpus`)."""
    reservation = Reservation.objects.select_for_update().get(pk=reservation.pk)
    effective_from = effective_from.astimezone(UTC)
    effective_from_check(effective_from)
    if effective_from < clock.now():
        raise FieldError("effective_from", "must not be in the past")
    if effective_from < reservation.starts_at:
        raise FieldError("effective_from", "must not be before the reservation starts")
    if reservation.ends_at is not None and effective_from >= reservation.ends_at:
        raise FieldError(
            "effective_from",
            f"must be before the reservation ends ({reservation.ends_at:%Y-%m-%d %H:%M} UTC)",
        )
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus <= 0:
        raise FieldError("gpus", "must be a positive whole number of GPUs")
    versions = list(reservation.gpus.all())
    held = terms_of(reservation).gpus_at(effective_from)
    if gpus <= held:
        raise ReservationConflict(
            "gpus",
            f"must be more than the {held} GPUs it holds then: a reservation's GPUs rise, "
            "never fall",
        )
    later = [v for v in versions if v.effective_from > effective_from]
    if later and gpus > min(later, key=lambda v: v.effective_from).gpus:
        after = min(later, key=lambda v: v.effective_from)
        raise ReservationConflict(
            "gpus",
            f"must be at most the {after.gpus} GPUs it holds from "
            f"{after.effective_from:%Y-%m-%d %H:%M} UTC: its GPUs never fall",
        )
    version = ReservationGpus(reservation=reservation, effective_from=effective_from, gpus=gpus)
    _pool_check(
        reservation=reservation,
        changed=terms_of(reservation, gpus=[*versions, version]),
    )
    version_create(
        version,
        series={"reservation": reservation},
        conflict="the reservation already changes its GPUs at that instant",
        by=by,
    )
    _changed_from(tenant=reservation.tenant, start=effective_from)
    return version


@transaction.atomic
def reservation_cancel(*, reservation: Reservation, at: datetime, by=None) -> Reservation:
    """End a `none` reservation at `at` (not in the past, whole seconds). A term reservation
    ends at its `ends_at`: cancelling it before then is a 409 naming `ends_at`."""
    reservation = Reservation.objects.select_for_update().get(pk=reservation.pk)
    at = at.astimezone(UTC)
    if reservation.term != NONE:
        if reservation.ends_at is not None and at < reservation.ends_at:
            raise ReservationConflict(
                "ends_at",
                f"a {reservation.term} reservation runs until {reservation.ends_at:%Y-%m-%d %H:%M} "
                "UTC: it cannot be cancelled before then",
            )
        return reservation  # it ends then anyway
    if at.microsecond:
        raise FieldError("at", "must be a whole second")
    if at < clock.now():
        raise FieldError("at", "must not be in the past")
    version_closed_check(moment=at, field="at")
    if reservation.ends_at is not None and at >= reservation.ends_at:
        raise ReservationConflict(
            "at", f"the reservation already ends at {reservation.ends_at:%Y-%m-%d %H:%M:%S} UTC"
        )
    before = reservation.ends_at
    reservation.ends_at = max(at, reservation.starts_at)
    reservation.cancelled_at = clock.now()
    reservation.save(update_fields=["ends_at", "cancelled_at"])
    audit_record(
        actor=by,
        action="reservation.cancel",
        object_type="reservation",
        object_id=str(reservation.pk),
        before={"ends_at": before.isoformat() if before else None},
        after={"ends_at": reservation.ends_at.isoformat()},
    )
    _changed_from(tenant=reservation.tenant, start=hour_floor(reservation.ends_at))
    return reservation


@transaction.atomic
def service_tier_create(
    *, service_tier: str, multiplier: Decimal, effective_from: datetime, by=None
) -> ServiceTierMultiplier:
    """A tier's multiplier of the standard tier's prices from `effective_from` on (a whole
    UTC hour, not inside a closed month); every tenant's usage from then is rated again."""
    if service_tier not in SERVICE_TIERS or service_tier == STANDARD:
        raise FieldError(
            "tier", f"must be one of {', '.join(t for t in SERVICE_TIERS if t != STANDARD)}"
        )
    if multiplier < 0:
        raise FieldError("multiplier", "must not be negative")
    effective_from_check(effective_from)
    rating_queue(start=effective_from)
    return version_create(
        ServiceTierMultiplier(
            service_tier=service_tier, multiplier=multiplier, effective_from=effective_from
        ),
        series={"service_tier": service_tier},
        conflict=f"{service_tier} already has a multiplier from that instant",
        by=by,
    )
