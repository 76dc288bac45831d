"""One `/metrics` scrape of an engine (vLLM, SGLang, Dynamo's frontend) or of dcgm-exporter,
normalised.

Pure: no Django. The contract is data-formats.md §0-§3 and §8.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from metering.domain.telemetry.dcgm import DCGM_KNOWN_FIELD_TYPES, GpuStats, gpu_stats
from metering.domain.telemetry.engines import EngineStats, engine_replica_stats, engine_stats_sum
from metering.domain.telemetry.exposition import Family, parse_families

ScrapeKind = Literal["vllm", "sglang", "dynamo", "dcgm"]


@dataclass(frozen=True, slots=True)
class Scrape:
    """A parsed scrape: the families that validated, what was skipped and why, and the
    normalised view (engines and replicas for vllm/sglang, gpus for dcgm)."""

    kind: ScrapeKind
    families: tuple[Family, ...]
    skipped: tuple[tuple[str, str], ...]  # (family name, reason)
    engines: tuple[EngineStats, ...] = ()  # one per model_name, summed over replicas
    replicas: tuple[EngineStats, ...] = ()  # one per (model_name, replica): take deltas here
    gpus: tuple[GpuStats, ...] = ()

    def family(self, name: str) -> Family | None:
        return next((f for f in self.families if f.name == name), None)

    def engine(self, model_name: str) -> EngineStats | None:
        return next((e for e in self.engines if e.model_name == model_name), None)

    def gpu(self, gpu: str) -> GpuStats | None:
        return next((g for g in self.gpus if g.gpu == gpu), None)


def parse_scrape(
    *, text: str, kind: ScrapeKind, field_types: Mapping[str, str] | None = None
) -> Scrape:
    """Parse one exposition; a bad family is listed in `skipped`, never fatal.

    For dcgm, lines without a TYPE line take their type from `field_types` (default:
    the fields of dcgm-exporter's default-counters.csv, enabled or not).
    """
    untyped = None
    if kind == "dcgm":
        untyped = DCGM_KNOWN_FIELD_TYPES if field_types is None else field_types
    families, skipped = parse_families(text=text, untyped_types=untyped)
    if kind == "dcgm":
        dcgm = [f for f in families if f.name.startswith("DCGM_")]
        return Scrape(kind=kind, families=families, skipped=skipped, gpus=gpu_stats(families=dcgm))
    replicas = engine_replica_stats(families={f.name: f for f in families}, kind=kind)
    return Scrape(
        kind=kind,
        families=families,
        skipped=skipped,
        engines=engine_stats_sum(replicas=replicas),
        replicas=replicas,
    )
