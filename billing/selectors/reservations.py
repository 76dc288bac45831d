"""Reads of reservations (kpis.md 3d) and of the service tiers' multipliers: the terms rating
covers with, the reservations a user may see, and their figures (capacity, covered usage,
fees, utilization) from the reservations themselves and billing's rated usage, never from
raw events. Tenant scoping is portal.access's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from functools import cached_property, reduce
from operator import or_

from django.db.models import Q, QuerySet

from billing.domain.rating.types import TierMultiplier
from billing.domain.reservations import (
    GpusFrom,
    HourFigures,
    ReservationTerms,
    coverage_of,
    hours_by_version,
    pool_totals,
    reservation_figures,
)
from billing.models import RatedUsage, Reservation, ReservationGpus, ServiceTierMultiplier
from metering.domain.burn import BUCKET
from metering.domain.usage.production import production_tokens
from metering.selectors.burn import bucket_tokens, burn_window_end
from metering.selectors.factory import DeploymentVersions, deployment_list
from portal.access import tenant_scoped
from portal.alert_kinds import Evaluation, Finding
from portal.periods import Period, hour_floor, month_start, next_month


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


def reservations_of_month(*, tenants, month: datetime) -> list[tuple[int, int, int]]:
    """(id, tenant id, deployment id) of the tenants' reservations holding some of the UTC
    month starting at `month`."""
    return list(
        Reservation.objects.filter(
            _overlapping(month, next_month(month)), tenant_id__in=list(tenants)
        ).values_list("pk", "tenant_id", "deployment_id")
    )


def reserving_tenants(*, start: datetime, end: datetime) -> set[int]:
    """The tenants holding a reservation in some of [start, end)."""
    return set(
        Reservation.objects.filter(_overlapping(start, end)).values_list("tenant_id", flat=True)
    )


def reserving_tenant_months(*, start: datetime, end: datetime) -> set[tuple[datetime, int]]:
    """(UTC month, tenant id) of every month from `start`'s to the one before `end` (a month
    start) that a reservation holds some of: one query, however many months."""
    held = set()
    for tenant_id, starts_at, ends_at in Reservation.objects.filter(
        _overlapping(start, end)
    ).values_list("tenant_id", "starts_at", "ends_at"):
        month = max(month_start(start), month_start(starts_at))
        while month < end and (ends_at is None or month < ends_at):
            held.add((month, tenant_id))
            month = next_month(month)
    return held


class ReservedVersions:
    """(R_ref, w_in) of a deployment (by slug) in force at an hour's start: what a
    reservation's capacity and the production it covers are weighed by (a VersionAt), and
    the runs of hours that share one (a VersionRuns). Read at the first question."""

    @cached_property
    def versions(self) -> DeploymentVersions:
        return DeploymentVersions()

    @cached_property
    def ids(self) -> dict[str, int]:
        return dict(deployment_list().values_list("slug", "pk"))

    def __call__(self, deployment: str, hour: datetime, /) -> tuple[Decimal, Decimal] | None:
        version = self.versions.at(self.ids[deployment], hour)
        return None if version is None else (version.r_ref, version.w_in)

    def runs(
        self, deployment: str, start: datetime, end: datetime
    ) -> Iterator[tuple[datetime, datetime, tuple[Decimal, Decimal] | None]]:
        series = self.versions.series(self.ids[deployment])
        for hour, until, version in hours_by_version(series, start, end):
            yield hour, until, None if version is None else (version.r_ref, version.w_in)


def reserved_versions() -> ReservedVersions:
    return ReservedVersions()


def reserved_by_hour(*, spans: Iterable[Period]) -> dict[tuple[int, datetime], tuple]:
    """Per (deployment id, hour) of the hours inside the spans (a span's bound may cut an
    hour): the GPU-seconds reserved on it (Σ gpus × t, kpis.md 3d's `reserved`) and their
    capacity (Σ cap, tok at the R_ref in force at the hour's start: utilization's
    denominator), from the reservations themselves (two queries a span)."""
    version_at = reserved_versions()
    seconds: dict[tuple[int, datetime], int] = defaultdict(int)
    slugs: dict[int, str] = {}
    for span in spans:
        for reservation in reservations_overlapping(start=span.start, end=span.end):
            deployment_id = reservation.deployment_id
            slugs[deployment_id] = reservation.deployment.slug
            terms = terms_of(reservation)
            for hour, gpu_seconds in terms.gpu_seconds_by_hour(span.start, span.end):
                seconds[deployment_id, hour] += gpu_seconds
    held: dict[tuple[int, datetime], tuple] = {}
    for (deployment_id, hour), gpu_seconds in seconds.items():
        version = version_at(slugs[deployment_id], hour)
        if gpu_seconds and version is not None:
            held[deployment_id, hour] = (gpu_seconds, gpu_seconds * version[0])
    return held


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


def reservation_utilization(
    reservation: Reservation, *, start: datetime, end: datetime
) -> list[HourFigures]:
    """The reservation's figures per hour of [start, end) (kpis.md 3d): its cap and fees from
    its terms, its share of its tenant's covered usage on its deployment from billing's rated
    usage (never from raw events)."""
    return reservations_utilization([reservation], start=start, end=end)[reservation.pk]


def reservations_utilization(
    reservations: Iterable[Reservation], *, start: datetime, end: datetime
) -> dict[int, list[HourFigures]]:
    """reservation_utilization of each of `reservations` (by id), read in three queries
    however many (`_pools_read`)."""
    reservations = list(reservations)
    pools, version_at = _pools_read(reservations, start=start, end=end)
    return {
        r.pk: reservation_figures(
            terms_of(r),
            pooled=pools[r.tenant_id, r.deployment_id][0],
            version_at=version_at,
            covered=pools[r.tenant_id, r.deployment_id][1],
            start=start,
            end=end,
        )
        for r in reservations
    }


def reservations_totals(
    reservations: Iterable[Reservation], *, start: datetime, end: datetime
) -> dict[int, HourFigures | None]:
    """reservation_utilization of each of `reservations` (by id) summed over [start, end)
    (None: it holds no GPUs then), each pool's at once and without walking its hours
    (billing.domain.reservations.pool_totals), in the three queries of `_pools_read`."""
    reservations = list(reservations)
    pools, versions = _pools_read(reservations, start=start, end=end)
    totals: dict[int, HourFigures | None] = {}
    for pooled, covered in pools.values():
        totals |= pool_totals(pooled, versions=versions, covered=covered, start=start, end=end)
    return {r.pk: totals.get(r.pk) for r in reservations}


def _pools_read(
    reservations: list[Reservation], *, start: datetime, end: datetime
) -> tuple[
    dict[tuple[int, int], tuple[list[ReservationTerms], dict[datetime, tuple[Fraction, Fraction]]]],
    ReservedVersions,
]:  # fmt: skip
    """Per (tenant id, deployment id) of the reservations, the pool their figures over
    [start, end) are shares of: the tenant's reservations on the deployment then and, per
    hour, the pool's covered tok and covered realized amount from billing's rated usage;
    with the deployments' versions. Three queries however many."""
    pairs = {(r.tenant_id, r.deployment_id) for r in reservations}
    version_at = reserved_versions()
    if not pairs:
        return {}, version_at
    pairs_q = reduce(or_, (Q(tenant_id=t, deployment_id=d) for t, d in pairs))
    pools: dict[tuple[int, int], tuple[list, dict]] = {pair: ([], {}) for pair in pairs}
    for other in reservations_overlapping(start=start, end=end).filter(pairs_q):
        pools[other.tenant_id, other.deployment_id][0].append(terms_of(other))
    slugs = {r.deployment_id: r.deployment.slug for r in reservations}
    rows = RatedUsage.objects.filter(
        pairs_q, covered=True, hour__gte=start, hour__lt=end
    ).values_list(
        "tenant_id", "deployment_id", "hour", "input_tokens", "cached_tokens", "output_tokens",
        "realized",
    )  # fmt: skip
    for tenant_id, deployment_id, hour, input_tokens, cached, output, realized in rows:
        hour = hour.astimezone(start.tzinfo)
        version = version_at(slugs[deployment_id], hour)
        w_in = Fraction(version[1]) if version is not None else Fraction(0)
        tok = production_tokens(
            output_tokens=output, input_tokens=input_tokens, cached_tokens=cached, w_in=w_in
        )
        hours = pools[tenant_id, deployment_id][1]
        before = hours.get(hour, (Fraction(0), Fraction(0)))
        hours[hour] = (before[0] + tok, before[1] + Fraction(realized))
    return pools, version_at


def reservation_overage(
    reservation: Reservation, *, start: datetime, end: datetime
) -> dict[datetime, int]:
    """Per hour of [start, end), the tokens its tenant bought on demand on its deployment
    beyond its reservations (paid, not covered): the overage."""
    overage: dict[datetime, int] = defaultdict(int)
    rows = RatedUsage.objects.filter(
        tenant_id=reservation.tenant_id,
        deployment_id=reservation.deployment_id,
        sale=RatedUsage.Sale.PAID,
        covered=False,
        hour__gte=start,
        hour__lt=end,
    ).values_list("hour", "input_tokens", "output_tokens")
    for hour, input_tokens, output in rows:
        overage[hour.astimezone(start.tzinfo)] += input_tokens + output
    return dict(overage)


def reservation_months(
    *, user, start: datetime, end: datetime
) -> list[tuple[Reservation, HourFigures | None]]:
    """The reservations the user may see, each with its figures over [start, end) summed
    (None when it holds no GPUs then)."""
    reservations = list(reservation_list(user=user))
    totals = reservations_totals(reservations, start=start, end=end)
    return [(reservation, totals[reservation.pk]) for reservation in reservations]


def _rated_tok(
    *, tenant_ids: list[int], start: datetime, end: datetime, covered: bool
) -> dict[tuple[int, str, datetime], Fraction]:
    """Per (tenant id, deployment slug, hour) of [start, end): the tok of its paid usage,
    covered or on demand, from billing's rated usage (one query)."""
    version_at = reserved_versions()
    tok: dict[tuple[int, str, datetime], Fraction] = defaultdict(Fraction)
    rows = RatedUsage.objects.filter(
        tenant_id__in=tenant_ids,
        sale=RatedUsage.Sale.PAID,
        covered=covered,
        hour__gte=start,
        hour__lt=end,
    ).values_list(
        "tenant_id", "deployment__slug", "hour", "input_tokens", "cached_tokens", "output_tokens"
    )
    for tenant_id, slug, hour, input_tokens, cached, output in rows:
        hour = hour.astimezone(start.tzinfo)
        version = version_at(slug, hour)
        tok[tenant_id, slug, hour] += production_tokens(
            output_tokens=output,
            input_tokens=input_tokens,
            cached_tokens=cached,
            w_in=Fraction(version[1]) if version is not None else Fraction(0),
        )
    return tok


def _pooled_caps(
    *, tenant_ids: list[int], start: datetime, end: datetime
) -> dict[tuple[int, str, datetime], Fraction]:
    """Per (tenant id, deployment slug, hour) of [start, end): its reservations' pooled cap."""
    version_at = reserved_versions()
    caps = {}
    for tenant_id, terms in reservation_terms(tenant_ids=tenant_ids, start=start, end=end).items():
        for (slug, hour), held in coverage_of(
            terms, version_at=version_at, start=start, end=end
        ).items():
            caps[tenant_id, slug, hour] = Fraction(held.cap)
    return caps


def reservation_overage_evaluate(rules, now: datetime) -> Evaluation:
    """A finding per rule and reserved deployment where the tenant's overage (tok bought on
    demand beyond its reservations) exceeded `percent`% of their capacity in each of the
    last `hours` complete hours; keyed by the first of them."""
    end = hour_floor(now)
    longest = max((rule.params["hours"] for rule in rules), default=1)
    start = end - timedelta(hours=longest)
    ids = sorted({rule.tenant_id for rule in rules})
    caps = _pooled_caps(tenant_ids=ids, start=start, end=end)
    overage = _rated_tok(tenant_ids=ids, start=start, end=end, covered=False)
    findings = []
    for rule in rules:
        percent, hours = rule.params["percent"], rule.params["hours"]
        first = end - timedelta(hours=hours)
        slugs = sorted({slug for t, slug, _ in caps if t == rule.tenant_id})
        for slug in slugs:
            spans = [first + timedelta(hours=h) for h in range(hours)]
            shares = []
            for hour in spans:
                cap = caps.get((rule.tenant_id, slug, hour))
                over = overage.get((rule.tenant_id, slug, hour), Fraction(0))
                if not cap or over * 100 <= cap * percent:
                    break
                shares.append(over / cap)
            else:
                findings.append(
                    Finding(
                        rule=rule,
                        window_start=first,
                        threshold=str(percent),
                        value=f"{float(min(shares)) * 100:.1f}%",
                        summary=(
                            f"{rule.tenant.name}'s overage on {slug} exceeded {percent}% of "
                            f"its reserved capacity in each of the last {hours} hours"
                        ),
                        figures={"deployment": slug, "least_share": str(round(min(shares), 6))},
                        link="/billing/reservations/",
                        scope_key=slug,
                    )
                )
    return Evaluation(findings=findings)


def reservation_underused_evaluate(rules, now: datetime) -> Evaluation:
    """A finding per rule and reserved deployment where the tenant's utilization (covered
    tok ÷ capacity) over the last `days` days (to the last complete hour) is below
    `percent`%; keyed by the day the window starts."""
    end = hour_floor(now)
    longest = max((rule.params["days"] for rule in rules), default=1)
    start = end - timedelta(days=longest)
    ids = sorted({rule.tenant_id for rule in rules})
    caps = _pooled_caps(tenant_ids=ids, start=start, end=end)
    covered = _rated_tok(tenant_ids=ids, start=start, end=end, covered=True)
    findings = []
    for rule in rules:
        percent, days = rule.params["percent"], rule.params["days"]
        first = end - timedelta(days=days)
        totals: dict[str, list[Fraction]] = defaultdict(lambda: [Fraction(0), Fraction(0)])
        for (tenant_id, slug, hour), cap in caps.items():
            if tenant_id == rule.tenant_id and hour >= first:
                totals[slug][0] += covered.get((tenant_id, slug, hour), Fraction(0))
                totals[slug][1] += cap
        for slug, (used, cap) in sorted(totals.items()):
            if not cap or used * 100 >= cap * percent:
                continue
            utilization = used / cap
            findings.append(
                Finding(
                    rule=rule,
                    window_start=first.replace(hour=0),
                    threshold=str(percent),
                    value=f"{float(utilization) * 100:.1f}%",
                    summary=(
                        f"{rule.tenant.name} used {float(utilization) * 100:.1f}% of its "
                        f"reserved capacity on {slug} over the last {days} days"
                    ),
                    figures={"deployment": slug, "utilization": str(round(utilization, 6))},
                    link="/billing/reservations/",
                    scope_key=slug,
                )
            )
    return Evaluation(findings=findings)


def reservation_status(*, user, now: datetime, tenant_id: int | None = None) -> list[dict]:
    """For gateways that route overage to shared capacity: per reservation in force now (of
    the user's, of `tenant_id` when given), its capacity (tok/s: GPUs × R_ref), its share of
    its tenant's rate on the deployment over the last complete 5 minutes metered (by cap,
    when several are pooled) and the headroom left (negative: beyond it)."""
    reservations = [
        r for r in reservation_list(user=user)
        if tenant_id is None or r.tenant_id == tenant_id
    ]  # fmt: skip
    end = burn_window_end(now=now)
    version_at = reserved_versions()
    held: list[tuple[Reservation, int, Decimal, Decimal]] = []
    pooled: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    for reservation in reservations:
        gpus = terms_of(reservation).gpus_at(now)
        version = version_at(reservation.deployment.slug, hour_floor(now))
        if not gpus or version is None:
            continue
        capacity = gpus * version[0]
        held.append((reservation, gpus, capacity, version[1]))
        pooled[reservation.tenant_id, reservation.deployment_id] += capacity
    rates = bucket_tokens(end=end, tenant_ids=sorted({r.tenant_id for r, *_ in held}))
    seconds = Decimal(BUCKET.total_seconds())
    status = []
    for reservation, gpus, capacity, w_in in held:
        key = (reservation.tenant_id, reservation.deployment_id)
        input_tokens, cached, output = rates.get(key, (0, 0, 0))
        tok = production_tokens(
            output_tokens=output, input_tokens=input_tokens, cached_tokens=cached, w_in=w_in
        )
        current = tok / seconds * capacity / pooled[key]
        status.append(
            {"reservation": reservation, "gpus": gpus, "capacity": capacity,
             "current": current, "headroom": capacity - current, "as_of": end}
        )  # fmt: skip
    return status
