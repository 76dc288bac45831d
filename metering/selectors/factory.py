"""Reads of the factory's configuration: pools, served models, deployments and their versions.

The lists are QuerySets for the caller to refine (values, annotate, select_related)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import NamedTuple

from django.db import connection
from django.db.models import Min, Q, QuerySet

from metering.domain.factory import (
    CurvePoint,
    FrontPoint,
    derivation,
    front_of,
    r_ref_at,
)
from metering.models import (
    CapacitySample,
    Deployment,
    DeploymentVersion,
    HourlyUsage,
    ModelAlias,
    Pool,
    ReferenceCurvePoint,
    ServedModel,
)
from portal.bulk import prepared_cursor
from portal.effective import InForce, in_force_by
from portal.errors import FieldError
from portal.periods import filter_within, hour_floor


def pool_list() -> QuerySet[Pool]:
    """Every pool of the factory, by slug."""
    return Pool.objects.all()


def served_model_list() -> QuerySet[ServedModel]:
    """Every served model, by slug."""
    return ServedModel.objects.all()


def served_model_get(*, slug: str) -> ServedModel | None:
    """The served model named `slug`, or None when there is none."""
    return ServedModel.objects.filter(slug=slug).first()


def deployment_list() -> QuerySet[Deployment]:
    """Every deployment (a served model on a pool), by slug."""
    return Deployment.objects.all()


class Placed(NamedTuple):
    """A deployment a model name was placed on."""

    id: int
    slug: str


@dataclass(frozen=True)
class Placements:
    """Where the models named by a batch (a model's slug, or an engine's alias for it) are
    deployed, read once for the batch: `place` is the one rule that maps a name and a pool
    to a deployment, for usage events, OTLP metrics and engine metrics alike."""

    model_ids: dict[str, int]  # name -> served model; an alias wins over a slug
    pools: dict[int, dict[str, Placed]]  # served model -> pool slug -> its deployment

    def place(self, name: str, pool: str | None) -> tuple[Placed | None, tuple[str, str] | None]:
        """The deployment the model `name` runs on, on `pool` or, when no pool is named, its
        only one; else None and the (field, message) saying why there is none."""
        model_id = self.model_ids.get(name)
        if model_id is None:
            return None, ("model", f"unknown model {name!r}")
        pools = self.pools.get(model_id, {})
        if pool is not None:
            if pool in pools:
                return pools[pool], None
            return None, ("pool", f"model {name!r} has no deployment on pool {pool!r}")
        if len(pools) == 1:
            return next(iter(pools.values())), None
        if not pools:
            return None, ("model", f"model {name!r} is not deployed on any pool")
        return None, (
            "pool",
            f"model {name!r} runs on several pools ({', '.join(sorted(pools))}); give pool",
        )


def placements_read(*, names: Collection[str]) -> Placements:
    """The models `names` name, by slug or alias, and their deployments, in one query."""
    if not names:
        return Placements(model_ids={}, pools={})
    rows: Iterable[tuple] = _placement_rows(names)
    by_slug: dict[str, int] = {}
    by_alias: dict[str, int] = {}
    pools: dict[int, dict[str, Placed]] = {}
    for model_id, slug, alias, deployment_id, deployment_slug, pool in rows:
        if slug in names:
            by_slug[slug] = model_id
        if alias in names:
            by_alias[alias] = model_id
        if deployment_id is not None:
            pools.setdefault(model_id, {})[pool] = Placed(deployment_id, deployment_slug)
    return Placements(model_ids={**by_slug, **by_alias}, pools=pools)


# The query below as PostgreSQL is given it at every batch of usage: one array of names, a
# statement prepared once a connection (the ORM compiled it afresh at each, 1.5 ms of CPU).
_PLACEMENTS = (
    f"SELECT m.id, m.slug, a.alias, d.id, d.slug, p.slug FROM {ServedModel._meta.db_table} m "  # noqa: S608 (the models' tables)
    f"LEFT OUTER JOIN {ModelAlias._meta.db_table} a ON m.id = a.model_id "
    f"LEFT OUTER JOIN {Deployment._meta.db_table} d ON m.id = d.model_id "
    f"LEFT OUTER JOIN {Pool._meta.db_table} p ON d.pool_id = p.id "
    "WHERE m.slug = ANY(%(names)s::text[]) OR a.alias = ANY(%(names)s::text[])"
)


def _placement_rows(names: Collection[str]) -> Iterable[tuple]:
    """(model id, slug, alias, deployment id, deployment slug, pool slug) of the served
    models a name of `names` names, by slug or alias: a row per alias and deployment."""
    if connection.vendor == "postgresql":
        with prepared_cursor() as cursor:
            cursor.execute(_PLACEMENTS, {"names": list(names)})
            return cursor.fetchall()
    return (
        ServedModel.objects.filter(Q(slug__in=names) | Q(aliases__alias__in=names))
        .values_list(
            "id", "slug", "aliases__alias", "deployments__id", "deployments__slug",
            "deployments__pool__slug",
        )
        .order_by()
    )  # fmt: skip


def deployment_version_list(
    *, start: datetime | None = None, end: datetime | None = None
) -> QuerySet[DeploymentVersion]:
    """Deployment versions taking effect in [start, end) (either bound optional)."""
    return filter_within(
        queryset=DeploymentVersion.objects.all(), field="effective_from", start=start, end=end
    )


def pool_first_signs_of_life(*, pool_ids: list[int]) -> dict[int, datetime]:
    """Per pool, the start of the UTC hour of its first sign of life: its earliest capacity
    sample or hourly rollup row (pools with neither are left out)."""
    firsts: dict[int, datetime] = {}
    rows = [
        *CapacitySample.objects.filter(pool_id__in=pool_ids)
        .values("pool_id")
        .annotate(first=Min("time"))
        .values_list("pool_id", "first"),
        *HourlyUsage.objects.filter(deployment__pool_id__in=pool_ids)
        .values("deployment__pool_id")
        .annotate(first=Min("hour"))
        .values_list("deployment__pool_id", "first"),
    ]
    for pool_id, first in rows:
        hour = hour_floor(first)
        firsts[pool_id] = min(firsts.get(pool_id, hour), hour)
    return firsts


def pool_service_lives(*, pools: list[Pool]) -> dict[int, tuple[datetime | None, datetime | None]]:
    """Per pool, [in service from, retired at) (kpis.md section 0): the stored start, else
    its first sign of life; a pool with neither is not in service (None, None)."""
    unset = [p.pk for p in pools if p.in_service_from is None]
    derived = pool_first_signs_of_life(pool_ids=unset) if unset else {}
    lives = {}
    for pool in pools:
        start = pool.in_service_from or derived.get(pool.pk)
        lives[pool.pk] = (start, pool.retired_at) if start else (None, None)
    return lives


def factory_in_service_from() -> datetime | None:
    """The first instant any pool is in service: nothing earlier has figures (kpis.md
    section 0), so no page offers a period before it."""
    starts = [since for since, _ in pool_service_lives(pools=list(pool_list())).values() if since]
    return min(starts, default=None)


class DeploymentVersions:
    """Every deployment version, loaded once: the one in force at an instant (R_ref, w_in,
    SLO) for any deployment, in one query however many are asked (portal.effective)."""

    def __init__(self) -> None:
        self._series = in_force_by(DeploymentVersion.objects.all(), series=_deployment_of)

    def at(self, deployment_id: int, when: datetime) -> DeploymentVersion | None:
        """The version of the deployment in force at `when`, or None before its first."""
        series = self._series.get(deployment_id)
        return series.at(when) if series is not None else None

    def series(self, deployment_id: int) -> InForce[DeploymentVersion]:
        """The deployment's versions in order (none: an empty series)."""
        return self._series.get(deployment_id) or InForce([])

    def latest_r_refs(self, deployment_ids) -> tuple[Decimal, ...]:
        """The R_ref of each deployment's latest version (deployments with one)."""
        latest = (self.series(d).latest() for d in deployment_ids)
        return tuple(version.r_ref for version in latest if version is not None)


def _deployment_of(version: DeploymentVersion) -> int:
    return version.deployment_id


# -- reference curves (kpis.md 6c) ---------------------------------------------------------


@dataclass(frozen=True)
class Curve:
    """A reference curve: a model's points on a GPU type, tp and precision; its Pareto front
    in production units (with the w_in of the model's deployment on that GPU type, else of
    any of its deployments, else 0); R_ref at the SLO (the tightest TPOT SLO of the model's
    deployments' latest versions, or the one asked) and how it was read off the front.
    `r_ref` None: the SLO is beyond the front (`infeasible`), or there is no SLO to read at."""

    model: str
    gpu_type: str
    tp: int
    precision: str
    points: tuple[ReferenceCurvePoint, ...]
    w_in: Decimal
    front: tuple[FrontPoint, ...]
    slo_tpot_ms: int | None
    r_ref: Decimal | None
    derivation: str

    @property
    def key(self) -> str:
        return f"{self.model}/{self.gpu_type}/tp{self.tp}/{self.precision}"


@dataclass(frozen=True)
class ModelTerms:
    """A served model's SLO and w_in per GPU type, from its deployments' latest versions."""

    slo_tpot_ms: int | None
    w_in_by_gpu: dict[str, Decimal]
    w_in: Decimal


def model_terms() -> dict[str, ModelTerms]:
    """Per served model slug: the tightest TPOT SLO and the w_in of its deployments' latest
    versions (by the GPU type of their pools), in two queries."""
    versions = DeploymentVersions()
    found: dict[str, list[tuple[str, DeploymentVersion]]] = {}
    for deployment in Deployment.objects.select_related("model", "pool").order_by("slug"):
        latest = versions.series(deployment.pk).latest()
        if latest is not None:
            found.setdefault(deployment.model.slug, []).append((deployment.pool.gpu_type, latest))
    terms = {}
    for model, pairs in found.items():
        slos = [v.slo_tpot_ms for _, v in pairs if v.slo_tpot_ms]
        terms[model] = ModelTerms(
            slo_tpot_ms=min(slos) if slos else None,
            w_in_by_gpu={gpu: v.w_in for gpu, v in pairs},
            w_in=pairs[0][1].w_in,
        )
    return terms


def curve_list(*, slo_tpot_ms: int | None = None, model: str | None = None) -> list[Curve]:
    """Every reference curve (or one model's) with its front and R_ref at the SLO: each
    model's own, or `slo_tpot_ms` when given."""
    rows = ReferenceCurvePoint.objects.select_related("model").order_by(
        "model__slug", "gpu_type", "tp", "precision", "concurrency"
    )
    if model is not None:
        rows = rows.filter(model__slug=model)
    grouped: dict[tuple, list[ReferenceCurvePoint]] = {}
    for row in rows:
        grouped.setdefault((row.model.slug, row.gpu_type, row.tp, row.precision), []).append(row)
    terms = model_terms()
    curves = []
    for (slug, gpu_type, tp, precision), points in grouped.items():
        term = terms.get(slug, ModelTerms(None, {}, Decimal(0)))
        w_in = term.w_in_by_gpu.get(gpu_type, term.w_in)
        front = front_of([curve_point_of(p) for p in points], w_in=w_in)
        slo = slo_tpot_ms or term.slo_tpot_ms
        r_ref = r_ref_at(front, slo_tpot_ms=slo) if slo else None
        curves.append(
            Curve(
                model=slug, gpu_type=gpu_type, tp=tp, precision=precision,
                points=tuple(points), w_in=w_in, front=tuple(front), slo_tpot_ms=slo,
                r_ref=r_ref,
                derivation=derivation(front, slo_tpot_ms=slo, r_ref=r_ref)
                if slo
                else "no TPOT SLO: the model's deployments set none",
            )
        )  # fmt: skip
    return curves


def curve_point_of(row: ReferenceCurvePoint) -> CurvePoint:
    return CurvePoint(
        model=row.model.slug, gpu_type=row.gpu_type, tp=row.tp, precision=row.precision,
        concurrency=row.concurrency, tok_s_per_gpu=row.tok_s_per_gpu,
        tok_s_per_user=row.tok_s_per_user, token_basis=row.token_basis, isl=row.isl,
        osl=row.osl, ttft_p50_ms=row.ttft_p50_ms, source=row.source,
    )  # fmt: skip


def curve_json(curve: Curve) -> dict:
    """A curve as GET /api/v1/reference-curves answers it: its points as imported, its
    front in production units and R_ref at the SLO (`infeasible` when beyond the front)."""
    return {
        "model": curve.model,
        "gpu_type": curve.gpu_type,
        "tp": curve.tp,
        "precision": curve.precision,
        "w_in": str(curve.w_in),
        "slo_tpot_ms": curve.slo_tpot_ms,
        "r_ref": None if curve.r_ref is None else str(_rate(curve.r_ref)),
        "infeasible": curve.slo_tpot_ms is not None and curve.r_ref is None,
        "derivation": curve.derivation,
        "points": [
            {
                "concurrency": p.concurrency,
                "tok_s_per_gpu": str(p.tok_s_per_gpu.normalize()),
                "tok_s_per_user": str(p.tok_s_per_user.normalize()),
                "token_basis": p.token_basis,
                "isl": p.isl,
                "osl": p.osl,
                "ttft_p50_ms": None if p.ttft_p50_ms is None else str(p.ttft_p50_ms.normalize()),
                "source": p.source,
            }
            for p in curve.points
        ],
        "front": [
            {"tok_s_per_user": str(_rate(f.per_user)), "tok_s_per_gpu": str(_rate(f.per_gpu))}
            for f in curve.front
        ],
    }


def _rate(value: Decimal) -> Decimal:
    """A production rate as shown: to the hundredth of a tok/s."""
    return value.quantize(Decimal("0.01"))


def curve_r_ref_for(*, deployment: Deployment, slo_tpot_ms: int | None) -> tuple[Decimal, str]:
    """R_ref for a version of `deployment` read off its model's reference curves on its
    pool's GPU type at the version's TPOT SLO (the best of them when several tp or
    precisions are measured), with how it was read; FieldError naming r_ref_from_curve when
    there is no SLO, no curve, or the SLO lies beyond every front."""
    if not slo_tpot_ms:
        raise FieldError("r_ref_from_curve", "needs slo_tpot_ms: R_ref is read at the TPOT SLO")
    gpu_type = deployment.pool.gpu_type
    curves = [
        c
        for c in curve_list(slo_tpot_ms=slo_tpot_ms, model=deployment.model.slug)
        if c.gpu_type == gpu_type
    ]
    if not curves:
        raise FieldError(
            "r_ref_from_curve", f"no reference curve of {deployment.model.slug} on {gpu_type}"
        )
    feasible = [c for c in curves if c.r_ref is not None]
    if not feasible:
        raise FieldError(
            "r_ref_from_curve",
            f"infeasible: {curves[0].derivation} (on every {gpu_type} curve of the model)",
        )
    best = max(feasible, key=lambda c: c.r_ref or 0)
    r_ref = best.r_ref.quantize(Decimal("0.0001"))  # type: ignore[union-attr]
    return r_ref, f"from the curve {best.key}: {best.derivation}"
