"""JSON shapes of the flywheel API: diagnosis, evidence, goal check, projection, proposal."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings

from flywheel.domain.loop.demand import month_basis
from flywheel.domain.loop.diagnosis import Diagnosis, Evidence
from flywheel.domain.loop.goals import GoalCheck, Proposal
from flywheel.domain.loop.growth import GrowthSeries
from flywheel.domain.loop.projection import Projection
from flywheel.selectors.loop.baseline import uncosted_json
from flywheel.selectors.plan import plan_additions
from flywheel.selectors.tfom import tfom_json
from portal.formatting import rfc3339
from portal.money import money_str


def money_json(value: Decimal | None) -> str | None:
    return money_str(amount=value, currency=settings.FACTORY_CURRENCY)


def number_json(value) -> float | None:
    return None if value is None else float(value)


def _cell(value, unit: str):
    if value is None:
        return None
    if unit == "money":
        return money_json(value)
    if unit in ("tokens", "count"):
        return int(value)
    if isinstance(value, Decimal):
        return float(value)
    return value


def evidence_json(evidence: Evidence | None) -> dict | None:
    if evidence is None:
        return None
    units = {c.key: c.unit for c in evidence.columns}
    return {
        "summary": evidence.summary,
        "columns": [{"key": c.key, "label": c.label, "unit": c.unit} for c in evidence.columns],
        "rows": [
            {key: _cell(value, units.get(key, "")) for key, value in row.items()}
            for row in evidence.rows
        ],
    }


def diagnosis_json(diagnosis: Diagnosis) -> list[dict]:
    """The ranked factors: value, target, monthly gains at target, evidence."""
    return [
        {
            "rank": index + 1,
            "factor": f.factor,
            "symbol": f.symbol,
            "label": f.label,
            "value": number_json(f.value),
            "target": number_json(f.target),
            "is_at_target": f.is_at_target,
            "ebitda_gain_per_month": money_json(f.ebitda_gain_per_month),
            "revenue_gain_per_month": money_json(f.revenue_gain_per_month),
            "energy_cost_change_per_month": money_json(f.energy_cost_change_per_month),
            "measured_demand_gain_per_month": money_json(f.measured_demand_gain_per_month),
            "projected_tfi": number_json(f.projected_tfi),
            "evidence": evidence_json(f.evidence),
        }
        for index, f in enumerate(diagnosis.factors)
    ]


def goal_check_json(check: GoalCheck) -> list[dict]:
    return [
        {
            "key": c.key,
            "label": c.label,
            "required": money_json(c.required)
            if c.key == "ebitda_per_month"
            else number_json(c.required),
            "actual": money_json(c.actual)
            if c.key == "ebitda_per_month"
            else number_json(c.actual),
            "is_met": c.is_met,
        }
        for c in check.criteria
    ]


def projection_summary(projection: Projection) -> dict:
    """The headline figures of a projection, per month where money."""
    t = projection.tfom
    return {
        "tef": number_json(t.tef),
        "tfi": number_json(t.tfi),
        "gross_margin": number_json(t.gross_margin),
        "revenue_per_month": money_json(projection.per_month(t.revenue)),
        "ebitda_per_month": money_json(projection.per_month(t.ebitda)),
        "energy_cost_per_month": money_json(projection.per_month(t.energy_cost)),
        "opex_per_month": money_json(projection.per_month(t.opex)),
    }


def proposal_json(proposal: Proposal) -> dict:
    """A goal check's proposal. When no lever set meets the goal under growing demand, the
    capacity plan's GPU additions come with it (`capacity`): capacity, not levers, is what
    growth needs then (kpis.md 6 and 6c)."""
    capacity = (
        plan_additions() if not proposal.is_found and proposal.demand.kind == "growth" else []
    )
    return {
        **proposal.demand.as_json(),
        "capacity": capacity,
        "is_found": proposal.is_found,
        "levers": list(proposal.levers),
        "cost": money_json(proposal.cost),
        "message": "; ".join([proposal.message, *(c["message"] for c in capacity)]),
        "subsets_checked": proposal.subsets_checked,
        "is_exhaustive": proposal.is_exhaustive,
        "projected": projection_summary(proposal.projection) if proposal.projection else None,
    }


def capacity_json(projection: Projection) -> list[dict]:
    """Each pool's GPUs measured and projected (time-weighted averages over the period)."""
    return [
        {
            "pool": c.pool,
            "installed_gpus": number_json(c.installed),
            "projected_installed_gpus": number_json(c.projected_installed),
            "busy_gpus": number_json(c.busy),
            "projected_busy_gpus": number_json(c.projected_busy),
            "headroom_gpus": number_json(c.headroom),
            "projected_headroom_gpus": number_json(c.projected_headroom),
            "released_gpus": number_json(c.released),
            "withdrawn_gpus": c.withdrawn,
        }
        for c in projection.capacity
    ]


def series_json(series: GrowthSeries) -> dict:
    """A growth scenario's months: demand, capacity and served production (output-token
    units per month), money per month, and the first month beyond today's capacity."""
    return {
        "first_month_over_capacity": series.first_month_over_capacity,
        "pools_over_capacity": list(series.pools_over_capacity),
        "months": [
            {
                "month": m.month,
                "demand_tokens": int(m.demand_tokens),
                "capacity_tokens": int(m.capacity_tokens),
                "served_tokens": int(m.served_tokens),
                "is_over_capacity": m.is_over_capacity,
                **projection_summary(m.projection),
                "occupancy": number_json(m.projection.tfom.occupancy),
            }
            for m in series.months
        ],
    }


def diagnosis_response(diagnosis: Diagnosis, *, rating_errors: dict | None = None) -> dict:
    """GET /api/v1/flywheel/diagnosis: the period, measured figures, targets, the
    bottleneck and the ranked factors with their evidence."""
    bottleneck = diagnosis.bottleneck
    return {
        "from": rfc3339(diagnosis.start),
        "to": rfc3339(diagnosis.end),
        "currency": settings.FACTORY_CURRENCY,
        "bottleneck": bottleneck.factor if bottleneck else None,
        "ebitda_per_month": money_json(diagnosis.ebitda_per_month),
        "month_basis": month_basis(start=diagnosis.start, end=diagnosis.end),
        "targets": {factor: float(value) for factor, value in diagnosis.targets.items()},
        "factors": diagnosis_json(diagnosis),
        "measured": tfom_json(diagnosis.measured),
        "rating_errors": rating_errors or {},
        "uncosted": uncosted_json(pools=diagnosis.uncosted, start=diagnosis.start),
    }
