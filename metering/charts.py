"""Plotly figures of metering data (built from selector output, never from raw events)."""

import plotly.graph_objects as go

from portal.charts import base_layout, colour_of


def capacity_chart(rows: list[dict], pool: str) -> go.Figure:
    """Installed, healthy and busy GPUs of one pool over time."""
    fig = go.Figure(layout=base_layout(y_title="GPUs", x_title="Time (UTC)"))
    for field, name, dash in (
        ("installed", "installed", "dot"),
        ("healthy", "healthy", "dash"),
        ("busy", "busy", "solid"),
    ):
        fig.add_scatter(
            x=[r["time"] for r in rows],
            y=[r[field] for r in rows],
            name=f"{pool} {name}",
            mode="lines",
            line={"color": colour_of(pool), "dash": dash, "shape": "hv"},
        )
    return fig
