"""Writes of the factory's configuration: served models and aliases, deployments and their
versions, capacity samples. Every write leaves an audit entry."""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from metering.domain.factory import CurveErrors, Located
from metering.models import (
    CapacitySample,
    Deployment,
    DeploymentVersion,
    ModelAlias,
    Pool,
    ReferenceCurvePoint,
    ServedModel,
)
from metering.selectors.factory import placements_read, pool_first_signs_of_life
from metering.services.usage.changes import (
    capacity_change_append,
    pool_change_append,
    usage_refold_queue,
    version_change_append,
)
from portal import clock
from portal.closing import closed_months, closed_through, span_closed_check
from portal.effective import InForce
from portal.periods import month_start, next_month
from portal.services import audit_record, audit_snapshot
from portal.versions import effective_from_check, version_create

# A deployment's first version is in force "from the start of time" while no month is
# closed, else from the end of the last closed month (architecture.md).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@transaction.atomic
def served_model_aliases_set(
    *, model: ServedModel, aliases: Sequence[str], by: User | None
) -> None:
    """Replace the engine names that resolve to `model`; an alias names one model only."""
    taken = ModelAlias.objects.filter(alias__in=aliases).exclude(model=model)
    if taken.exists():
        raise ValidationError({"aliases": f"alias {taken.first().alias!r} names another model"})
    before = sorted(model.aliases.values_list("alias", flat=True))
    model.aliases.exclude(alias__in=aliases).delete()
    for alias in aliases:
        ModelAlias.objects.get_or_create(alias=alias, model=model)
    if before != sorted(aliases):
        audit_record(
            actor=by,
            action="update",
            object_type="served_model_aliases",
            object_id=model.slug,
            before={"aliases": before},
            after={"aliases": sorted(aliases)},
        )


def _earliest(*moments: datetime | None) -> datetime | None:
    """The earliest of the set instants (None: none is set)."""
    return min((m for m in moments if m is not None), default=None)


def _latest_end(*moments: datetime | None) -> datetime | None:
    """The latest of these ends, None (never) when one of them is."""
    return None if None in moments else max(moments)


def pool_closed_check(*, pool: Pool, before: tuple | None) -> None:
    """Refuse a change of `pool` that reaches into a closed month (kpis.md, Closed months),
    naming the field: its service life's start or end moved across one, or its `gpu_count`
    changed while its life, before or after, overlaps one. `before`: its `gpu_count`,
    `in_service_from` and `retired_at` as stored (None: a new pool, never in service)."""
    count, since, until = before if before is not None else (None, None, None)
    if pool.in_service_from != since:
        # Unset is "not in service": a start set from nothing reaches to the end of time.
        moved = (pool.in_service_from, since)
        end = None if None in moved else max(moved)
        span_closed_check(start=_earliest(*moved), end=end, field="in_service_from")
    if pool.retired_at != until and (since or pool.in_service_from) is not None:
        start = min(t for t in (pool.retired_at, until) if t is not None)
        span_closed_check(start=start, end=_latest_end(pool.retired_at, until), field="retired_at")
    start = _earliest(pool.in_service_from, since)
    if before is not None and pool.gpu_count != count and start is not None:
        end = _latest_end(pool.retired_at, until)
        span_closed_check(start=start, end=end, field="gpu_count")


@transaction.atomic
def pool_save(*, pool: Pool, before: tuple | None) -> Pool:
    """Store `pool`, new (`before` None) or changed from `before` (its stored `gpu_count`,
    `in_service_from`, `retired_at`): refused when that reaches into a closed month; a
    change is logged for the fold from the earliest instant it touches."""
    pool_closed_check(pool=pool, before=before)
    pool.save()
    if before is not None:
        pool_change_append(pool=pool, before=before)
    return pool


def _life(pool: Pool | None) -> tuple | None:
    """What pool_closed_check compares: `gpu_count`, `in_service_from`, `retired_at`."""
    return None if pool is None else (pool.gpu_count, pool.in_service_from, pool.retired_at)


def _changed(stored: Pool | None, fields: dict) -> Pool:
    pool = Pool() if stored is None else Pool.objects.get(pk=stored.pk)
    for field, value in fields.items():
        setattr(pool, field, value)
    return pool


def pool_check(*, stored: Pool | None, fields: dict) -> None:
    """Refuse, naming the field, what pool_write would refuse (a closed month reached),
    without writing: a form checks before it saves."""
    pool_closed_check(pool=_changed(stored, fields), before=_life(stored))


def pool_write(*, stored: Pool | None, fields: dict) -> Pool:
    """Create a pool of `fields`, or change `stored` (the row as stored) to them."""
    return pool_save(pool=_changed(stored, fields), before=_life(stored))


@dataclass(frozen=True)
class VersionSpec:
    """The fields of a deployment version besides its deployment and start, named as there."""

    r_ref: Decimal
    w_in: Decimal = Decimal(0)
    slo_ttft_ms: int | None = None
    slo_tpot_ms: int | None = None
    slo_ttft_ms_priority: int | None = None
    slo_tpot_ms_priority: int | None = None
    slo_min_tokens_per_s: int | None = None
    slo_target: Decimal = Decimal("0.99")
    r_ref_derivation: str = ""  # how r_ref was read off a reference curve, when it was


@transaction.atomic
def deployment_create(
    *, slug: str, model: ServedModel, pool: Pool, spec: VersionSpec, by: User | None
) -> Deployment:
    """Create a deployment with its first version, in force from the start of time (from the
    end of the last closed month once one is closed)."""
    if Deployment.objects.filter(model=model, pool=pool).exists():
        raise ValidationError({"model": f"{model.slug} is already deployed on {pool.slug}"})
    deployment = Deployment.objects.create(slug=slug, model=model, pool=pool)
    first = closed_through() or EPOCH  # never in force inside a closed month
    deployment_version_add(deployment=deployment, effective_from=first, spec=spec, by=by)
    audit_record(
        actor=by,
        action="create",
        object_type="deployment",
        object_id=slug,
        after=audit_snapshot(deployment),
    )
    return deployment


@transaction.atomic
def deployment_version_add(
    *, deployment: Deployment, effective_from: datetime, spec: VersionSpec, by: User | None
) -> DeploymentVersion:
    """Add a version of R_ref, w_in and SLO from `effective_from` (a whole UTC hour) on. One
    that changes the SLO from an hour already metered has that usage folded again, up to the
    next version: the version in force at an event's time applies to it (kpis.md)."""
    effective_from_check(effective_from)
    series = InForce(DeploymentVersion.objects.filter(deployment=deployment))
    before, until = series.at(effective_from), series.next_start(effective_from)
    is_new_slo = before is not None and _thresholds(before) != _thresholds(spec)
    if is_new_slo and effective_from < clock.now():
        # Refused naming effective_from when a month of the span lacks raw events.
        usage_refold_queue(deployment=deployment, start=effective_from, end=until)
    version = version_create(
        DeploymentVersion(deployment=deployment, effective_from=effective_from, **asdict(spec)),
        series={"deployment": deployment},
        conflict=f"{deployment.slug} already has a version from that instant",
        by=by,
    )
    if before is not None:  # a first version has no usage before it to measure again
        version_change_append(deployment=deployment, start=effective_from, end=until)
    return version


def _thresholds(version: DeploymentVersion | VersionSpec) -> tuple[int | None, ...]:
    """What compliance reads of a version: its thresholds, the priority tier's too."""
    return (
        version.slo_ttft_ms,
        version.slo_tpot_ms,
        version.slo_ttft_ms_priority,
        version.slo_tpot_ms_priority,
    )


@dataclass(frozen=True)
class CapacityIn:
    """A capacity sample to store: the pool's GPUs at `time`, held until its next sample, or
    for `interval_s` when given (kpis.md section 1)."""

    pool: Pool
    time: datetime
    gpus_installed: int
    gpus_healthy: int
    gpus_busy: int
    interval_s: int | None = None  # s
    power_w: Decimal | None = None  # W


class CapacityRejected(Exception):
    """A batch of capacity samples refused whole: every sample timed in a closed month, each
    named by its index and `time` (kpis.md, Closed months)."""

    http_status = 400

    def __init__(self, errors: list[dict]) -> None:
        super().__init__(f"{len(errors)} sample(s) in a closed month")
        self.errors = errors

    def api_errors(self) -> list[dict]:
        return self.errors


@transaction.atomic
def capacity_upsert(*, samples: Sequence[CapacityIn]) -> tuple[int, int]:
    """Store samples keyed by (pool, time); a sample posted again replaces the stored one.
    Returns (created, replaced). A batch with a sample timed in a closed month is refused
    whole (CapacityRejected), nothing stored."""
    if samples:
        first = min(s.time for s in samples)
        last = max(s.time for s in samples)
        closed = closed_months(start=month_start(first), end=next_month(month_start(last)))
        errors = [
            {"index": index, "field": "time",
             "message": f"{month_start(s.time):%Y-%m} is closed: nothing may take effect inside it"}
            for index, s in enumerate(samples)
            if month_start(s.time) in closed
        ]  # fmt: skip
        if errors:
            raise CapacityRejected(errors)
    existing = set()
    for sample in samples:
        if CapacitySample.objects.filter(pool=sample.pool, time=sample.time).exists():
            existing.add((sample.pool.pk, sample.time))
    stored = CapacitySample.objects.bulk_create(
        [
            CapacitySample(
                pool=s.pool,
                time=s.time,
                interval_s=s.interval_s,
                gpus_installed=s.gpus_installed,
                gpus_healthy=s.gpus_healthy,
                gpus_busy=s.gpus_busy,
                power_w=s.power_w,
            )
            for s in samples
        ],
        update_conflicts=True,
        unique_fields=["pool", "time"],
        update_fields=["interval_s", "gpus_installed", "gpus_healthy", "gpus_busy", "power_w"],
    )
    capacity_change_append(samples=stored)
    pools_in_service_store()
    return len(samples) - len(existing), len(existing)


def pools_in_service_store() -> int:
    """Store on each pool without an `in_service_from` the start of its first sign of life,
    once (kpis.md section 0: dropping raw events later never moves it). Returns how many."""
    unset = list(Pool.objects.filter(in_service_from__isnull=True).values_list("pk", flat=True))
    stored = 0
    for pool_id, first in pool_first_signs_of_life(pool_ids=unset).items():
        stored += Pool.objects.filter(
            Q(retired_at__isnull=True) | Q(retired_at__gt=first),
            pk=pool_id,
            in_service_from__isnull=True,
        ).update(in_service_from=first)
    return stored


@transaction.atomic
def curves_import(*, points: Sequence[Located], by: User | None) -> list[ReferenceCurvePoint]:
    """Store imported curve points, replacing every point of each curve they name (model,
    GPU type, tp, precision). A model resolves by slug or by an engine's alias; an unknown
    one refuses the import, naming each of its records' `model`. All or nothing."""
    resolved = placements_read(names={point.model for _, point in points}).model_ids
    errors = [
        where | {"field": "model", "message": f"unknown model {point.model!r}"}
        for where, point in points
        if point.model not in resolved
    ]
    if errors:
        raise CurveErrors(errors)
    rows: dict[tuple, ReferenceCurvePoint] = {}
    for _, p in points:  # a concurrency given twice: the later record wins
        row = ReferenceCurvePoint(
            model_id=resolved[p.model], gpu_type=p.gpu_type, tp=p.tp, precision=p.precision,
            concurrency=p.concurrency, tok_s_per_gpu=p.tok_s_per_gpu,
            tok_s_per_user=p.tok_s_per_user, token_basis=p.token_basis, isl=p.isl, osl=p.osl,
            ttft_p50_ms=p.ttft_p50_ms, source=p.source[:200],
        )  # fmt: skip
        rows[(row.model_id, row.gpu_type, row.tp, row.precision, row.concurrency)] = row
    curves = {key[:4] for key in rows}
    replaced = Q()
    for model_id, gpu_type, tp, precision in curves:
        replaced |= Q(model_id=model_id, gpu_type=gpu_type, tp=tp, precision=precision)
    ReferenceCurvePoint.objects.filter(replaced).delete()
    stored = ReferenceCurvePoint.objects.bulk_create(rows.values())
    audit_record(
        actor=by,
        action="create",
        object_type="reference_curves",
        object_id=f"{len(curves)} curve(s)",
        after={
            "points": len(stored),
            "curves": sorted(f"{m}/{g}/tp{t}/{p}" for m, g, t, p in curves),
        },
    )
    return stored
