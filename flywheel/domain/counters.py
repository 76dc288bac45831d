"""The counters /metrics publishes (architecture.md "Metrics and dashboards"): their names,
help and labels, declared once, and how the sums of months become their series.

A counter counts from the factory's first hour in service to the end of the last whole hour
measured, so PromQL computes a KPI over any range of whole hours from increases, e.g.
TEF = increase(standard) / increase(calendar). A month's part of every counter is kept as its
sums (`MonthCounts`): each pool's GPU-seconds and money as its KPI snapshot has them, usage
per deployment and service tier and per tenant as metering's rollups have it; a counter is
the sum of its months. Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from billing.domain.rating.boundaries import class_quantities

# The tier of an event that names none (kpis.md section 3): the tier of the usage a month's
# part counted before its sums were kept by tier.
STANDARD_TIER = "standard"


@dataclass(frozen=True)
class CounterFamily:
    """One counter: its name (Prometheus adds `_total` to its samples), help and labels."""

    name: str
    help: str
    labels: tuple[str, ...]
    is_per_tenant: bool = False  # published only while METRICS_TENANT_LABELS is on

    @property
    def sample_name(self) -> str:
        return f"{self.name}_total"


def _gpu_seconds(name: str, help_text: str) -> CounterFamily:
    return CounterFamily(f"tokenfactory_{name}_gpu_seconds", help_text, ("pool",))


CALENDAR = _gpu_seconds(
    "calendar", "C: installed GPUs integrated over time while in service (kpis.md section 1)."
)
AVAILABLE = _gpu_seconds("available", "A: healthy GPUs integrated over time while in service.")
BUSY = _gpu_seconds("busy", "B: GPUs allocated to serving integrated over time while in service.")
STANDARD = _gpu_seconds(
    "standard", "Sum of std(e): production in GPU-seconds at each deployment's R_ref (kpis.md 2)."
)
COMPLIANT = _gpu_seconds(
    "compliant_standard", "Standard GPU-seconds of the events within their SLO (kpis.md 3)."
)
PAID_COMPLIANT = _gpu_seconds(
    "paid_compliant_standard", "Standard GPU-seconds of the paid events within their SLO."
)
RESERVED = _gpu_seconds(
    "reserved",
    "GPU-seconds reserved for tenants: the reservations' GPUs integrated over time (kpis.md 3d).",
)
TOKENS = CounterFamily(
    "tokenfactory_tokens",
    "Tokens of every request, failed ones included, by token class and service tier.",
    ("pool", "model", "class", "tier"),
)
REQUESTS = CounterFamily(
    "tokenfactory_requests", "Requests by outcome (ok or error).", ("pool", "model", "status")
)
LIST_VALUE = CounterFamily(
    "tokenfactory_list_value",
    "List value of the paid tokens, in the currency (kpis.md section 3).",
    ("pool", "currency"),
)
REALIZED = CounterFamily(
    "tokenfactory_realized_revenue",
    "Realized amount of the paid tokens after discounts, tiers and promotions, unrounded.",
    ("pool", "currency"),
)
TENANT_TOKENS = CounterFamily(
    "tokenfactory_tenant_tokens",
    "Tokens (input and output) of every request of the tenant.",
    ("tenant",),
    is_per_tenant=True,
)
TENANT_REQUESTS = CounterFamily(
    "tokenfactory_tenant_requests",
    "Requests of the tenant, failed ones included.",
    ("tenant",),
    is_per_tenant=True,
)
TENANT_COMPLIANT = CounterFamily(
    "tokenfactory_tenant_compliant_requests",
    "Requests of the tenant that were ok and within their SLO (errors miss; kpis.md 3b).",
    ("tenant",),
    is_per_tenant=True,
)

COUNTERS = (
    CALENDAR, AVAILABLE, BUSY, STANDARD, COMPLIANT, PAID_COMPLIANT, RESERVED, TOKENS, REQUESTS,
    LIST_VALUE, REALIZED, TENANT_TOKENS, TENANT_REQUESTS, TENANT_COMPLIANT,
)  # fmt: skip

# A pool's additive figures, as its KPI snapshot sums name them, and the counter of each.
POOL_FIGURES = {
    "calendar": CALENDAR,
    "available": AVAILABLE,
    "busy": BUSY,
    "std": STANDARD,
    "compliant_std": COMPLIANT,
    "compliant_paid_std": PAID_COMPLIANT,
    "reserved": RESERVED,
    "list_value": LIST_VALUE,
    "realized": REALIZED,
}
# A deployment's usage sums (every request's tokens, failed ones included).
USAGE_FIGURES = (
    "requests", "errors", "input_tokens", "cached_tokens", "cache_write_tokens",
    "output_tokens", "reasoning_tokens",
)  # fmt: skip
TENANT_FIGURES = {"tokens": TENANT_TOKENS, "requests": TENANT_REQUESTS,
                  "compliant_requests": TENANT_COMPLIANT}  # fmt: skip

Series = tuple[CounterFamily, tuple[str, ...]]  # a counter and its label values


def label_text(family: CounterFamily, values: Iterable[str]) -> str:
    """A series' labels as the text exposition format writes them: `pool="h100-a",…`, in
    the family's order, values escaped (backslash, double quote, line feed)."""
    pairs = zip(family.labels, values, strict=True)
    return ",".join(f'{name}="{_escaped(value)}"' for name, value in pairs)


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


COUNTED_UNTIL = "tokenfactory_counted_until_timestamp_seconds"
COUNTED_UNTIL_HELP = (
    "End of the last whole hour the counters count, as a Unix time (they advance as hours "
    "close and are measured)."
)


def exposition(
    values: Mapping[str, Iterable[tuple[str, Decimal]]],
    *,
    per_tenant: bool,
    counted_until: float | None,
) -> str:
    """The counters in Prometheus's text format (0.0.4): `values` maps a counter's name to
    its series (label text, value); the per-tenant counters only when `per_tenant`; then
    the instant they count up to (Unix time), when there is one."""
    lines = []
    for family in COUNTERS:
        if family.is_per_tenant and not per_tenant:
            continue
        name = family.sample_name
        lines += [f"# HELP {name} {family.help}", f"# TYPE {name} counter"]
        lines += [
            f"{name}{{{labels}}} {float(value)!r}" for labels, value in values.get(family.name, ())
        ]
    lines += [f"# HELP {COUNTED_UNTIL} {COUNTED_UNTIL_HELP}", f"# TYPE {COUNTED_UNTIL} gauge"]
    if counted_until is not None:
        lines.append(f"{COUNTED_UNTIL} {counted_until!r}")
    return "\n".join(lines) + "\n"


def metric_names() -> set[str]:
    """The names of the samples the counters publish, and their instant's."""
    return {*(family.sample_name for family in COUNTERS), COUNTED_UNTIL}


@dataclass
class MonthCounts:
    """One month's part of every counter (up to where the month was measured): each pool's
    GPU-seconds and money (by slug), each deployment's usage by service tier (by id and
    tier) and each tenant's (by id)."""

    pools: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    deployments: dict[tuple[int, str], dict[str, int]] = field(default_factory=dict)
    tenants: dict[int, dict[str, int]] = field(default_factory=dict)

    def add(self, other: MonthCounts) -> None:
        """Add another month's sums to these (exact: Decimal and int)."""
        _add_into(self.pools, other.pools)
        _add_into(self.deployments, other.deployments)
        _add_into(self.tenants, other.tenants)

    def usage_add(
        self, *, tenant_id: int, deployment_id: int, tier: str, sums: Mapping[str, int]
    ) -> None:
        """Add one (tenant, deployment, service tier) row of rollup sums (USAGE_FIGURES and
        `compliant_requests`) to its deployment's sums at that tier and to its tenant's."""
        deployment = self.deployments.setdefault(
            (deployment_id, tier), dict.fromkeys(USAGE_FIGURES, 0)
        )
        for name in USAGE_FIGURES:
            deployment[name] += sums[name]
        tenant = self.tenants.setdefault(tenant_id, dict.fromkeys(TENANT_FIGURES, 0))
        tenant["tokens"] += sums["input_tokens"] + sums["output_tokens"]
        tenant["requests"] += sums["requests"]
        tenant["compliant_requests"] += sums["compliant_requests"]

    def as_json(self) -> dict:
        """Exact decimal strings and ints, keys as strings: what a month's row stores."""
        return {
            "pools": {
                slug: {name: str(value) for name, value in figures.items()}
                for slug, figures in self.pools.items()
            },
            "deployments": {
                f"{deployment_id}:{tier}": figures
                for (deployment_id, tier), figures in self.deployments.items()
            },
            "tenants": {str(key): figures for key, figures in self.tenants.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping) -> MonthCounts:
        return cls(
            pools={
                slug: {name: Decimal(value) for name, value in figures.items()}
                for slug, figures in data.get("pools", {}).items()
            },
            deployments={
                _deployment_key(key): dict(value)
                for key, value in data.get("deployments", {}).items()
            },
            tenants={int(key): dict(value) for key, value in data.get("tenants", {}).items()},
        )


def _deployment_key(key: str) -> tuple[int, str]:
    """A deployment's key as a month's row stores it, `12:priority`; a bare id (a part
    counted before usage was kept by tier) is the standard tier's."""
    deployment_id, _, tier = key.partition(":")
    return int(deployment_id), tier or STANDARD_TIER


def _add_into(mine: dict[Any, dict[str, Any]], theirs: Mapping[Any, Mapping[str, Any]]) -> None:
    for key, figures in theirs.items():
        total = mine.setdefault(key, {})
        for name, value in figures.items():
            total[name] = total.get(name, 0) + value


def counter_series(
    *,
    counts: MonthCounts,
    deployments: Mapping[int, tuple[str, str]],
    tenants: Mapping[int, str],
    currency: str,
) -> dict[Series, Decimal]:
    """The value of every counter series from the sums of all months: `deployments` names
    each deployment's (pool, model), `tenants` each tenant's slug (label values are slugs, so
    two deployments of one model on one pool add up). Sums of a deployment or tenant no
    longer there are left out (their series keep the value last published)."""
    series: dict[Series, Decimal] = {}

    def add(family: CounterFamily, labels: Iterable[str], value: Decimal | int) -> None:
        key = (family, tuple(labels))
        series[key] = series.get(key, Decimal(0)) + value

    for pool, figures in counts.pools.items():
        for name, family in POOL_FIGURES.items():
            money = family in (LIST_VALUE, REALIZED)
            add(family, (pool, currency) if money else (pool,), figures.get(name, 0))
    for (deployment_id, tier), sums in counts.deployments.items():
        if deployment_id not in deployments:
            continue
        pool, model = deployments[deployment_id]
        quantities = class_quantities(**{name: sums[name] for name in USAGE_FIGURES[2:]})
        for token_class, quantity in quantities.items():
            add(TOKENS, (pool, model, token_class.value, tier), quantity)
        add(REQUESTS, (pool, model, "ok"), sums["requests"] - sums["errors"])
        add(REQUESTS, (pool, model, "error"), sums["errors"])
    for tenant_id, sums in counts.tenants.items():
        if tenant_id not in tenants:
            continue
        for name, family in TENANT_FIGURES.items():
            add(family, (tenants[tenant_id],), sums[name])
    return series
