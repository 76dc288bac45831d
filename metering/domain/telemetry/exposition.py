"""Prometheus text exposition, parsed and validated one metric family at a time.

The format itself is parsed by `prometheus_client`'s parsers (OpenMetrics when the text
ends with `# EOF`); this module only cuts the text into family blocks first, so that one
malformed family (a bad line, an unknown type, a truncated histogram, a count beyond
64 bits) is skipped and reported instead of losing the scrape (data-formats.md §8.7).
Pure: no Django.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, cast

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from metering.domain.telemetry.histograms import INF, Histogram

MetricType = Literal["counter", "gauge", "histogram"]

Labels = Mapping[str, str]

_SUPPORTED_TYPES: frozenset[str] = frozenset({"counter", "gauge", "histogram"})

_SERIES_SUFFIXES = ("_total", "_created", "_bucket", "_sum", "_count", "_gsum", "_gcount", "_info")

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")

# Counts are stored as 64-bit integers: a counter or histogram count beyond cannot be.
INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Sample:
    """One exposed line: sample name (with any `_total`/`_bucket` suffix), labels, value."""

    name: str
    labels: Labels = field(hash=False)
    value: float


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family that parsed and validated; counters are named without `_total`."""

    name: str
    type: MetricType
    samples: tuple[Sample, ...]


def parse_families(
    *, text: str, untyped_types: Mapping[str, str] | None = None
) -> tuple[tuple[Family, ...], tuple[tuple[str, str], ...]]:
    """Parse an exposition into (families, skipped) where skipped is (family name, reason).

    A family without a TYPE line takes its type from `untyped_types` (the DCGM CSV);
    otherwise it is skipped, like any family of another type than counter, gauge or
    histogram, or one that does not validate: a counter or histogram value that is not a
    finite number (a `_sum` of +Inf, a NaN count) or is beyond 64 bits skips its family,
    whose previous values then stay the baseline. Gauges may be NaN or infinite; their
    readers drop such values. OpenMetrics text (ending with `# EOF`) is read by its own
    parser, a family it refuses by the Prometheus text parser.
    """
    types = untyped_types or {}
    merged: dict[str, tuple[str, list[Sample]]] = {}
    skipped: list[tuple[str, str]] = []
    openmetrics = _is_openmetrics(text)
    for block_name, block in _family_blocks(text):
        try:
            parsed = _parse_block(block, openmetrics=openmetrics)
        except Exception as error:  # the parsers raise assorted types on malformed input
            skipped.append((block_name, f"unparseable: {error!r}"))
            continue
        for metric in parsed:
            samples = [
                Sample(name=s.name, labels=MappingProxyType(dict(s.labels)), value=float(s.value))
                for s in metric.samples
            ]
            kind = metric.type
            if kind in ("unknown", "untyped"):
                kind = types.get(metric.name, "unknown")
            if metric.name in merged:
                first_kind, first_samples = merged[metric.name]
                if first_kind != kind:
                    skipped.append(
                        (metric.name, f"declared again as {kind}, first as {first_kind}")
                    )
                    continue
                first_samples.extend(samples)
            else:
                merged[metric.name] = (kind, samples)
    families: list[Family] = []
    for name, (kind, samples) in merged.items():
        if kind == "unknown":
            skipped.append((name, "unknown type: no TYPE line and not a known field"))
            continue
        if kind not in _SUPPORTED_TYPES:
            skipped.append((name, f"unsupported type {kind}"))
            continue
        family = Family(name=name, type=cast(MetricType, kind), samples=tuple(samples))
        problem = _validation_problem(family)
        if problem:
            skipped.append((name, problem))
        else:
            families.append(family)
    return tuple(families), tuple(skipped)


def _is_openmetrics(text: str) -> bool:
    """OpenMetrics text ends with `# EOF` (the Prometheus text format never does)."""
    tail = text.rstrip()
    return tail == "# EOF" or tail.endswith("\n# EOF")


def _parse_block(block: str, *, openmetrics: bool) -> list:
    """One family block's metrics; OpenMetrics by its parser, which needs the `# EOF`, or
    by the text parser when it refuses the block (Prometheus names in an OpenMetrics
    response: `# TYPE x_total counter`)."""
    if openmetrics:
        try:
            return list(openmetrics_families(block + "# EOF\n"))
        except Exception as error:
            try:
                return list(text_string_to_metric_families(block))
            except Exception:
                raise error from None
    return list(text_string_to_metric_families(block))


def family_values(*, family: Family) -> Iterator[tuple[Labels, float]]:
    """The value samples of a counter or gauge family (no `_created`)."""
    names = {family.name} | ({f"{family.name}_total"} if family.type == "counter" else set())
    for sample in family.samples:
        if sample.name in names:
            yield sample.labels, sample.value


def family_histograms(*, family: Family) -> tuple[tuple[Labels, Histogram], ...]:
    """The series of a histogram family, keyed by their labels without `le`.

    Raises ValueError naming the series when one lacks its +Inf bucket, `_count` or
    `_sum`, has non-cumulative buckets, or a +Inf bucket that differs from `_count`.
    """
    series: dict[tuple[tuple[str, str], ...], _SeriesParts] = {}
    for sample in family.samples:
        key = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
        parts = series.setdefault(key, _SeriesParts())
        if not math.isfinite(sample.value):  # a +Inf _sum, a NaN count...
            raise ValueError(f"series {_show(key)}: {sample.name} is {_number(sample.value)}")
        if sample.value > INT64_MAX and sample.name != f"{family.name}_sum":
            raise ValueError(
                f"series {_show(key)}: {sample.name} {_number(sample.value)} is beyond the "
                "64-bit range of a count"
            )
        if sample.name == f"{family.name}_bucket":
            edge = float(sample.labels.get("le", "nan"))
            if math.isnan(edge) or edge in parts.buckets:
                raise ValueError(f"series {_show(key)}: missing or repeated le")
            parts.buckets[edge] = sample.value
        elif sample.name == f"{family.name}_sum":
            parts.sum = sample.value
        elif sample.name == f"{family.name}_count":
            parts.count = sample.value
    return tuple(
        (MappingProxyType(dict(key)), parts.histogram(where=_show(key)))
        for key, parts in series.items()
    )


@dataclass(slots=True)
class _SeriesParts:
    buckets: dict[float, float] = field(default_factory=dict)
    sum: float | None = None
    count: float | None = None

    def histogram(self, *, where: str) -> Histogram:
        missing = [
            what
            for what, present in (
                ("+Inf bucket", INF in self.buckets),
                ("_count", self.count is not None),
                ("_sum", self.sum is not None),
            )
            if not present
        ]
        if missing or self.sum is None or self.count is None:
            raise ValueError(f"series {where}: no {', no '.join(missing)}")
        ordered = tuple(sorted(self.buckets.items()))
        counts = [count for _, count in ordered]
        if any(later < earlier for earlier, later in itertools.pairwise(counts)):
            raise ValueError(f"series {where}: buckets are not cumulative")
        if self.buckets[INF] != self.count:
            raise ValueError(f"series {where}: +Inf bucket differs from _count")
        return Histogram(buckets=ordered, sum=self.sum, count=self.count)


def _validation_problem(family: Family) -> str:
    if family.type == "histogram":
        try:
            family_histograms(family=family)
        except ValueError as error:
            return str(error)
    elif family.type == "counter":
        for labels, value in family_values(family=family):
            where = _show(tuple(sorted(labels.items())))
            if not math.isfinite(value) or value < 0:
                return f"series {where}: counter value {_number(value)}"
            if value > INT64_MAX:
                return f"series {where}: counter value {_number(value)} is beyond the 64-bit range"
    return ""


def _number(value: float) -> str:
    """A value as the exposition format writes it (+Inf, -Inf, NaN)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _family_blocks(text: str) -> Iterator[tuple[str, str]]:
    """Cut the text into (family name, block text): HELP/TYPE groups and the lines after."""
    name = ""
    lines: list[str] = []
    has_samples = False
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
                continue  # a plain comment
            if parts[2] != name or has_samples:
                if lines:
                    yield name, "\n".join(lines) + "\n"
                name, lines, has_samples = parts[2], [], False
            lines.append(line)
            continue
        match = _METRIC_NAME.match(line)
        sample_name = match.group(0) if match else (name or "<unnamed>")
        if not _belongs(sample_name=sample_name, family_name=name):
            if lines:
                yield name, "\n".join(lines) + "\n"
            name, lines = sample_name, []
        lines.append(line)
        has_samples = True
    if lines:
        yield name, "\n".join(lines) + "\n"


def _belongs(*, sample_name: str, family_name: str) -> bool:
    if not family_name:
        return False
    bases = {family_name}
    if family_name.endswith("_total"):
        bases.add(family_name.removesuffix("_total"))
    return sample_name in bases or any(
        sample_name == base + suffix for base in bases for suffix in _SERIES_SUFFIXES
    )


def _show(key: tuple[tuple[str, str], ...]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in key) + "}"
