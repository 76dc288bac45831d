"""Plotly figures of billing data (from selector output)."""

from datetime import datetime, timedelta
from decimal import Decimal

import plotly.graph_objects as go

from portal.charts import PARTIAL_PATTERN, base_layout, month_label
from portal.periods import is_part_of_month, next_month

UNSOLD_COLOURS = {
    "trial": "#7048e8",
    "internal": "#0b7285",
    "allowance": "#e67700",
    "no_contract": "#868e96",
}


def realization_chart(rows: list[dict], *, currency: str, limit: int = 15) -> go.Figure:
    """List value against realized revenue per tenant (largest list value first)."""
    by_tenant: dict[str, list] = {}
    for row in rows:
        entry = by_tenant.setdefault(row["tenant"].name, [0.0, 0.0])
        entry[0] += float(row["list_value"])
        entry[1] += float(row["realized"])
    top = sorted(by_tenant.items(), key=lambda kv: -kv[1][0])[:limit]
    names = [name for name, _ in top]
    layout = base_layout(y_title=f"{currency}", x_title="Tenant", barmode="group")
    layout["xaxis"]["tickangle"] = -30
    fig = go.Figure(layout=layout)
    fig.add_bar(x=names, y=[v[0] for _, v in top], name="List value", marker_color="#adb5bd")
    fig.add_bar(
        x=names,
        y=[v[1] for _, v in top],
        name="Realized",
        marker_color="#1f6feb",
        text=[f"{v[1] / v[0]:.0%}" if v[0] else "" for _, v in top],
        textposition="outside",
    )
    return fig


def unsold_chart(unsold: dict[str, dict[str, int]]) -> go.Figure:
    """Unsold tokens per tenant, stacked by reason."""
    tenants = sorted(unsold, key=lambda name: -sum(unsold[name].values()))
    layout = base_layout(y_title="Tokens", x_title="Tenant", barmode="stack")
    layout["xaxis"]["tickangle"] = -30
    fig = go.Figure(layout=layout)
    for reason, colour in UNSOLD_COLOURS.items():
        values = [unsold[name].get(reason, 0) for name in tenants]
        if any(values):
            fig.add_bar(x=tenants, y=values, name=reason.replace("_", " "), marker_color=colour)
    return fig


def sla_history_chart(history) -> go.Figure:
    """Monthly uptime against the SLA target (percent), oldest month first; the month in
    progress hatched and named with how much of it there is ("Dec 2026 (133 h)")."""
    layout = base_layout(y_title="Uptime (%)", x_title="Month (UTC)")
    layout["xaxis"]["type"] = "category"  # one tick a month, named by its label
    fig = go.Figure(layout=layout)
    months = [
        month_label(f.sla.month_start, start=f.sla.month_start, end=f.sla.period_end)
        for f in history
    ]
    partial = [is_part_of_month(f.sla.month_start, start=f.sla.month_start,
                                end=f.sla.period_end) for f in history]  # fmt: skip
    # A month without usage has no SLA to show: no bar, "no data" (not a green "met").
    uptimes = [
        float(f.sla.uptime) * 100 if f.sla.uptime is not None and f.sla.requests else None
        for f in history
    ]
    lowest = min((u for u in uptimes if u is not None), default=100.0)
    fig.update_layout(yaxis={"range": [min(99.0, lowest - 0.2), 100.02]})
    fig.add_bar(
        x=months,
        y=uptimes,
        name="Uptime",
        marker={
            "color": [
                "#2b8a3e" if f.target is None or (f.sla.uptime or 0) >= f.target else "#c92a2a"
                for f in history
            ],
            "pattern": {"shape": [PARTIAL_PATTERN if p else "" for p in partial]},
        },
        text=[f"{u:.3f}%" if u is not None else "" for u in uptimes],
        textposition="outside",
        cliponaxis=False,  # a 100% bar's figure sits above the plot's top, not hidden
        customdata=["month to date" if p else "" for p in partial],
        hovertemplate="%{x} %{customdata}<br>%{y:.3f}%<extra></extra>",
    )
    for month, uptime in zip(months, uptimes, strict=True):
        if uptime is None:
            fig.add_annotation(
                x=month, y=min(99.0, lowest - 0.2), yanchor="bottom", showarrow=False,
                text="no data", font={"color": "#6c757d"},
            )  # fmt: skip
    targets = [float(f.target) * 100 if f.target is not None else None for f in history]
    if any(t is not None for t in targets):
        fig.add_scatter(
            x=months,
            y=targets,
            name="Target",
            mode="lines",
            line={"color": "#1b1f24", "dash": "dash"},
        )
    return fig


def budget_burn_chart(days: list[tuple[datetime, Decimal]], budget) -> go.Figure:
    """A budget's month: what was spent by the end of each day so far, the budget, and the
    month's projection at the pace so far (from `as_of` to the month's end)."""
    unit = "tokens" if budget.unit == "tokens" else budget.unit
    layout = base_layout(y_title=f"Spent ({unit})", x_title="Day (UTC)")
    fig = go.Figure(layout=layout)
    ends = [min(day + timedelta(days=1), budget.as_of) for day, _ in days]  # today: so far
    fig.add_scatter(
        x=[budget.month, *ends],
        y=[0, *(float(spent) for _, spent in days)],
        name="Spent",
        mode="lines+markers",
        line={"color": "#1f6feb", "width": 3},
    )
    month_end = next_month(budget.month)
    fig.add_scatter(
        x=[budget.as_of, month_end],
        y=[float(budget.spent), float(budget.projected)],
        name="Projected",
        mode="lines",
        line={"color": "#1f6feb", "dash": "dot"},
    )
    fig.add_scatter(
        x=[budget.month, month_end],
        y=[float(budget.budget)] * 2,
        name="Budget",
        mode="lines",
        line={"color": "#c92a2a", "dash": "dash"},
    )
    return fig


def utilization_chart(buckets, overage: dict, *, daily: bool) -> go.Figure:
    """A reservation's covered tokens (tok) per hour or day against its capacity, with the
    tokens its tenant bought on demand beyond it stacked above; each bar spans its hour or
    day, the capacity a step across them."""
    layout = base_layout(y_title="Tokens", x_title="Day (UTC)" if daily else "Hour (UTC)",
                         barmode="stack")  # fmt: skip
    fig = go.Figure(layout=layout)
    step = timedelta(days=1) if daily else timedelta(hours=1)
    period = {"xperiod": int(step.total_seconds() * 1000), "xperiodalignment": "middle"}
    starts = [b.start for b in buckets]
    fig.add_bar(x=starts, y=[float(b.covered) for b in buckets], name="Covered",
                marker_color="#1f6feb", **period)  # fmt: skip
    fig.add_bar(x=starts, y=[overage.get(b.start, 0) for b in buckets],
                name="Overage (on demand)", marker_color="#e67700", **period)  # fmt: skip
    caps = [float(b.cap) for b in buckets]
    fig.add_scatter(x=[*starts, starts[-1] + step], y=[*caps, caps[-1]], name="Capacity",
                    mode="lines", line={"color": "#212529", "shape": "hv", "dash": "dash"})  # fmt: skip
    return fig
