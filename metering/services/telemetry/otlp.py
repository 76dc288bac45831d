"""Store OTLP metric exports (GenAI token usage) per deployment, hour and source (OtlpHourly):
their own telemetry kind, diffed per source and never summed with scraped engine counters."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import F

from metering.domain.telemetry.histogram_json import histogram_merge
from metering.domain.telemetry.otlp_metrics import (
    LatencyPoint,
    TokenPoint,
    latency_increase,
    point_increase,
)
from metering.models import OtlpHourly, OtlpMetricState
from metering.selectors.factory import Placed, placements_read
from portal.periods import hour_floor

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class OtlpMetricsResult:
    points: int  # token-usage points read
    counted: int  # points that added tokens (baselines and unknown models excluded)
    unknown_models: tuple[str, ...]  # models (with pool) no deployment serves
    deployments: tuple[str, ...]  # slugs whose hours were written


def otlp_metrics_ingest(
    *, points: list[TokenPoint], latencies: list[LatencyPoint], now: datetime
) -> OtlpMetricsResult:
    """Add each point's increase to its deployment's hour (the point's time), per source;
    cumulative series keep their last value per source, locked while it is stored. A point
    of an unknown model keeps its series' baseline, so an alias added later does not count
    its whole history."""
    every = [*points, *latencies]
    placed = _deployments({(p.model, p.pool) for p in every})
    added: dict[tuple[int, datetime, str], list] = defaultdict(lambda: [0.0, 0.0, 0, {}])
    unknown: set[str] = set()
    counted = 0
    with transaction.atomic():
        for source in sorted({p.source for p in every}):
            OtlpMetricState.objects.get_or_create(source=source)
            holder = OtlpMetricState.objects.select_for_update().get(source=source)
            state = dict(holder.state)
            for point in (p for p in every if p.source == source):
                if isinstance(point, LatencyPoint):
                    increase, kept = latency_increase(point, state.get(point.series))
                else:
                    increase, kept = point_increase(point, state.get(point.series))
                if kept is not None:
                    state[point.series] = kept
                deployment = placed.get((point.model, point.pool))
                if deployment is None:
                    name = point.model if point.pool is None else f"{point.model}@{point.pool}"
                    unknown.add(name)
                    continue
                hour = hour_floor(_EPOCH + timedelta(microseconds=point.time_ns // 1000))
                sums = added[(deployment.id, hour, source)]
                if isinstance(point, LatencyPoint):
                    if increase.count > 0:
                        sums[3][point.name] = increase
                        counted += 1
                elif increase:
                    sums[0 if point.direction == "input" else 1] += increase
                    sums[2] += 1
                    counted += 1
            OtlpMetricState.objects.filter(pk=holder.pk).update(state=state)
        _hours_add(added, now=now)
    slugs = {d.id: d.slug for d in placed.values()}
    return OtlpMetricsResult(
        points=len(every),
        counted=counted,
        unknown_models=tuple(sorted(unknown)),
        deployments=tuple(sorted({slugs[d] for d, _, _ in added})),
    )


def _hours_add(added: dict, *, now: datetime) -> None:
    """Each deployment-hour's increases (tokens, points, latency histograms) added to its
    stored hour, locked while it is changed, in key order."""
    for (deployment_id, hour, source), (inputs, outputs, count, latency) in sorted(
        added.items(), key=lambda item: item[0]
    ):
        row, _ = OtlpHourly.objects.select_for_update().get_or_create(
            deployment_id=deployment_id, hour=hour, source=source
        )
        OtlpHourly.objects.filter(pk=row.pk).update(
            input_tokens=F("input_tokens") + round(inputs),
            output_tokens=F("output_tokens") + round(outputs),
            points=F("points") + count,
            ttft_histogram=histogram_merge(stored=row.ttft_histogram, increase=latency.get("ttft")),
            tpot_histogram=histogram_merge(stored=row.tpot_histogram, increase=latency.get("tpot")),
            last_observed_at=now,
        )


def _deployments(keys: set[tuple[str, str | None]]) -> dict[tuple[str, str | None], Placed]:
    """(model name or alias, pool slug or None) -> the deployment it is placed on."""
    known = placements_read(names={name for name, _ in keys})
    placed = {key: known.place(*key)[0] for key in keys}
    return {key: deployment for key, deployment in placed.items() if deployment is not None}
