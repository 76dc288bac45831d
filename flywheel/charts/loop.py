"""Charts of the loop: the diagnosis (EBITDA each factor gains at its target), the
simulator's factors measured against projected, and the levers' realized uplift."""

import plotly.graph_objects as go

from flywheel.charts.kpis import FACTOR_NAMES
from flywheel.domain.loop.factors import FACTORS, SYMBOLS
from portal.charts import base_layout

BOTTLENECK_COLOUR = "#d9480f"

FACTOR_COLOUR = "#1f6feb"

MEASURED_COLOUR = "#868e96"


def diagnosis_chart(factors, *, currency: str, per_month: str = "per month") -> go.Figure:
    """Monthly EBITDA each factor gains alone at its target if demand follows, ranked
    (bottleneck first)."""
    labels = [f"{f.symbol} {f.label}" for f in factors]
    gains = [float(f.ebitda_gain_per_month) for f in factors]
    colours = [
        BOTTLENECK_COLOUR if i == 0 and gains[0] > 0 else FACTOR_COLOUR for i in range(len(factors))
    ]
    layout = base_layout(
        x_title=f"EBITDA gained {per_month} at the target if demand follows ({currency})",
        y_title="",
    )
    layout["yaxis"] = {"autorange": "reversed", "automargin": True}
    layout["showlegend"] = False
    layout["margin"] = {"l": 150, "r": 30, "t": 20, "b": 60}
    fig = go.Figure(layout=layout)
    fig.add_bar(
        y=labels,
        x=gains,
        orientation="h",
        marker_color=colours,
        text=[f"{g:,.0f}" for g in gains],
        textposition="auto",
        hovertemplate="%{y}: %{x:,.0f} " + currency + f" {per_month}<extra></extra>",
    )
    return fig


def factors_chart(measured) -> go.Figure:
    """The six factors, measured against projected (the simulator redraws the second)."""
    labels = [name for _, name in FACTOR_NAMES]
    values = [
        None if getattr(measured, f) is None else float(getattr(measured, f)) * 100 for f in FACTORS
    ]
    layout = base_layout(y_title="Percent", x_title="")
    layout["barmode"] = "group"
    layout["margin"] = {"l": 60, "r": 10, "t": 20, "b": 110}
    fig = go.Figure(layout=layout)
    fig.add_bar(x=labels, y=values, name="measured", marker_color=MEASURED_COLOUR)
    fig.add_bar(x=labels, y=values, name="projected", marker_color=FACTOR_COLOUR)
    return fig


def realized_chart(rows: list[dict]) -> go.Figure:
    """Projected against realized uplift per lever and factor, in percent."""
    x = [f"{r['lever']} · {SYMBOLS.get(r['factor'], r['factor'])}" for r in rows]
    layout = base_layout(y_title="Uplift of the factor (%)", x_title="Lever · factor")
    layout["barmode"] = "group"
    fig = go.Figure(layout=layout)
    fig.add_bar(
        x=x,
        y=[r["projected_uplift"] * 100 for r in rows],
        name="projected",
        marker_color=MEASURED_COLOUR,
    )
    fig.add_bar(
        x=x, y=[r["realized_uplift"] * 100 for r in rows], name="realized", marker_color="#2b8a3e"
    )
    return fig
