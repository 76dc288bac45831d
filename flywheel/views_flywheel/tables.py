"""Table rows of the flywheel page: evidence, the lever catalogue, realized uplift, cycles."""

from __future__ import annotations

from decimal import Decimal

from flywheel.models import Lever
from flywheel.scenarios import LABELS, SYMBOLS, per_month
from flywheel.selectors_flywheel import lever_spec
from portal.templatetags.portal import ratio_pct, tokens


def _whole(value) -> str:
    return "—" if value is None else f"{Decimal(value):,.0f}"


def _cell(value, unit: str) -> dict:
    """A table cell: text shown, the exact figure on hover, right-aligned when numeric."""
    if value is None or value == "":
        return {"text": "—", "title": "", "is_num": unit != "text"}
    if unit == "ratio":
        return {"text": ratio_pct(value), "title": f"{Decimal(value):.6f}", "is_num": True}
    if unit == "tokens":
        return {"text": tokens(value), "title": f"{int(value):,}", "is_num": True}
    if unit in ("gpu_hours", "minutes", "rate", "money"):
        return {"text": _whole(value), "title": f"{Decimal(value):,.2f}", "is_num": True}
    if unit == "count":
        return {"text": f"{int(value):,}", "title": "", "is_num": True}
    return {"text": str(value), "title": "", "is_num": False}


def _evidence_table(evidence) -> dict | None:
    if evidence is None:
        return None
    return {
        "summary": evidence.summary,
        "columns": [{"label": c.label, "is_num": c.unit != "text"} for c in evidence.columns],
        "rows": [
            [_cell(row.get(c.key), c.unit) for c in evidence.columns] for row in evidence.rows
        ],
    }


def _lever_rows(levers: list[Lever], applications) -> list[dict]:
    by_slug = {}
    for application in applications:
        by_slug.setdefault(application.lever.slug, application)
    rows = []
    for lever in levers:
        spec = lever_spec(lever)
        rows.append(
            {
                "lever": lever,
                "effects": [
                    {
                        "factor": e.factor,
                        "symbol": SYMBOLS[e.factor],
                        "label": LABELS[e.factor],
                        "low": e.low,
                        "typical": e.typical,
                        "high": e.high,
                    }
                    for e in spec.effects
                ],
                "cost": spec.cost,
                "application": by_slug.get(lever.slug),
            }
        )
    return rows


def _realized_rows(applications) -> list[dict]:
    rows = []
    for application in applications:
        if application.evaluated_by_id is None:
            continue
        for factor, entry in application.realized.items():
            if "realized_uplift" not in entry:
                continue
            rows.append(
                {
                    "application": application,
                    "lever": application.lever.slug,
                    "factor": factor,
                    "symbol": SYMBOLS.get(factor, factor),
                    "before": float(entry["before"]),
                    "projected": float(entry["projected"]),
                    "after": float(entry["after"]),
                    "projected_uplift": float(entry["projected_uplift"]),
                    "realized_uplift": float(entry["realized_uplift"]),
                    "prior_typical": entry.get("prior_typical"),
                    "updated_typical": entry.get("updated_typical"),
                    "is_capped": entry.get("is_capped"),
                    "cycle": application.evaluated_by,
                }
            )
    return rows


def _cycle_rows(cycles) -> list[dict]:
    rows = []
    for cycle in cycles:
        figures = cycle.figures or {}
        ebitda = figures.get("ebitda")
        proposal = cycle.proposal or {}
        rows.append(
            {
                "cycle": cycle,
                "tef": figures.get("tef"),
                "tfi": figures.get("tfi"),
                "ebitda_per_month": (
                    None
                    if ebitda is None
                    else per_month(Decimal(ebitda), start=cycle.period_start, end=cycle.period_end)
                ),
                "bottleneck": (
                    f"{SYMBOLS[cycle.bottleneck]} {LABELS[cycle.bottleneck]}"
                    if cycle.bottleneck in SYMBOLS
                    else ""
                ),
                "proposal_cost": Decimal(proposal["cost"]) if proposal.get("cost") else None,
            }
        )
    return rows
