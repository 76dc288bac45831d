"""Reads of the engine and GPU telemetry: reconciliation, scrape health, latency and SLO.

Engine counters feed reconciliation, latency charts and checks, never the KPIs (kpis.md
§1). Periods are half-open `[start, end)` over whole UTC hours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Case, Count, F, FloatField, Q, QuerySet, Sum, When

from metering.domain.telemetry.counters import reconciliation_flag
from metering.domain.telemetry.histogram_json import histogram_from_json
from metering.domain.telemetry.histograms import (
    Histogram,
    histogram_sum,
    quantile,
    share_within,
)
from metering.models import (
    Deployment,
    DeploymentVersion,
    EngineHourly,
    GpuHourly,
    HourlyUsage,
    OtlpHourly,
    Pool,
    ScrapeTarget,
    TelemetryKind,
)
from portal import clock
from portal.effective import InForce

DEFAULT_TOLERANCE_RATIO = Decimal("0.01")

DEFAULT_TOLERANCE_TOKENS = 10_000

# A target not scraped successfully for this long is stale (the beat runs every 30 s).
STALE_AFTER = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class ReconciliationRow:
    """Engine output tokens of a deployment-hour against the metered usage events."""

    deployment: str  # slug
    pool: str  # slug
    model: str  # served model slug
    hour: datetime
    intervals: int  # scrape intervals behind the engine figure (120 = every 30 s of the hour)
    engine_output_tokens: int  # Δ generation_tokens, summed over replicas and sources
    metered_output_tokens: int  # Σ HourlyUsage.output_tokens over tenants
    difference: int  # engine − metered
    is_flagged: bool  # |difference| beyond max(ratio × larger total, tokens)
    # OTLP token-usage metrics of the hour (output, summed over sources; None: none), shown
    # beside the scraped counters; the engine figure itself where nothing was scraped.
    otlp_output_tokens: int | None = None
    engine_from: str = "scrape"  # "scrape" | "otlp": where engine_output_tokens comes from

    @property
    def difference_pct(self) -> float | None:
        """The difference in % of the larger total (None when both are zero)."""
        return _difference_pct(self.engine_output_tokens, self.metered_output_tokens)


@dataclass(frozen=True, slots=True)
class ReconciliationByDeployment:
    """The reconciled hours of one deployment over a period, summed."""

    deployment: str  # slug
    pool: str  # slug
    model: str  # served model slug
    hours: int  # deployment-hours with engine data
    flagged_hours: int
    engine_output_tokens: int
    metered_output_tokens: int
    otlp_output_tokens: int | None = None  # the OTLP metrics' output (None: none exported)

    @property
    def difference(self) -> int:
        return self.engine_output_tokens - self.metered_output_tokens

    @property
    def difference_pct(self) -> float | None:
        """The difference in % of the larger total (None when both are zero)."""
        return _difference_pct(self.engine_output_tokens, self.metered_output_tokens)


def _difference_pct(engine: int, metered: int) -> float | None:
    larger = max(abs(engine), abs(metered))
    return 100 * (engine - metered) / larger if larger else None


def reconciliation_tolerance() -> tuple[Decimal, int]:
    """(ratio, tokens) from settings RECONCILIATION_TOLERANCE_RATIO / _TOKENS, else 1% and
    10,000 tokens (data-formats.md §8.8)."""
    ratio = Decimal(
        str(getattr(settings, "RECONCILIATION_TOLERANCE_RATIO", DEFAULT_TOLERANCE_RATIO))
    )
    tokens = int(getattr(settings, "RECONCILIATION_TOLERANCE_TOKENS", DEFAULT_TOLERANCE_TOKENS))
    return ratio, tokens


def _engine_hours(start: datetime, end: datetime, pool: Pool | None) -> list[tuple]:
    """Per deployment-hour with engine data, by hour then deployment: (deployment id, slug,
    pool slug, model slug, hour, scrape intervals, scraped tokens or None, OTLP tokens or
    None)."""
    engine_rows = EngineHourly.objects.filter(hour__gte=start, hour__lt=end, intervals__gt=0)
    otlp_rows = OtlpHourly.objects.filter(hour__gte=start, hour__lt=end)
    if pool is not None:
        engine_rows = engine_rows.filter(deployment__pool=pool)
        otlp_rows = otlp_rows.filter(deployment__pool=pool)
    names = ("deployment_id", "deployment__slug", "deployment__pool__slug",
             "deployment__model__slug", "hour")  # fmt: skip
    scraped = {
        tuple(row[:5]): row[5:]
        for row in engine_rows.values_list(*names, "intervals", "generation_tokens")
    }
    otlp = {
        tuple(row[:5]): row[5]
        for row in otlp_rows.values(*names)
        .annotate(output=Sum("output_tokens"))
        .values_list(*names, "output")
    }
    engine = []
    for key in sorted(scraped.keys() | otlp.keys(), key=lambda k: (k[4], k[1])):
        intervals, generated = scraped.get(key, (0, None))
        engine.append((*key, intervals, generated, otlp.get(key)))
    return engine


def reconciliation_list(
    *,
    start: datetime,
    end: datetime,
    tolerance_ratio: Decimal | None = None,
    tolerance_tokens: int | None = None,
    pool: Pool | None = None,
) -> list[ReconciliationRow]:
    """One row per deployment-hour in [start, end) that has engine data (at least one
    counted scrape interval, or OTLP token-usage metrics), ordered by hour then deployment.
    Scraped counters are the engine figure where both exist, the OTLP figures shown beside
    them; never summed. Tolerances default to the settings (reconciliation_tolerance)."""
    default_ratio, default_tokens = reconciliation_tolerance()
    ratio = default_ratio if tolerance_ratio is None else tolerance_ratio
    tokens = default_tokens if tolerance_tokens is None else tolerance_tokens
    engine = _engine_hours(start, end, pool)
    if not engine:
        return []
    metered = {
        (row["deployment_id"], row["hour"]): row["output_tokens"] or 0
        for row in HourlyUsage.objects.filter(
            hour__gte=start, hour__lt=end, deployment_id__in={r[0] for r in engine}
        )
        .values("deployment_id", "hour")
        .annotate(output_tokens=Sum("output_tokens"))
    }
    rows = []
    for deployment_id, slug, pool_slug, model_slug, hour, intervals, generated, beside in engine:
        used = int(metered.get((deployment_id, hour), 0))
        figure = generated if generated is not None else int(beside)
        rows.append(
            ReconciliationRow(
                deployment=slug,
                pool=pool_slug,
                model=model_slug,
                hour=hour,
                intervals=intervals,
                engine_output_tokens=figure,
                metered_output_tokens=used,
                difference=figure - used,
                is_flagged=reconciliation_flag(
                    engine_output_tokens=figure,
                    metered_output_tokens=used,
                    tolerance_ratio=float(ratio),
                    tolerance_tokens=tokens,
                ),
                otlp_output_tokens=None if beside is None else int(beside),
                engine_from="scrape" if generated is not None else "otlp",
            )
        )
    return rows


def reconciliation_by_deployment(
    *, rows: Sequence[ReconciliationRow]
) -> list[ReconciliationByDeployment]:
    """Rows of reconciliation_list summed per deployment, ordered by deployment slug."""
    sums: dict[str, list] = {}
    for row in rows:
        entry = sums.setdefault(row.deployment, [row.pool, row.model, 0, 0, 0, 0, None])
        entry[2] += 1
        entry[3] += row.is_flagged
        entry[4] += row.engine_output_tokens
        entry[5] += row.metered_output_tokens
        if row.otlp_output_tokens is not None:
            entry[6] = (entry[6] or 0) + row.otlp_output_tokens
    return [
        ReconciliationByDeployment(
            deployment=slug,
            pool=pool,
            model=model,
            hours=hours,
            flagged_hours=flagged,
            engine_output_tokens=engine,
            metered_output_tokens=metered,
            otlp_output_tokens=otlp,
        )
        for slug, (pool, model, hours, flagged, engine, metered, otlp) in sorted(sums.items())
    ]


@dataclass(frozen=True, slots=True)
class ScrapeTargetHealth:
    """The state of one scrape target as the operators' health view shows it."""

    id: int
    url: str
    kind: str
    pool: str
    deployment: str | None
    enabled: bool
    last_scraped_at: datetime | None
    last_status: str
    last_error: str
    consecutive_failures: int
    skipped_families: int  # families skipped in the last successful scrape
    unknown_models: tuple[str, ...]
    is_healthy: bool  # enabled, last scrape ok and recent
    is_stale: bool  # enabled and no scrape at all within STALE_AFTER

    @property
    def kind_label(self) -> str:
        return TelemetryKind(self.kind).label

    @property
    def state(self) -> str:
        """One word for the health view: disabled, failing, never (scraped), stale or ok."""
        if not self.enabled:
            return "disabled"
        if self.last_status == ScrapeTarget.Status.FAILED:
            return "failing"
        if self.last_status == ScrapeTarget.Status.NEVER:
            return "never"
        return "stale" if self.is_stale else "ok"


def scrape_target_health(*, now: datetime | None = None) -> list[ScrapeTargetHealth]:
    """Every scrape target with its last status, failing ones first then by pool and URL."""
    now = now or clock.now()
    rows = []
    for target in ScrapeTarget.objects.select_related("pool", "deployment"):
        is_stale = target.enabled and (
            target.last_scraped_at is None or now - target.last_scraped_at > STALE_AFTER
        )
        rows.append(
            ScrapeTargetHealth(
                id=target.pk,
                url=target.url,
                kind=target.kind,
                pool=target.pool.slug,
                deployment=target.deployment.slug if target.deployment else None,
                enabled=target.enabled,
                last_scraped_at=target.last_scraped_at,
                last_status=target.last_status,
                last_error=target.last_error,
                consecutive_failures=target.consecutive_failures,
                skipped_families=len(target.last_skipped),
                unknown_models=tuple(target.last_unknown_models),
                is_healthy=target.enabled
                and target.last_status == ScrapeTarget.Status.OK
                and not is_stale,
                is_stale=is_stale,
            )
        )
    rows.sort(key=lambda row: (row.is_healthy or not row.enabled, row.pool, row.url))
    return rows


@dataclass(frozen=True, slots=True)
class EngineSloAttainment:
    """Share of requests within the SLO thresholds, from the engine histograms (§8.6).

    TTFT and TPOT are separate shares: histograms cannot say which requests met both.
    A share is None when no threshold applied or no request was observed.
    """

    deployment: str
    start: datetime
    end: datetime
    ttft_requests: float  # observations in hours that had a TTFT threshold
    ttft_within: float  # of which within it (interpolated inside the bucket)
    ttft_share: float | None
    tpot_requests: float
    tpot_within: float
    tpot_share: float | None
    tpot_families: tuple[str, ...]  # per-request histogram, or the inter-token fallback


def slo_attainment_from_engine(
    *, deployment: Deployment, start: datetime, end: datetime
) -> EngineSloAttainment:
    """TTFT and TPOT attainment over [start, end), each hour against the SLO of the
    deployment version in force at that hour."""
    versions = InForce(DeploymentVersion.objects.filter(deployment=deployment))
    totals = {"ttft": [0.0, 0.0], "tpot": [0.0, 0.0]}  # [requests, within]
    families: set[str] = set()
    hours = EngineHourly.objects.filter(deployment=deployment, hour__gte=start, hour__lt=end)
    for row in hours.order_by("hour"):
        version = versions.at(row.hour)
        if version is None:
            continue
        slo_ttft_ms, slo_tpot_ms = version.slo_ttft_ms, version.slo_tpot_ms
        for name, threshold_ms, data in (
            ("ttft", slo_ttft_ms, row.ttft_histogram),
            ("tpot", slo_tpot_ms, row.tpot_histogram),
        ):
            histogram = histogram_from_json(data)
            if threshold_ms is None or histogram is None or histogram.count <= 0:
                continue
            share = share_within(histogram=histogram, threshold_s=threshold_ms / 1000)
            totals[name][0] += histogram.count
            totals[name][1] += (share or 0.0) * histogram.count
            if name == "tpot" and row.tpot_family:
                families.add(row.tpot_family)

    def share(name: str) -> float | None:
        requests, within = totals[name]
        return within / requests if requests > 0 else None

    return EngineSloAttainment(
        deployment=deployment.slug,
        start=start,
        end=end,
        ttft_requests=totals["ttft"][0],
        ttft_within=totals["ttft"][1],
        ttft_share=share("ttft"),
        tpot_requests=totals["tpot"][0],
        tpot_within=totals["tpot"][1],
        tpot_share=share("tpot"),
        tpot_families=tuple(sorted(families)),
    )


@dataclass(frozen=True, slots=True)
class EngineLatencyHour:
    """Engine latency quantiles of a deployment in one hour, for charts (s; None = no data)."""

    hour: datetime
    requests: int
    ttft_quantiles: dict[float, float | None]
    tpot_quantiles: dict[float, float | None]


def engine_latency_list(
    *,
    deployment: Deployment,
    start: datetime,
    end: datetime,
    quantiles: tuple[float, ...] = (0.5, 0.95, 0.99),
) -> list[EngineLatencyHour]:
    """Per hour: TTFT and TPOT quantiles estimated from the stored histograms: the scraped
    engine's, else those exported over OTLP (summed over sources; requests: their count)."""

    def estimate(histogram: Histogram | None) -> dict[float, float | None]:
        return {
            q: None if histogram is None else quantile(histogram=histogram, q=q) for q in quantiles
        }

    hours = {
        row.hour: (
            row.requests,
            histogram_from_json(row.ttft_histogram),
            histogram_from_json(row.tpot_histogram),
        )
        for row in EngineHourly.objects.filter(deployment=deployment, hour__gte=start, hour__lt=end)
    }
    exported: dict[datetime, list[list[Histogram]]] = {}
    for row in OtlpHourly.objects.filter(deployment=deployment, hour__gte=start, hour__lt=end):
        if row.hour not in hours:
            sums = exported.setdefault(row.hour, [[], []])
            for index, data in enumerate((row.ttft_histogram, row.tpot_histogram)):
                histogram = histogram_from_json(data)
                if histogram is not None:
                    sums[index].append(histogram)
    for hour, (ttft, tpot) in exported.items():
        merged = [histogram_sum(histograms=h) if _same_edges(h) else None for h in (ttft, tpot)]
        hours[hour] = (int(merged[0].count) if merged[0] else 0, *merged)
    return [
        EngineLatencyHour(
            hour=hour,
            requests=requests,
            ttft_quantiles=estimate(ttft),
            tpot_quantiles=estimate(tpot),
        )
        for hour, (requests, ttft, tpot) in sorted(hours.items())
    ]


def _same_edges(histograms: list[Histogram]) -> bool:
    """Histograms that can be summed: some, all with the same bucket edges."""
    return bool(histograms) and len({h.edges for h in histograms}) == 1


@dataclass(frozen=True, slots=True)
class GpuPoolHour:
    """DCGM aggregates of a pool in one hour."""

    hour: datetime
    gpus_seen: int
    samples: int  # GPU samples
    utilisation_pct_mean: float | None  # % 0-100, over every GPU sample
    power_w_per_gpu_mean: float | None  # W, over every GPU sample
    power_w_total_mean: float | None  # W, Σ over GPUs of each GPU's mean
    energy_j: Decimal  # J, reset-aware increase
    xid_changes: int
    gpus_with_xid: int  # GPUs whose last XID code in the hour is non-zero


def gpu_pool_hourly_list(*, pool: Pool, start: datetime, end: datetime) -> list[GpuPoolHour]:
    """Per hour of [start, end): the pool's GPUs seen, mean utilisation and power, energy."""
    rows = (
        GpuHourly.objects.filter(pool=pool, hour__gte=start, hour__lt=end)
        .values("hour")
        .annotate(
            gpus_seen=Count("id"),
            samples_total=Sum("samples"),
            utilisation_sum=Sum("utilisation_pct_sum"),
            utilisation_samples_total=Sum("utilisation_samples"),
            power_sum=Sum("power_w_sum"),
            power_samples_total=Sum("power_samples"),
            power_total_mean=Sum(
                Case(
                    When(power_samples__gt=0, then=F("power_w_sum") / F("power_samples")),
                    output_field=FloatField(),
                )
            ),
            energy=Sum("energy_j"),
            xid_changes_total=Sum("xid_changes"),
            gpus_with_xid=Count("id", filter=Q(xid_last_code__gt=0)),
        )
        .order_by("hour")
    )
    return [
        GpuPoolHour(
            hour=row["hour"],
            gpus_seen=row["gpus_seen"],
            samples=row["samples_total"] or 0,
            utilisation_pct_mean=_mean(row["utilisation_sum"], row["utilisation_samples_total"]),
            power_w_per_gpu_mean=_mean(row["power_sum"], row["power_samples_total"]),
            power_w_total_mean=row["power_total_mean"],
            energy_j=Decimal(str(row["energy"] or 0)).quantize(Decimal("0.001")),
            xid_changes=row["xid_changes_total"] or 0,
            gpus_with_xid=row["gpus_with_xid"],
        )
        for row in rows
    ]


def gpu_energy_hour_list(
    *, pool_ids: list[int], start: datetime, end: datetime
) -> QuerySet[GpuHourly]:
    """GPU-hours of the pools, starting in [start, end), with a DCGM energy increase."""
    return GpuHourly.objects.filter(
        pool_id__in=pool_ids, hour__gte=start, hour__lt=end, energy_j__gt=0
    )


def _mean(total: float | None, count: int | None) -> float | None:
    return None if not count else (total or 0.0) / count
