"""Reads of reservations (kpis.md 3d) and of the service tiers' multipliers: the terms rating
covers with, the reservations a user may see, and their figures (capacity, covered usage,
fees, utilization) from the reservations themselves and billing's rated usage, never from
raw events. Tenant scoping is portal.access's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal

from django.db.models import Q, QuerySet

from billing.domain.rating.types import TierMultiplier
from billing.domain.reservations import GpusFrom, ReservationTerms, VersionAt
from billing.models import Reservation, ReservationGpus, ServiceTierMultiplier
from metering.selectors.factory import DeploymentVersions, deployment_list
from portal.access import tenant_scoped


def _overlapping(start: datetime, end: datetime) -> Q:
    """Reservations holding some of [start, end)."""
    return Q(starts_at__lt=end) & (Q(ends_at__isnull=True) | Q(ends_at__gt=start))


def reservations_overlapping(*, start: datetime, end: datetime) -> QuerySet[Reservation]:
    """Every reservation holding some of [start, end), its deployment and GPUs read with it."""
    return (
        Reservation.objects.filter(_overlapping(start, end))
        .select_related("deployment", "tenant")
        .prefetch_related("gpus")
    )


def terms_of(
    reservation: Reservation, *, gpus: Iterable[ReservationGpus] | None = None
) -> ReservationTerms:
    """A reservation as rating and its figures read it: with its GPU versions (prefetched or
    read), or with `gpus` (a change not stored yet: a new reservation's first, a rise)."""
    versions = reservation.gpus.all() if gpus is None else gpus
    return ReservationTerms(
        id=reservation.pk or 0,
        deployment=reservation.deployment.slug,
        hourly_rate=reservation.hourly_rate,
        starts_at=reservation.starts_at,
        ends_at=reservation.ends_at,
        gpus=tuple(
            GpusFrom(version.effective_from, version.gpus)
            for version in sorted(versions, key=lambda v: v.effective_from)
        ),
    )


def reservation_terms(
    *, tenant_ids: Iterable[int] | None, start: datetime, end: datetime
) -> dict[int, list[ReservationTerms]]:
    """Per tenant id (of `tenant_ids`, None: every tenant), its reservations holding some of
    [start, end), in two queries."""
    rows = reservations_overlapping(start=start, end=end)
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=list(tenant_ids))
    terms: dict[int, list[ReservationTerms]] = defaultdict(list)
    for reservation in rows:
        terms[reservation.tenant_id].append(terms_of(reservation))
    return dict(terms)


def reserving_tenants(*, start: datetime, end: datetime) -> set[int]:
    """The tenants holding a reservation in some of [start, end)."""
    return set(
        Reservation.objects.filter(_overlapping(start, end)).values_list("tenant_id", flat=True)
    )


def reserved_versions() -> VersionAt:
    """(R_ref, w_in) of a deployment (by slug) in force at an hour's start: what a
    reservation's capacity and the production it covers are weighed by."""
    versions = DeploymentVersions()
    ids = dict(deployment_list().values_list("slug", "pk"))

    def version_at(deployment: str, hour: datetime) -> tuple[Decimal, Decimal] | None:
        version = versions.at(ids[deployment], hour)
        return None if version is None else (version.r_ref, version.w_in)

    return version_at


def tier_multiplier_list() -> QuerySet[ServiceTierMultiplier]:
    """Every recorded multiplier of a service tier, per tier in time order."""
    return ServiceTierMultiplier.objects.order_by("service_tier", "effective_from")


def tier_multipliers() -> list[TierMultiplier]:
    """Every recorded multiplier of a service tier (a tier without one in force takes its
    default, billing.domain.rating.books)."""
    return [
        TierMultiplier(
            service_tier=row.service_tier,
            multiplier=row.multiplier,
            effective_from=row.effective_from,
        )
        for row in tier_multiplier_list()
    ]


def reservation_list(*, user) -> QuerySet[Reservation]:
    """The reservations the user may see: every tenant's for operators and finance, its own
    for a member, none for an investor (aggregates only)."""
    return tenant_scoped(
        Reservation.objects.select_related("tenant", "deployment__pool", "deployment__model")
        .prefetch_related("gpus")
        .order_by("tenant__slug", "starts_at", "pk"),
        user=user,
    )
