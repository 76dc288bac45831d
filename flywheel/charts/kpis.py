"""Charts of the KPI engine (measured KPIs and snapshots): the factors' waterfall from
calendar capacity to TFI, daily TEF and TFI with the causes of their dips, and actual
against theoretical tokens per second."""

import plotly.graph_objects as go

from flywheel.domain.loop.factors import FACTORS, LABELS, SYMBOLS
from portal.charts import band_mark, base_layout, colour_of

# The six factors as the charts name them: "α availability" … "ρ price realization".
FACTOR_NAMES = [(f, f"{SYMBOLS[f]} {LABELS[f]}") for f in FACTORS]


def waterfall_chart(values: dict) -> go.Figure:
    """From 100% of calendar capacity through α, β, η to TEF, then σ, s, ρ to TFI: each
    step multiplies the level by its factor; the bars multiply to the TFI shown."""
    x, y, measure, text = ["Calendar capacity"], [100.0], ["absolute"], ["100%"]
    level = 100.0
    for key, label in FACTOR_NAMES:
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


MONTH_START, MONTH_START_NAME = "#868e96", "month start (free allowances used first)"
INCIDENT = "#c92a2a"


def trend_chart(rows: list[dict], *, incidents: list[tuple] = ()) -> go.Figure:
    """Daily TEF and TFI (percent) from the day snapshots, a day without a figure left as a
    gap, with the known causes of dips marked: each month's start (free allowances are used
    first, so little is sold) and the incidents, (start, end, title)."""
    fig = go.Figure(layout=base_layout(y_title="% of calendar GPU time"))
    for key, name, colour in (("tef", "TEF", "#1f6feb"), ("tfi", "TFI", "#d9480f")):
        fig.add_scatter(
            x=[r["day"] for r in rows],
            y=[None if r[key] is None else r[key] * 100 for r in rows],
            name=name,
            mode="lines+markers",
            line={"color": colour},
        )
    # Marks as shapes explained by legend entries, incidents named on hover: no text on the
    # plot to cover the lines or to be clipped at its edges (portal.charts' band label aside).
    band, band_label = band_mark(
        20, 35, colour="#adb5bd", opacity=0.15, label="typical TEF 20–35%", label_at="top"
    )
    shapes, notes = [band], [band_label]
    starts = [row["day"].isoformat() for row in rows if row["day"].day == 1]
    for day in starts:
        shapes.append({"type": "line", "xref": "x", "x0": day, "x1": day, "yref": "y domain",
                       "y0": 0, "y1": 1, "line": {"color": MONTH_START, "dash": "dot"}})  # fmt: skip
    if starts:
        fig.add_scatter(x=[None], y=[None], mode="lines", name=MONTH_START_NAME,
                        line={"color": MONTH_START, "dash": "dot"})  # fmt: skip
    for start, end, _title in incidents:
        shapes.append({"type": "rect", "xref": "x", "x0": start.isoformat(),
                       "x1": end.isoformat(), "yref": "y domain", "y0": 0, "y1": 1,
                       "fillcolor": INCIDENT, "opacity": 0.12, "line": {"width": 0}})  # fmt: skip
    if incidents:
        fig.add_scatter(
            x=[start for start, _end, _title in incidents],
            y=[0] * len(incidents),
            mode="markers",
            name="incident (hover for its title)",
            marker={"color": INCIDENT, "symbol": "triangle-up", "size": 10},
            hovertext=[f"incident: {title}" for _start, _end, title in incidents],
            hoverinfo="text+x",
        )
    fig.update_layout(shapes=shapes, annotations=notes)
    if rows:  # the plotted days, not stretched by Plotly to fit the labels' text
        first, last = rows[0]["day"], rows[-1]["day"]
        fig.update_xaxes(range=[f"{first.isoformat()} 00:00", f"{last.isoformat()} 23:59"])
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
