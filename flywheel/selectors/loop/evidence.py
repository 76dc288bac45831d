"""Evidence behind each factor, from the data (kpis.md section 6, step 2): capacity
integrals per pool (α: unhealthy GPU-hours; β: idle healthy GPU-hours), hourly rollups per
deployment (η: production against R_ref; σ: SLO misses) with the incidents touching each
deployment (σ: incident minutes), and billing's rated usage of every tenant (s: trial,
internal, allowance and no-contract tokens; ρ: contract discounts, volume tiers and
promotions). Reads only; the diagnosis attaches the tables to its factors.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal, localcontext

from django.db.models import Q

from billing.selectors.rating.rated_usage import (
    PAID,
    UNSOLD_REASONS,
    sales_by_tenant,
)
from flywheel.domain.kpis import KPI_CONTEXT, ratio_of
from flywheel.domain.loop.baseline import Baseline
from flywheel.domain.loop.diagnosis import Evidence, EvidenceColumn
from flywheel.selectors.measurement import FactoryData
from flywheel.selectors.production import hour_production
from metering.selectors.factory import deployment_list
from metering.selectors.sla.incidents import deployment_slugs, incident_queryset, peak_impact
from metering.selectors.usage import deployment_hour_totals, hourly_usage_list
from portal.periods import Period

ZERO = Decimal(0)

HOUR = Decimal(3600)

HUNDRED = Decimal(100)


def _hours(seconds: Decimal) -> Decimal:
    with localcontext(KPI_CONTEXT):
        return seconds / HOUR


def _tokens_text(count: int) -> str:
    """12.4 M / 3.1 B / 6.6 T, as the pages show token counts."""
    for limit, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "k")):
        if count >= limit:
            return f"{count / limit:.1f} {suffix}"
    return f"{count:,}"


GPU_HOURS = "gpu_hours"


# factor, label, base (pool field, row key, label), kept field, lost (row key, label), what
_CAPACITY_FACTORS = (
    (
        "availability",
        "Availability",
        ("calendar_gpu_seconds", "calendar_gpu_hours", "Calendar GPU-h"),
        "available_gpu_seconds",
        ("unhealthy_gpu_hours", "Unhealthy GPU-h"),
        "GPU-hours unhealthy (failed or drained)",
    ),
    (
        "occupancy",
        "Occupancy",
        ("available_gpu_seconds", "healthy_gpu_hours", "Healthy GPU-h"),
        "busy_gpu_seconds",
        ("idle_gpu_hours", "Idle healthy GPU-h"),
        "healthy GPU-hours idle (unsold or unscheduled)",
    ),
)


def _capacity_evidence(baseline: Baseline, names: dict[str, str]) -> list[Evidence]:
    """α: unhealthy GPU-hours by pool; β: idle healthy GPU-hours by pool."""
    return [
        _lost_hours_evidence(baseline, names, factor, *rest) for factor, *rest in _CAPACITY_FACTORS
    ]


def _lost_hours_evidence(
    baseline: Baseline,
    names: dict[str, str],
    factor: str,
    label: str,
    base: tuple[str, str, str],
    kept: str,
    lost: tuple[str, str],
    what: str,
) -> Evidence:
    """One capacity factor by pool: the `base` GPU-hours (pool field, row key, label), the
    hours of it lost (not `kept`), and the factor's ratio kept / base; most lost first."""
    base_field, base_key, base_label = base
    lost_key, lost_label = lost
    rows = []
    for item in baseline.pools:
        p = item.pool
        base_seconds, kept_seconds = getattr(p, base_field), getattr(p, kept)
        rows.append(
            {
                "pool": p.pool,
                "name": names.get(p.pool, p.pool),
                base_key: _hours(base_seconds),
                lost_key: _hours(base_seconds - kept_seconds),
                factor: ratio_of(kept_seconds, base_seconds),
                "telemetry": p.telemetry,
            }
        )
    rows.sort(key=lambda r: (-r[lost_key], r["pool"]))
    total = sum((r[lost_key] for r in rows), ZERO)
    return Evidence(
        factor=factor,
        summary=f"{total:,.0f} {what}" + (f", most in {rows[0]['pool']}" if total else ""),
        columns=(
            EvidenceColumn(key="pool", label="Pool"),
            EvidenceColumn(key=base_key, label=base_label, unit=GPU_HOURS),
            EvidenceColumn(key=lost_key, label=lost_label, unit=GPU_HOURS),
            EvidenceColumn(key=factor, label=label, unit="ratio"),
            EvidenceColumn(key="telemetry", label="Telemetry"),
        ),
        rows=tuple(rows),
    )


def _deployment_sums(start: datetime, end: datetime, data: FactoryData) -> dict[int, dict]:
    """Per deployment: requests, compliant requests, errors, Σtok, Σstd and compliant Σstd
    from the hourly rollups (the hour holding `end` as of the cut, as every read of the
    window), with the version in force at each hour."""
    rows = deployment_hour_totals(hourly_usage_list(start=start, end=end), end=end)
    sums: dict[int, dict] = defaultdict(
        lambda: {"requests": 0, "compliant": 0, "errors": 0, "tok": ZERO, "std": ZERO, "ok": ZERO}
    )
    with localcontext(KPI_CONTEXT):
        for row in rows:
            version = data.versions.at(row["deployment_id"], row["hour"].astimezone(UTC))
            if version is None:
                continue
            total = sums[row["deployment_id"]]
            tok, compliant = hour_production(row, version)
            total["requests"] += row["n"]
            total["compliant"] += row["ok"]
            total["errors"] += row["err"]
            total["tok"] += tok
            total["std"] += tok / version.r_ref
            total["ok"] += compliant / version.r_ref
    return sums


def _incident_minutes(start: datetime, end: datetime, slugs: list[str]) -> dict[str, dict]:
    """Per deployment slug: minutes of incidents touching it within [start, end), how many,
    and the worst impact."""
    incidents = incident_queryset().filter(
        Q(resolved_at__isnull=True) | Q(resolved_at__gt=start), started_at__lt=end
    )
    result: dict[str, dict] = {slug: {"minutes": ZERO, "count": 0, "worst": ""} for slug in slugs}
    rank = {"": 0, "degraded": 1, "partial_outage": 2, "major_outage": 3}
    for incident in incidents:
        lo = max(incident.started_at, start)
        hi = min(incident.resolved_at or end, end)
        if hi <= lo:
            continue
        minutes = Decimal(int((hi - lo).total_seconds())) / 60
        scope = deployment_slugs(incident)
        impact = peak_impact(incident)
        for slug in slugs:
            if scope and slug not in scope:
                continue
            entry = result[slug]
            entry["minutes"] += minutes
            entry["count"] += 1
            if rank.get(impact, 0) > rank.get(entry["worst"], 0):
                entry["worst"] = impact
    return result


def _deployment_evidence(
    baseline: Baseline, start: datetime, end: datetime, data: FactoryData
) -> tuple[Evidence, Evidence]:
    """η: production against R_ref by deployment; σ: incident minutes and SLO misses."""
    eta_rows, sigma_rows = _deployment_rows(baseline, start, end, data)
    return _efficiency_evidence(eta_rows), _sla_delivery_evidence(sigma_rows)


def _deployment_rows(
    baseline: Baseline, start: datetime, end: datetime, data: FactoryData
) -> tuple[list[dict], list[dict]]:
    """Per deployment of a costed pool: its η row and its σ row, worst first."""
    sums = _deployment_sums(start, end, data)
    deployments = {
        d.pk: d for d in deployment_list().select_related("pool", "model").order_by("slug")
    }
    pools = {item.pool.pool: item.pool for item in baseline.pools}
    incidents = _incident_minutes(start, end, [d.slug for d in deployments.values()])
    eta_rows, sigma_rows = [], []
    with localcontext(KPI_CONTEXT):
        for pk, deployment in deployments.items():
            made = sums.get(pk)
            pool = pools.get(deployment.pool.slug)
            if pool is None:
                continue
            std = made["std"] if made else ZERO
            # Busy time is measured per pool: a deployment takes its share of production.
            busy = (
                pool.busy_gpu_seconds * std / pool.std_gpu_seconds if pool.std_gpu_seconds else ZERO
            )
            r_ref = made["tok"] / std if made and std else None
            eta_rows.append(
                {
                    "deployment": deployment.slug,
                    "pool": deployment.pool.slug,
                    "r_ref": r_ref,
                    "production_tokens": made["tok"] if made else ZERO,
                    "rate_per_busy_gpu": (made["tok"] / busy) if made and busy else None,
                    "busy_gpu_hours": _hours(busy),
                    "short_gpu_hours": _hours(max(busy - std, ZERO)),
                    "efficiency": ratio_of(std, busy),
                }
            )
            incident = incidents[deployment.slug]
            misses = (made["requests"] - made["compliant"]) if made else 0
            sigma_rows.append(
                {
                    "deployment": deployment.slug,
                    "incident_minutes": incident["minutes"],
                    "incidents": incident["count"],
                    "worst_impact": incident["worst"].replace("_", " "),
                    "requests": made["requests"] if made else 0,
                    "slo_misses": misses,
                    "errors": made["errors"] if made else 0,
                    "missed_std_gpu_hours": _hours(std - made["ok"]) if made else ZERO,
                    "sla_delivery": ratio_of(made["ok"], std) if made else None,
                }
            )
    eta_rows.sort(key=lambda r: (-r["short_gpu_hours"], r["deployment"]))
    sigma_rows.sort(key=lambda r: (-r["missed_std_gpu_hours"], r["deployment"]))
    return eta_rows, sigma_rows


def _efficiency_evidence(eta_rows: list[dict]) -> Evidence:
    """η's evidence: busy GPU-hours short of R_ref, per deployment."""
    short = sum((r["short_gpu_hours"] for r in eta_rows), ZERO)
    return Evidence(
        factor="efficiency",
        summary=(
            f"{short:,.0f} busy GPU-hours produced nothing at R_ref"
            + (f", most on {eta_rows[0]['deployment']}" if short else "")
        ),
        columns=(
            EvidenceColumn(key="deployment", label="Deployment"),
            EvidenceColumn(key="r_ref", label="R_ref (tok/s/GPU)", unit="rate"),
            EvidenceColumn(key="rate_per_busy_gpu", label="Made (tok/s per busy GPU)", unit="rate"),
            EvidenceColumn(key="production_tokens", label="Production (tokens)", unit="tokens"),
            EvidenceColumn(
                key="short_gpu_hours", label="Busy GPU-h short of R_ref", unit=GPU_HOURS
            ),
            EvidenceColumn(key="efficiency", label="Efficiency", unit="ratio"),
        ),
        rows=tuple(eta_rows),
    )


def _sla_delivery_evidence(sigma_rows: list[dict]) -> Evidence:
    """σ's evidence: incident minutes and SLO misses, per deployment."""
    missed = sum((r["missed_std_gpu_hours"] for r in sigma_rows), ZERO)
    misses = sum(r["slo_misses"] for r in sigma_rows)
    minutes = sum((r["incident_minutes"] for r in sigma_rows), ZERO)
    return Evidence(
        factor="sla_delivery",
        summary=(
            f"{misses:,} requests missed their SLO ({missed:,.0f} standard GPU-hours "
            f"of production); incidents: {minutes:,.0f} deployment-minutes"
        ),
        columns=(
            EvidenceColumn(key="deployment", label="Deployment"),
            EvidenceColumn(key="incident_minutes", label="Incident minutes", unit="minutes"),
            EvidenceColumn(key="worst_impact", label="Worst impact"),
            EvidenceColumn(key="slo_misses", label="SLO misses (requests)", unit="count"),
            EvidenceColumn(key="errors", label="of which errors", unit="count"),
            EvidenceColumn(key="missed_std_gpu_hours", label="Missed std GPU-h", unit=GPU_HOURS),
            EvidenceColumn(key="sla_delivery", label="SLA delivery", unit="ratio"),
        ),
        rows=tuple(sigma_rows),
    )


def _sales_evidence(start: datetime, end: datetime) -> tuple[Evidence, Evidence]:
    """s: unsold tokens (trial, internal, allowance, no contract) by tenant; ρ: list value,
    discounts, tiers and promotions by tenant."""
    unsold, money = _sales_by_tenant(Period(start, end))
    return _sell_through_evidence(unsold), _price_realization_evidence(money)


def _sales_by_tenant(period: Period) -> tuple[dict[str, dict], dict[str, dict]]:
    """Per tenant: its tokens paid and unsold by reason; the money of its paid ones."""
    unsold: dict[str, dict] = {}
    money: dict[str, dict] = {}
    with localcontext(KPI_CONTEXT):
        for sale in sales_by_tenant(period=period):
            slug = sale["tenant_slug"]
            row = unsold.setdefault(
                slug, {"tenant": slug, "paid_tokens": 0, **dict.fromkeys(UNSOLD_REASONS, 0)}
            )
            tokens = sale["input_tokens"] + sale["output_tokens"]
            if sale["sale"] != PAID:
                row[sale["sale"]] += tokens
                continue
            row["paid_tokens"] += tokens
            value = money.setdefault(
                slug,
                {
                    "tenant": slug,
                    "list_value": ZERO,
                    "contract_discount": ZERO,
                    "tier_discount": ZERO,
                    "promotions": ZERO,
                    "realized": ZERO,
                },
            )
            for name in ("list_value", "contract_discount", "tier_discount", "promotions"):
                value[name] += sale[name]
            value["realized"] += sale["realized"] - sale["promotions"]
    return unsold, money


TENANT = EvidenceColumn(key="tenant", label="Tenant")


def _sell_through_evidence(unsold: dict[str, dict]) -> Evidence:
    """s's evidence: the tenants served unsold tokens, most first."""
    rows = []
    for row in unsold.values():
        row["unsold_tokens"] = sum(row[reason] for reason in UNSOLD_REASONS)
        row["unsold_share"] = ratio_of(
            row["unsold_tokens"], row["unsold_tokens"] + row["paid_tokens"]
        )
        if row["unsold_tokens"]:
            rows.append(row)
    rows.sort(key=lambda r: (-r["unsold_tokens"], r["tenant"]))
    by_reason = {reason: sum(r[reason] for r in rows) for reason in UNSOLD_REASONS}
    reasons = ", ".join(
        f"{reason.replace('_', ' ')} {_tokens_text(tokens)}"
        for reason, tokens in by_reason.items()
        if tokens
    )
    return Evidence(
        factor="sell_through",
        summary=f"{_tokens_text(sum(by_reason.values()))} tokens served unsold"
        + (f" ({reasons})" if reasons else ""),
        columns=(
            TENANT,
            EvidenceColumn(key="trial", label="Trial", unit="tokens"),
            EvidenceColumn(key="internal", label="Internal", unit="tokens"),
            EvidenceColumn(key="allowance", label="Free allowance", unit="tokens"),
            EvidenceColumn(key="no_contract", label="No contract", unit="tokens"),
            EvidenceColumn(key="paid_tokens", label="Paid", unit="tokens"),
            EvidenceColumn(key="unsold_share", label="Unsold share", unit="ratio"),
        ),
        rows=tuple(rows),
    )


def _price_realization_evidence(money: dict[str, dict]) -> Evidence:
    """ρ's evidence: the tenants whose list value was not all collected, most first."""
    rows = []
    for row in money.values():
        row["forgone"] = row["list_value"] - row["realized"]
        row["price_realization"] = ratio_of(row["realized"], row["list_value"])
        if row["forgone"]:
            rows.append(row)
    rows.sort(key=lambda r: (-r["forgone"], r["tenant"]))
    forgone = sum((r["forgone"] for r in rows), ZERO)
    return Evidence(
        factor="price_realization",
        summary=(
            f"{forgone:,.0f} of list value not collected"
            + (f", most from {rows[0]['tenant']}" if rows else "")
        ),
        columns=(
            TENANT,
            EvidenceColumn(key="list_value", label="List value", unit="money"),
            EvidenceColumn(key="contract_discount", label="Contract discount", unit="money"),
            EvidenceColumn(key="tier_discount", label="Volume tiers", unit="money"),
            EvidenceColumn(key="promotions", label="Promotions", unit="money"),
            EvidenceColumn(key="realized", label="Realized", unit="money"),
            EvidenceColumn(key="price_realization", label="Price realization", unit="ratio"),
        ),
        rows=tuple(rows),
    )


def evidence_get(
    *, baseline: Baseline, start: datetime, end: datetime, data: FactoryData
) -> dict[str, Evidence]:
    """The evidence behind every factor over [start, end), by factor."""
    names = {p.slug: p.name for p in data.pools.values()}
    found = (
        *_capacity_evidence(baseline, names),
        *_deployment_evidence(baseline, start, end, data),
        *_sales_evidence(start, end),
    )
    return {evidence.factor: evidence for evidence in found}
