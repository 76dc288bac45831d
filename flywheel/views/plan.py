"""The capacity plan page (ui.md "Capacity plan", kpis.md 6c): per month the GPUs needed
against installed per pool, what to add or release and when to order, the placement per
model, the plan's money, plan against actual for the months that ended, and the reference
curves with the SLO's operating point. It reads the plan the forecast job stored; it plans
nothing and writes nothing. Operators, finance and investors read it."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.shortcuts import render
from django.views.decorators.http import require_safe

from flywheel.charts.plan import curve_chart, gpus_chart
from flywheel.domain.plan.placement import DEFAULT_TARGET_BUSY
from flywheel.selectors.plan import NO_PLAN, capacity_plan_get
from metering.domain.factory import user_rate_at
from metering.selectors.factory import curve_json, curve_list, pool_list
from portal.charts import chart_json
from portal.decorators import role_required
from portal.models import Role


@require_safe
@role_required(Role.OPERATOR, Role.FINANCE, Role.INVESTOR)
def capacity_plan(request):
    plan = capacity_plan_get(horizon_months=12, target_busy=DEFAULT_TARGET_BUSY, quantile="p80")
    months = plan["months"]
    context = {
        "title": "Capacity plan",
        "plan": plan,
        "no_plan": NO_PLAN if not months else None,
        "curves": _curves(),
        "made_at": datetime.fromisoformat(plan["made_at"]) if plan.get("made_at") else None,
    }
    if months:
        first = months[0]
        names = [p["pool"] for p in first["pools"]]
        context |= {
            "this_month": first,
            "gpus_chart": chart_json(
                gpus_chart,
                months=[m["month"] for m in months],
                pools=[
                    {
                        "pool": name,
                        "needed": [m["pools"][i]["needed"] for m in months],
                        "installed": [
                            m["pools"][i]["installed"] + m["pools"][i]["add"] for m in months
                        ],
                    }
                    for i, name in enumerate(names)
                ],
            ),
            "orders": [{"month": m["month"], **p} for m in months for p in m["pools"] if p["add"]],
            "added": sum(p["add"] for m in months for p in m["pools"]),
            "needed": sum(p["needed"] for p in first["pools"]),
            "installed": sum(p["installed"] for p in first["pools"]),
        }
    return render(request, "flywheel/plan/capacity_plan.html", context)


def _curves() -> list[dict]:
    """Per model, its curves' chart (fronts, points, the SLO and each operating point) and
    their table rows."""
    gpu_types = {pool.gpu_type for pool in pool_list()}
    by_model: dict[str, list] = {}
    for curve in curve_list():
        by_model.setdefault(curve.model, []).append(curve)
    out = []
    for model, curves in by_model.items():
        slo = curves[0].slo_tpot_ms
        rate = float(user_rate_at(slo)) if slo else None
        chart = chart_json(
            curve_chart,
            title=f"{model}" + (f" · TPOT SLO {slo} ms" if slo else " · no TPOT SLO"),
            slo_user_rate=rate,
            curves=[
                {
                    "label": f"{c.gpu_type} tp{c.tp} {c.precision}",
                    "points": [(float(p.tok_s_per_user), float(p.tok_s_per_gpu)) for p in c.points],
                    "front": [(float(f.per_user), float(f.per_gpu)) for f in c.front],
                    "r_ref": None if c.r_ref is None else float(c.r_ref),
                }
                for c in curves
            ],
        )
        rows = [
            curve_json(c) | {"r_ref_value": _decimal(c.r_ref), "has_pool": c.gpu_type in gpu_types}
            for c in curves
        ]
        out.append({"model": model, "slo_tpot_ms": slo, "chart": chart, "rows": rows})
    return out


def _decimal(value: Decimal | None) -> Decimal | None:
    return None if value is None else round(value)
