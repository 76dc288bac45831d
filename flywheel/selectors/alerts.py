"""The flywheel's alert kinds (kpis.md section 3c), evaluated for the `alerts` job
(portal.alerts) from read models, every rule of a kind in a query count that does not grow
with the rules or the pools:

- `gpu_waste` (a condition kind): per pool, healthy idle GPU-hours over the rule's window
  from metering's capacity samples, integrated as the KPIs integrate them, with the cost
  of an idle GPU-hour from the cost model in force at the window's start;
- `kpi_below_band` (a calendar kind): the most recent closed day's TEF or TFI, of the
  factory or a pool, from its day snapshot.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from operator import attrgetter

from django.db.models import Subquery
from django.urls import reverse

from flywheel.domain.alerts import (
    gpu_waste_measure,
    idle_cost,
    idle_cost_per_gpu_hour,
    kpi_below_summary,
    kpi_is_below,
)
from flywheel.domain.kpis import integrate_capacity
from flywheel.models import CostModel, KpiSnapshot
from flywheel.selectors.measurement import FACTORY
from flywheel.selectors.production import capacity_samples_read, service_part
from flywheel.selectors.tfom import engine_cost_model
from metering.selectors.factory import pool_list, pool_service_lives
from metering.selectors.usage import usage_measured_until
from portal.alert_kinds import Evaluation, Finding, scope_naming
from portal.effective import in_force_by
from portal.formatting import rfc3339, span_text
from portal.models import AlertRule
from portal.money import money_str, round_half_up
from portal.periods import hour_floor

RATE_PLACES = Decimal("1e-10")  # money per idle GPU-hour, shown to ten decimals
HOUR_PLACES = Decimal("0.01")  # GPU-hours shown
PCT_PLACES = Decimal("0.1")  # the idle share shown, in %


# A rule's scope names no pool (every pool, or the factory) or a pool that exists.
pool_scope_check = scope_naming(
    "pool",
    exists=lambda slug: pool_list().filter(slug=slug).exists(),
    expected="the slug of one of the factory's pools",
)


def _shown(value: Decimal, places: Decimal) -> str:
    return str(round_half_up(amount=value, quantum=places))


# ---------------------------------------------------------------- gpu_waste


def gpu_waste_evaluate(rules: list[AlertRule], now: datetime) -> Evaluation:
    """The `gpu_waste` kind: a finding per rule and pool in service whose healthy idle
    GPU-hours over the window are above the threshold share of its healthy GPU-hours,
    keyed by the pool's slug, its onset the window's start (the kernel keeps one alert
    firing while it holds, and resolves it once a window finds the pool below).

    The window is the rule's `window_hours` ending at the last whole hour of the read
    window of kpis.md section 0 (`usage_measured_until`, the published cut, floored to the
    hour) rather than now floored: the idle hours an alert shows are those the KPI pages
    and snapshots read for the same hours (whole hours: its onset stays on one), and a
    stalled pipeline holds the alerts where they are instead of judging hours it has not
    read. Reads, however many rules and pools: the horizon (2 queries), the pools with the
    time of their carried-in sample, the samples of the longest window, the cost models,
    and 2 more when a pool's service start is still to be derived (pool_service_lives)."""
    if not rules:
        return Evaluation(findings=[])
    end = hour_floor(usage_measured_until(now=now))
    starts = {rule.pk: end - timedelta(hours=rule.params["window_hours"]) for rule in rules}
    pools = list(pool_list().order_by("slug"))
    samples = capacity_samples_read(start=min(starts.values()), end=end)
    lives = pool_service_lives(pools=pools)
    cost_models = in_force_by(CostModel.objects.all(), series=attrgetter("pool_id"))
    findings = []
    for rule in rules:
        start, threshold = starts[rule.pk], rule.params["threshold_pct"]
        slug = rule.scope.get("pool")
        # A pool gone since the rule named it is ignored (the scope is checked on writes).
        for pool in pools if slug is None else [p for p in pools if p.slug == slug]:
            part = service_part(lives[pool.pk], start, end)
            if part is None:
                continue
            capacity = integrate_capacity(
                samples=samples.get(pool.pk, []),
                start=part.start,
                end=part.end,
                gpu_count=pool.gpu_count,
            )
            waste = gpu_waste_measure(
                available_gpu_seconds=capacity.available_gpu_seconds,
                busy_gpu_seconds=capacity.busy_gpu_seconds,
                threshold_pct=Decimal(threshold),
            )
            if not waste.is_wasteful:
                continue
            series = cost_models.get(pool.pk)
            version = series.at(start) if series is not None else None
            findings.append(
                _waste_finding(
                    rule, pool, waste, version, start=start, end=end, telemetry=capacity.telemetry
                )
            )
    return Evaluation(findings=findings)


def _waste_finding(rule, pool, waste, version, *, start, end, telemetry) -> Finding:
    threshold = rule.params["threshold_pct"]
    idle_hours = _shown(waste.idle_gpu_hours, HOUR_PLACES)
    healthy_hours = _shown(waste.healthy_gpu_hours, HOUR_PLACES)
    share = _shown(waste.idle_pct, PCT_PLACES)
    figures = {
        "pool": pool.slug,
        "window_start": rfc3339(start),
        "window_end": rfc3339(end),
        "healthy_gpu_hours": healthy_hours,
        "busy_gpu_hours": _shown(waste.busy_gpu_hours, HOUR_PLACES),
        "idle_gpu_hours": idle_hours,
        "idle_pct": share,
        "telemetry": telemetry,
    }
    cost = "no cost model in force"  # the waste stands; its cost is unknown
    if version is not None:
        model = engine_cost_model(version)
        amount = money_str(
            amount=idle_cost(idle_gpu_hours=waste.idle_gpu_hours, cost_model=model),
            currency=version.currency,
        )
        figures |= {
            "idle_cost_per_gpu_hour": _shown(idle_cost_per_gpu_hour(cost_model=model), RATE_PLACES),
            "idle_cost": amount,
            "currency": version.currency,
        }
        cost = f"costing {Decimal(amount):,} {version.currency}"
    return Finding(
        rule=rule,
        window_start=start,
        threshold=threshold,
        value=f"{share}%",
        summary=(
            f"{pool.name}: {Decimal(idle_hours):,} of {Decimal(healthy_hours):,} healthy "
            "GPU-hours idle in the last "
            f"{rule.params['window_hours']} h ({share}%, above {threshold}%), {cost}"
        ),
        figures=figures,
        link=f"{reverse('metering')}#capacity-{pool.slug}",
        scope_key=pool.slug,
    )


# ---------------------------------------------------------------- kpi_below_band


def kpi_below_band_evaluate(rules: list[AlertRule], now: datetime) -> Evaluation:
    """The `kpi_below_band` kind: a finding per rule whose KPI (TEF or TFI) on the most
    recent closed day, of the factory or of the rule's pool, is below its threshold, keyed
    by that day (each day fires once; a later closed day above resolves it). A day without
    a value (nothing in service) never fires. One query: that day's snapshots of the
    rules' scopes."""
    if not rules:
        return Evaluation(findings=[])
    day = KpiSnapshot.PeriodKind.DAY
    latest = (
        KpiSnapshot.objects.filter(period_kind=day, is_closed=True)
        .order_by("-period_start")
        .values("period_start")[:1]
    )
    scopes = {rule.scope.get("pool", FACTORY) for rule in rules}
    snapshots = {
        row.scope: row
        for row in KpiSnapshot.objects.filter(
            period_kind=day, is_closed=True, scope__in=scopes, period_start=Subquery(latest)
        )
    }
    findings = []
    for rule in rules:
        scope = rule.scope.get("pool", FACTORY)
        snapshot = snapshots.get(scope)
        if snapshot is None:
            continue
        kpi, threshold = rule.params["kpi"], rule.params["threshold"]
        value = _kpi_value(snapshot.values.get(kpi))
        if not kpi_is_below(value=value, threshold=Decimal(threshold)):
            continue
        start = snapshot.period_start.astimezone(UTC)
        following = start + timedelta(days=1)
        where = "the factory" if scope == FACTORY else f"pool {scope}"
        findings.append(
            Finding(
                rule=rule,
                window_start=start,
                threshold=threshold,
                value=str(value),
                summary=kpi_below_summary(
                    kpi=kpi,
                    where=where,
                    day=span_text(start, following),
                    value=value,
                    threshold=threshold,
                ),
                figures={
                    "kpi": kpi,
                    "scope": scope,
                    "day": f"{start:%Y-%m-%d}",
                    "value": str(value),
                    "threshold": threshold,
                    "telemetry": snapshot.telemetry,
                    "measured_at": rfc3339(snapshot.measured_at),
                },
                link=f"{reverse('home')}?from={start:%Y-%m-%d}&to={following:%Y-%m-%d}",
            )
        )
    return Evaluation(findings=findings)


def _kpi_value(stored) -> Decimal | None:
    """A KPI as a snapshot stores it (a JSON number, kpis_json) as Decimal; None stays."""
    if stored is None or isinstance(stored, bool):
        return None
    try:
        value = Decimal(str(stored))
    except ArithmeticError:
        return None
    return value if value.is_finite() else None


def pool_options() -> list[tuple[object, str]]:
    """What a flywheel rule's scope may name: a pool."""
    return [(pool.slug, f"{pool.slug} ({pool.name})") for pool in pool_list().order_by("slug")]
