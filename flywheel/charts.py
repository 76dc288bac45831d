"""Plotly figures of the KPI engine (from measured KPIs and snapshots)."""

import plotly.graph_objects as go

from portal.charts import base_layout, colour_of

FACTORS = [
    ("availability", "α availability"),
    ("occupancy", "β occupancy"),
    ("efficiency", "η efficiency"),
    ("sla_delivery", "σ SLA delivery"),
    ("sell_through", "s sell-through"),
    ("price_realization", "ρ price realization"),
]


def waterfall_chart(values: dict) -> go.Figure:
    """From 100% of calendar capacity through α, β, η to TEF, then σ, s, ρ to TFI: each
    step multiplies the level by its factor; the bars multiply to the TFI shown."""
    x, y, measure, text = ["Calendar capacity"], [100.0], ["absolute"], ["100%"]
    level = 100.0
    for key, label in FACTORS:
        factor = values.get(key)
        factor = 0.0 if factor is None else float(factor)
        new_level = level * factor
        x.append(label)
        y.append(new_level - level)
        measure.append("relative")
        text.append(f"×{factor:.1%}")
        level = new_level
        if key == "efficiency":
            x.append("TEF")
            y.append(0)
            measure.append("total")
            text.append(f"{level:.1f}%")
    x.append("TFI")
    y.append(0)
    measure.append("total")
    text.append(f"{level:.1f}%")
    layout = base_layout(y_title="Share of calendar GPU time (%)", x_title="")
    layout["yaxis"]["range"] = [0, 115]
    layout["showlegend"] = False
    fig = go.Figure(layout=layout)
    fig.add_trace(
        go.Waterfall(
            x=x,
            y=y,
            measure=measure,
            text=text,
            textposition="outside",
            connector={"line": {"color": "#adb5bd"}},
            decreasing={"marker": {"color": "#e8590c"}},
            increasing={"marker": {"color": "#2b8a3e"}},
            totals={"marker": {"color": "#1f6feb"}},
        )
    )
    return fig


def trend_chart(rows: list[dict], *, incidents: list[tuple] = ()) -> go.Figure:
    """Daily TEF and TFI (percent) from the day snapshots, a day without a figure left as a
    gap, with the known causes of dips marked: each month's start (free allowances are used
    first, so little is sold) and the incidents, (start, end, title)."""
    fig = go.Figure(layout=base_layout(y_title="Percent of calendar GPU time"))
    for key, name, colour in (("tef", "TEF", "#1f6feb"), ("tfi", "TFI", "#d9480f")):
        fig.add_scatter(
            x=[r["day"] for r in rows],
            y=[None if r[key] is None else r[key] * 100 for r in rows],
            name=name,
            mode="lines+markers",
            line={"color": colour},
        )
    fig.add_hrect(y0=20, y1=35, fillcolor="#adb5bd", opacity=0.15, line_width=0,
                  annotation_text="typical TEF 20–35%", annotation_position="top left")  # fmt: skip
    for row in rows:
        if row["day"].day == 1:
            fig.add_vline(
                x=row["day"].isoformat(), line_dash="dot", line_color="#868e96",
                annotation_text="month starts: free allowances used first",
                annotation_position="top right", annotation_font_size=11,
            )  # fmt: skip
    for start, end, title in incidents:
        fig.add_vrect(
            x0=start.isoformat(), x1=end.isoformat(), fillcolor="#c92a2a", opacity=0.12,
            line_width=0, annotation_text=f"incident: {title[:40]}",
            annotation_position="bottom left", annotation_font_size=11,
        )  # fmt: skip
    return fig


def tps_chart(rows: list[dict]) -> go.Figure:
    """Actual against theoretical output tokens per second, per day."""
    fig = go.Figure(layout=base_layout(y_title="Output tokens per second"))
    fig.add_scatter(x=[r["day"] for r in rows], y=[r["theoretical_tps"] for r in rows],
                    name="theoretical (R_ref on every installed GPU)", mode="lines",
                    line={"color": "#868e96", "dash": "dash"})  # fmt: skip
    fig.add_scatter(x=[r["day"] for r in rows], y=[r["tps"] for r in rows], name="actual",
                    mode="lines+markers", line={"color": colour_of("factory")})  # fmt: skip
    return fig
