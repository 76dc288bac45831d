"""Plotly figures of metering data (built from selector output, never from raw events)."""

import plotly.graph_objects as go

from portal.charts import base_layout, colour_of


def capacity_chart(rows: list[dict], pool: str) -> tuple[go.Figure, list[dict]]:
    """Installed, healthy and busy GPUs of one pool over time: the figure and, beside it,
    each line's points (figure_json's `points`: a month of 15-minute samples is too long
    for Plotly's object model)."""
    fig = go.Figure(layout=base_layout(y_title="GPUs", x_title="Time (UTC)"))
    times = [r["time"] for r in rows]
    points = []
    for field, name, dash in (
        ("installed", "installed", "dot"),
        ("healthy", "healthy", "dash"),
        ("busy", "busy", "solid"),
    ):
        fig.add_scatter(
            name=f"{pool} {name}",
            mode="lines",
            line={"color": colour_of(pool), "dash": dash, "shape": "hv"},
        )
        points.append({"x": times, "y": [r[field] for r in rows]})
    return fig, points
